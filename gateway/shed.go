package gateway

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/behaviour/shed"
	"github.com/edge-gateway/edge/rules"
)

// Load shedding's answer and the in-flight lifecycle's last resort
// (rules/inflight.go, behaviour/shed, docs/policy.md, "Load shedding").
//
// A shed request is answered 503, never 429: 429 judges the caller, 503
// the system (RFC 9110 §15.6.4). On an ordinary route it carries
// Retry-After (load_shedding retry_after, spread by its retry_after_jitter,
// never earlier); on a sensitive route it is the bare 503 every other
// unavailable answer is, with no Retry-After and nothing that tells a shed
// from a store outage.

// shed answers a shed request: 503, bare on a sensitive route, with
// Retry-After on an ordinary one. It logs the shed at info (the decision
// log, docs/operations.md), at most once a second, naming the priority and
// what was saturated (the adaptive rule, or "max_in_flight" for the node's
// ceiling) and how many sheds since the last line went unlogged.
func (s *Server) shed(ctx *fasthttp.RequestCtx, rs *reqState, d *rules.Decision) {
	unavailable(ctx)
	if !d.Sensitive {
		wait := jitteredSeconds(d.RetryAfter, shed.Jitter(s.Policy()), s.jitterDraw())
		rs.hdr = strconv.AppendInt(rs.hdr[:0], wait, 10)
		ctx.Response.Header.SetBytesV(fasthttp.HeaderRetryAfter, rs.hdr)
	}
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	// Shedding comes in floods exactly when the node is saturated: at
	// most one line a second, naming how many it stands for (edge_shed_total
	// counts every one).
	sec := s.now().Unix()
	if last := s.shedLogAt.Load(); last >= sec || !s.shedLogAt.CompareAndSwap(last, sec) {
		s.shedLogSkipped.Add(1)
		return
	}
	by := "max_in_flight"
	if d.Refusing != nil {
		by = d.Refusing.Name
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "shed",
		slog.String("priority", shed.RequestPriority(rs.sc).String()),
		slog.String("saturated", by),
		slog.String("method", string(ctx.Method())),
		slog.String("path", string(rs.canon)),
		clientAttr(rs), // the client's keyed hash, never its address
		slog.Int64("shed_unlogged", s.shedLogSkipped.Swap(0)),
	)
}

// registerShed registers load shedding's metrics: edge_shed_total and
// edge_shed_dry_run_total by priority, and the node's edge_in_flight.
func registerShed(reg *prometheus.Registry, s *Server) {
	for p := shed.PriorityLow; int(p) < shed.NumPriorities; p++ {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "edge_shed_total",
			Help:        "Requests shed (answered 503 before anything was counted) because the origin was saturated for their priority: the node's max_in_flight or an adaptive rule's limit, by priority.",
			ConstLabels: prometheus.Labels{"priority": p.String()},
		}, func() float64 { n, _ := shed.Stats(s.engine); return float64(n[p]) }))
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "edge_shed_dry_run_total",
			Help:        "Requests a dry-run adaptive rule or the node's max_in_flight under node-wide dry-run would have shed, and forwarded, by priority.",
			ConstLabels: prometheus.Labels{"priority": p.String()},
		}, func() float64 { _, dry := shed.Stats(s.engine); return float64(dry[p]) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edge_in_flight",
		Help: "Requests this node has at the origin now (forwarded and not yet answered, or held by a queue), counted while load_shedding sets max_in_flight.",
	}, func() float64 { return float64(shed.InFlight(s.engine)) }))
}

// releaseInflight gives back what the request still holds in flight when
// the origin never answered it (Settle did not run): its leases, in a store
// call of their own that a shutdown does not cancel, and its local slots.
func (s *Server) releaseInflight(rs *reqState) {
	if !rs.sc.Holds() {
		return
	}
	if err := s.engine.Release(context.Background(), s.now(), rs.sc); err != nil {
		s.m.settleErrors.Inc()
	}
}
