package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/rules"
)

// numOutcomes bounds the per-rule counter table.
const numOutcomes = rules.NumOutcomes

// metricOutcome is the `decision` label of edge_decisions_total for an
// outcome (docs/policy.md, "Decisions"), or "" for outcomes that are not
// decisions (a rule
// skipped for a missing optional identity). A 400 for an identity is
// counted as the outcome names it, never as deny, which is a refusal for
// the limit or the rule's action; a dry-run rule's would-be 400 is counted
// the same way (it is the identity that is bad, not the limit).
func metricOutcome(o rules.Outcome) string {
	switch o {
	case rules.OutcomeAllow:
		return "allow"
	case rules.OutcomeDeny:
		return "deny"
	case rules.OutcomeInvalid:
		return "invalid_identity"
	case rules.OutcomeMissing:
		return "missing_identity"
	case rules.OutcomeDryRunDeny:
		return "dry_run_deny"
	case rules.OutcomeStoreErrorAllow:
		return "store_error_allow"
	case rules.OutcomeStoreErrorDeny:
		return "store_error_deny"
	case rules.OutcomeExempt:
		return "skip" // an action = "skip" rule exempted the request from the rule
	}
	return ""
}

// verdictNames label edge_requests_total.
var verdictNames = [...]string{
	rules.Forward:         "forward",
	rules.RefuseLimit:     "refuse_limit",
	rules.RefuseForbidden: "refuse_forbidden",
	rules.RejectMissing:   "reject_missing_identity",
	rules.RejectInvalid:   "reject_invalid_identity",
	rules.Unavailable:     "unavailable",
	rules.Shed:            "shed",
}

// metrics are the node's Prometheus metrics. Label handles used on the
// request path are resolved once (at start or on reload), never per request.
type metrics struct {
	decisions      *prometheus.CounterVec
	verdicts       [len(verdictNames)]prometheus.Counter
	malformed      prometheus.Counter
	upstreamErrors prometheus.Counter
	// upstreamFailures counts the origin's failures by reason
	// (upstream_health.go).
	upstreamFailures [numFailReasons]prometheus.Counter
	settleErrors     prometheus.Counter
	settleInvalid    prometheus.Counter // settle_from values clamped (cost.go)
	bodyParses       prometheus.Counter

	// responses counts answers by route and status class (routeHandles
	// resolves its handles at install); reloads by result, refused ([0])
	// and ok ([1]) (ops_metrics.go).
	responses *prometheus.CounterVec
	reloads   [2]prometheus.Counter

	queueDropped, queueFull prometheus.Counter // queue.go

	timeouts prometheus.Counter // the public listener's 408s (conns.go)

	latency latency // the request and origin histograms (latency_metrics.go)
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_decisions_total",
			Help: "Decisions of each rule on the requests it matched, by rule and decision (allow, deny, dry_run_deny, store_error_allow, store_error_deny, invalid_identity, missing_identity).",
		}, []string{"rule", "decision"}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_malformed_requests_total",
			Help: "Requests refused with 400 before any rule, for a path that cannot be canonicalised or a host that cannot be read one way only.",
		}),
		upstreamErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_upstream_errors_total",
			Help: "Forwarded requests the origin did not answer (502 or 504 to the client).",
		}),
	}
	m.settleErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_settle_errors_total",
		Help: "Post-response store calls (reset_on_success) that failed; the counters stay as charged.",
	})
	m.bodyParses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_body_parses_total",
		Help: "Requests whose body was parsed for an identity (only routes with identity rules parse bodies).",
	})
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_requests_total",
		Help: "Requests the edge decided, by verdict (forward, refuse_limit, refuse_forbidden, reject_missing_identity, reject_invalid_identity, unavailable, shed).",
	}, []string{"verdict"})
	for i, n := range verdictNames {
		m.verdicts[i] = requests.WithLabelValues(n)
	}
	dry := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edge_dry_run",
		Help: "1 when the whole node is in dry-run (flag, policy or runtime toggle), 0 otherwise.",
	}, func() float64 {
		if s.engine.DryRunAt(s.now()) || s.Policy().DryRun {
			return 1
		}
		return 0
	})
	reg.MustRegister(m.decisions, requests, m.malformed, m.upstreamErrors, m.settleErrors, m.bodyParses, dry)
	m.registerOps(reg, s)
	m.registerCost(reg)
	m.registerQueue(reg, s)
	registerShed(reg, s)     // shed.go
	registerAdaptive(reg, s) // adaptive_metrics.go
	m.registerUpstream(reg, s)
	m.registerRuntime(reg) // go_*, process_*, edge_build_info, the latency histograms (latency_metrics.go)
	return m
}
