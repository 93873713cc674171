package gateway

import (
	"context"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/rules"
)

// The operational metrics of docs/operations.md, "Metrics and alerts":
// answers by route and status, reloads by result, visitor IDs minted and
// the store's latency. Every label value comes from the policy (a rule's
// name) or from a fixed list here, never from a request, so a flood of
// distinct keys and paths adds no series (TestMetricCardinalityIsBounded).

// noRoute is the route label of a request no rule matched.
const noRoute = "(none)"

// statusClasses are edge_http_responses_total's status labels, by status
// code / 100 (RFC 9110 §15: 1xx to 5xx; fasthttp never sends another).
var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// routeCounters are the edge_http_responses_total handles of one policy:
// [0] is noRoute, [i+1] the policy's rule i, each by status class.
type routeCounters [][len(statusClasses)]prometheus.Counter

// allowLogEvery is the sampling of allowed requests in the decision log:
// one in allowLogEvery allowed requests a rule matched is logged at info,
// node-wide (every refusal and would-be refusal is logged; observe). At
// 10000 allowed requests a second that is 10 lines a second.
const allowLogEvery = 1000

// storeBuckets are edge_store_call_duration_seconds' buckets, in seconds:
// from 50µs (a memory store, a Redis on loopback) to 100ms, around the
// Redis store's default budget of 5ms (redisstore.DefaultTimeout), past
// which a call fails.
var storeBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3}

func (m *metrics) registerOps(reg *prometheus.Registry, s *Server) {
	m.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_http_responses_total",
		Help: `Answers of the public listener, by route (the first rule the request matched, "(none)" when none did) and status class (1xx to 5xx).`,
	}, []string{"route", "status"})
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_reloads_total",
		Help: "Policy reloads (SIGHUP, file change, POST /admin/reload) by result: ok (swapped in) or refused (the running policy stayed).",
	}, []string{"result"})
	m.reloads[0] = reloads.WithLabelValues("refused")
	m.reloads[1] = reloads.WithLabelValues("ok")
	// The (none) route exists from the start, so rate() sees its first answers.
	for _, c := range statusClasses {
		m.responses.WithLabelValues(noRoute, c)
	}
	reg.MustRegister(m.responses, reloads)
	s.listenerTLS.register(reg) // edge_tls_handshake_errors_total, edge_tls_certificate_expiry_timestamp_seconds (tls.go)
	if h := s.health; h != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_store_degraded",
			Help: "1 while the store is degraded, as /readyz reports it (a Redis store: its breaker is open or half-open, each rule answering by its on_store_error), 0 otherwise.",
		}, func() float64 {
			if d, _ := h.Degraded(); d {
				return 1
			}
			return 0
		}), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_store_refused",
			Help: "1 while the store refuses this node (its credentials or permissions: WRONGPASS, NOAUTH, NOPERM), from the first refused call until the store answers one; /readyz is then 503 when rules fail closed. 0 otherwise.",
		}, func() float64 {
			if r, _ := h.Refused(); r {
				return 1
			}
			return 0
		}))
	}
}

// routeHandles resolves p's edge_http_responses_total handles, once per
// install: the request path only indexes them.
func (m *metrics) routeHandles(p *rules.Policy) routeCounters {
	rc := make(routeCounters, len(p.Rules)+1)
	for i := range rc {
		name := noRoute
		if i > 0 {
			name = p.Rules[i-1].Name
		}
		for c, class := range statusClasses {
			rc[i][c] = m.responses.WithLabelValues(name, class)
		}
	}
	return rc
}

// countResponse counts the answer ctx carries under the route of rs's
// matches (none: ok is false, a request refused before any rule), and its
// time under its verdict. It runs once the answer is final, forwarded or
// the edge's own.
func (s *Server) countResponse(ctx *fasthttp.RequestCtx, st *policyState, rs *reqState, ok bool) {
	route := 0
	if ok && len(rs.sc.Matches) > 0 {
		route = rs.sc.Matches[0].Rule.Index + 1
	}
	verdict := len(verdictNames) // malformed
	if ok {
		verdict = int(rs.d.Verdict)
	}
	s.m.observeRequest(ctx, verdict) // edge_request_duration_seconds (latency_metrics.go)
	class := ctx.Response.StatusCode()/100 - 1
	if class < 0 || class >= len(statusClasses) || route >= len(st.routes) {
		return
	}
	st.routes[route][class].Inc()
}

