// Package nodestore is what a node runs beside its counter store, for the
// stores that need it, so that the gateway knows none of them by name
// (docs/architecture.md, "Packages"): the Redis store's client counters
// as Prometheus metrics (RedisMetrics, for gateway.Options.Collectors) and
// the watch that finds a Redis that came back without its data
// (EpochWatch). cmd/edge wires them; the memory store's key budgets need
// nothing here (the gateway exports a store's rules.KeyBudgetUse).
package nodestore
