package nodestore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/rules/leasestore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// StoreMetrics returns the collectors of a failure-handling store's
// counters, read from st at each scrape: store errors, on_store_error
// answers by mode, deny-cache hits and the breaker's state, for
// gateway.Options.Collectors.
func StoreMetrics(st *failclosed.Store) []prometheus.Collector {
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
	return []prometheus.Collector{
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
	}
}

// RedisMetrics returns the collectors of a Redis store's client counters,
// read from stats at each scrape (redisstore.Store.Stats; the package doc
// of rules/redisstore says what each means), for gateway.Options.Collectors.
func RedisMetrics(stats func() redisstore.Stats) []prometheus.Collector {
	counter := func(name, help string, f func(redisstore.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	return []prometheus.Collector{
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
	}
}

// LeaseMetrics returns the collectors of the budget leases' counters, read
// from stats at each scrape (leasestore.Store.Stats; its package doc says
// what each answer is), for gateway.Options.Collectors: the leased ops by
// how they were answered, and the calls sent again after a refused lease.
func LeaseMetrics(stats func() leasestore.Stats) []prometheus.Collector {
	answered := func(answer string, f func(leasestore.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "edge_store_leased_ops_total",
			Help:        "Ops of rules with budget_lease { }, by how they were answered: local (from units this node held, no store call), batch (sent to take a lease's units), passed (sent at their own cost: near the limit, or while a lease call was in flight).",
			ConstLabels: prometheus.Labels{"answer": answer},
		}, func() float64 { return float64(f(stats())) })
	}
	return []prometheus.Collector{
		answered("local", func(s leasestore.Stats) uint64 { return s.Local }),
		answered("batch", func(s leasestore.Stats) uint64 { return s.Batches }),
		answered("passed", func(s leasestore.Stats) uint64 { return s.Passed }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_store_lease_retries_total",
			Help: "Store calls sent again at their ops' own costs because a lease's batch was refused with fewer units left than its size.",
		}, func() float64 { return float64(stats().Retries) }),
	}
}