// CountReload counts one reload of the policy, whatever started it
// (SIGHUP, a change of the file, POST /admin/reload), in
// edge_reloads_total: ok when the new policy was swapped in, refused when
// the running one stayed.
func (s *Server) CountReload(ok bool) {
	i := 0
	if ok {
		i = 1
	}
	s.m.reloads[i].Inc()
}

// sampleAllow logs one in allowLogEvery requests that rules matched and
// all allowed (allowLogEvery), with the rules and their keys' keyed
// hashes: never a raw IP or identity. A request any rule refused, or
// would have, is observe's to log.
func (s *Server) sampleAllow(ctx *fasthttp.RequestCtx, rs *reqState, d *rules.Decision) {
	if d.Verdict != rules.Forward || len(rs.sc.Matches) == 0 || !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	for i := range rs.sc.Matches {
		if rs.sc.Matches[i].Outcome != rules.OutcomeAllow {
			return
		}
	}
	if s.allowsSeen.Add(1)%allowLogEvery != 0 {
		return
	}
	attrs := make([]slog.Attr, 0, 4+len(rs.sc.Matches))
	attrs = append(attrs,
		slog.String("decision", "allow"),
		slog.Int("sample_one_in", allowLogEvery),
		slog.String("method", string(ctx.Method())),
		slog.String("path", string(rs.canon)),
	)
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if m.Value > 0 {
			continue // a rule is logged once, by its first value's key
		}
		v := "" // a rule without a counter (an action = "log" rule)
		if m.Op >= 0 {
			k := rs.sc.Ops[m.Op].Key
			v = hex.EncodeToString(k[9:])
		}
		attrs = append(attrs, slog.Group("rule", slog.String("name", m.Rule.Name), slog.String("key", v)))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "allowed (sampled)", attrs...)
}

// timedStore times every call of the store the Engine makes, one a
// request, in edge_store_call_duration_seconds: result "ok" when the store
// decided every op, "error" when it failed or answered an op by the rule's
// on_store_error (rules.Result.StoreError: Redis failed or timed out, the
// breaker was open, a sensitive rule's key budget was full). With
// failclosed in front of Redis, "ok" includes the deny cache's answers,
// which never reach Redis. Observing allocates nothing.
type timedStore struct {
	inner     rules.Store
	vec       *prometheus.HistogramVec
	ok, error prometheus.Observer
}

var _ rules.Store = (*timedStore)(nil)

func newTimedStore(inner rules.Store) *timedStore {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "edge_store_call_duration_seconds",
		Help:    "Seconds each request's one store call took, by result: ok (the store decided every op) or error (the store failed or an op was answered by its rule's on_store_error).",
		Buckets: storeBuckets,
	}, []string{"result"})
	return &timedStore{inner: inner, vec: vec, ok: vec.WithLabelValues("ok"), error: vec.WithLabelValues("error")}
}

func (t *timedStore) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	start := time.Now()
	err := t.inner.Take(ctx, now, ops, res)
	took := time.Since(start).Seconds()
	if err != nil {
		t.error.Observe(took)
		return err
	}
	for i := range res {
		if res[i].StoreError {
			t.error.Observe(took)
			return nil
		}
	}
	t.ok.Observe(took)
	return nil
}

// Close closes the inner store (the Server never calls it: Options.Store
// is its owner's to close).
func (t *timedStore) Close() error { return t.inner.Close() }

// storeOf is t as a rules.Store, nil (no store, which NewEngine refuses)
// when t is.
func storeOf(t *timedStore) rules.Store {
	if t == nil {
		return nil
	}
	return t
}
