package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
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

// registerStoreMetrics exports a failure-handling store's counters: store
// errors, on_store_error answers by mode, deny-cache hits and the breaker.
func registerStoreMetrics(reg *prometheus.Registry, st StoreStats) {
	counter := func(name, help string, f func(failclosed.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(st.Stats())) })
	}
	fallback := func(mode, decision string, f func(failclosed.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "edge_store_fallback_total",
			Help:        "Ops the store could not decide, answered by the rule's on_store_error, by mode (allow, deny, local) and decision.",
			ConstLabels: prometheus.Labels{"mode": mode, "decision": decision},
		}, func() float64 { return float64(f(st.Stats())) })
	}
	reg.MustRegister(
		counter("edge_store_errors_total", "Store calls that failed or timed out (breaker probes included).", func(s failclosed.Stats) uint64 { return s.StoreErrors }),
		counter("edge_store_short_circuits_total", "Calls answered by on_store_error without calling the store: the breaker was open.", func(s failclosed.Stats) uint64 { return s.ShortCircuits }),
		counter("edge_store_deny_cache_hits_total", "Calls answered from the local cache of keys already over their limit.", func(s failclosed.Stats) uint64 { return s.DenyCacheHits }),
		counter("edge_store_breaker_opens_total", "Times the store's circuit breaker opened.", func(s failclosed.Stats) uint64 { return s.BreakerOpens }),
		counter("edge_store_reset_holds_total", "Requests whose sensitive rules answered by on_store_error because Redis had come back without its data within reset_grace.", func(s failclosed.Stats) uint64 { return s.ResetHolds }),
		counter("edge_store_breaker_opens_withheld_total", "Runs of failed store calls that would have opened the breaker but did not: the store answered during them (late, not lost: a node short of CPU).", func(s failclosed.Stats) uint64 { return s.OpensWithheld }),
		counter("edge_store_probes_total", "Half-open probes of a store behind an open breaker.", func(s failclosed.Stats) uint64 { return s.Probes }),
		fallback("allow", "allow", func(s failclosed.Stats) uint64 { return s.FallbackAllow }),
		fallback("deny", "deny", func(s failclosed.Stats) uint64 { return s.FallbackDeny }),
		fallback("local", "allow", func(s failclosed.Stats) uint64 { return s.LocalAllow }),
		fallback("local", "deny", func(s failclosed.Stats) uint64 { return s.LocalDeny }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_store_breaker_state",
			Help: "The store's circuit breaker: 0 closed, 1 open, 2 half-open.",
		}, func() float64 {
			switch st.State() {
			case failclosed.BreakerOpen:
				return 1
			case failclosed.BreakerHalfOpen:
				return 2
			}
			return 0
		}),
	)
}

// registerRedisMetrics exports a Redis store's client counters (the
// package doc of rules/redisstore says what each means).
func registerRedisMetrics(reg *prometheus.Registry, stats func() redisstore.Stats) {
	counter := func(name, help string, f func(redisstore.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	reg.MustRegister(
		counter("edge_redis_pipelines_total", "Pipelines the Redis store wrote, each carrying the script calls of one or more concurrent requests.",
			func(s redisstore.Stats) uint64 { return s.Pipelines }),
		counter("edge_redis_shared_calls_total", "Requests whose script call went to Redis together with other concurrent requests' in one shared script call.",
			func(s redisstore.Stats) uint64 { return s.SharedCalls }),
		counter("edge_redis_late_reads_total", "Redis replies read after their deadline had fired with the reply already in the socket (the node was too busy to look in time).",
			func(s redisstore.Stats) uint64 { return s.LateReads }),
		counter("edge_redis_late_replies_total", "Requests decided by a Redis reply that came after their time budget (Redis answered late; the request waited for it rather than fail).",
			func(s redisstore.Stats) uint64 { return s.LateReplies }),
		counter("edge_redis_resets_total", "Times the node found Redis had come back without its data (its epoch gone or replaced): every counter, ban and lockout restarted from zero.",
			func(s redisstore.Stats) uint64 { return s.EpochResets }),
		counter("edge_redis_noscript_total", "Script calls answered NOSCRIPT (script cache flushed, restart, failover) and run again by EVAL.",
			func(s redisstore.Stats) uint64 { return s.NoScript }),
		counter("edge_redis_cross_slot_total", "Requests whose keys spanned several hash slots of a Redis Cluster.",
			func(s redisstore.Stats) uint64 { return s.CrossSlot }),
		counter("edge_redis_undos_total", "Cross-slot requests refused in one slot whose takes in the others were given back.",
			func(s redisstore.Stats) uint64 { return s.Undos }),
		counter("edge_redis_undo_errors_total", "Undo round trips that failed: their units stay taken until the keys decay.",
			func(s redisstore.Stats) uint64 { return s.UndoErrors }),
	)
}
