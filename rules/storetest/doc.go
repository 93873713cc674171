// Package storetest is the conformance suite every rules.Store passes:
// memstore, redisstore against miniredis, and redisstore against a real
// redis-server. Run replays time-scripted tables (plain data: Cases and
// SeedTraceCases, so every store replays the very same ones) with a fake
// clock: time is only ever the now passed to Take, starting at Base, a
// multiple of one day since the Unix epoch so that every window of a
// second, a minute or an hour starts on it.
//
// The tables fix Store's contract (rules/store.go) and the algorithms'
// numbers (rules/counter): the lesson's Figure 1 trace
// (testdata/fixtures/seed_trace.json at the module root) for all six
// algorithms, the lesson's GCRA worked numbers, all-or-nothing, dry-run and
// attempts ops, peek/add/refund/reset, Remaining/ResetAfter/RetryAfter
// (rules.RetryNever for a cost over the burst), expiry, costs above 1,
// windows aligned to the epoch, clock steps back, a key whose algorithm
// changed, key budgets with room (rules.Op.Sensitive and MaxKeys, which
// change no decision until a memory store's budget is full), and invalid
// ops (an error, never a panic, and nothing consumed). The distinct/
// tables hold count_distinct's algorithm (rules.Distinct) to the same
// contract: below the limit every new value allowed, at it a known value
// allowed and a new one refused until the oldest expires (exactly a
// period after it was last seen), adds never past the limit, refunds and
// resets, attempts, dry runs, clock steps back, a lowered limit (which
// members stay, ties by value) and a sorted set shared with a sliding_log.
// The calendar/ tables (calendar.go) hold calendar windows (rules.Op.Calendar:
// a fixed_window of a day, week or month in a time zone) to their
// boundaries: month ends and leap Februaries, ISO weeks, DST days of 23
// and 25 hours in Paris and New York, and a caller's clock on either side
// of the store's.
// Generated checks add a sliding_log exactness property (no
// rolling period ever holds more than Limit), a concurrency check of one
// call's atomicity, and a differential run against counter.Check and
// counter.Settle, which every store must match bit for bit (distinct
// included, with values covering its encodings).
//
// Keys and TTLs, as every store keeps them: a key whose counter.Settle TTL is
// 0 is not stored (its state is empty), and a key must live until a call's
// now reaches the expiry its last write set (that call's now plus the TTL).
// Dropping it then, or keeping it longer, is invisible: rules' tests prove a
// state at or after its expiry decides and settles exactly as a fresh one.
// Storing an empty state is not invisible: a later call with an earlier now
// (a clock step back) would read it, and the differential run catches that.
//
// Run calls newStore once per case and closes every store it gets. Cases run
// in parallel, on keys unique to the case and to the Run call, so one shared
// backend (a Redis database) serves them all and leftovers of an earlier run
// cannot interfere.
//
// RunWith adjusts the run to a store's documented guarantees: with
// Options.PerShard (redisstore on a Redis Cluster, atomic per hash slot),
// every table still passes unchanged, and the concurrency check asserts the
// bound such a store documents instead of one call's atomicity across
// shards: never more admitted than a limit, and every key charged for the
// admitted requests exactly once the calls have returned.
package storetest
