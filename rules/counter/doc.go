// Package counter holds the limit algorithms (gcra, token_bucket,
// leaky_bucket, fixed_window, sliding_window, sliding_log and
// count_distinct's distinct) and the table that names them: one entry per
// algorithm ([Spec]: its policy name, its id on the wire and in take.lua,
// what each store switches on, and its steps), which the memory store, the
// Redis store (its wire encoding, and take.lua's port table, checked
// against it by a test) and rules/storetest read. It imports nothing of
// the edge: rules names its types (rules.Op is [Op], rules.Key is [Key]),
// its Engine builds a request's ops and the stores decide each with [Check]
// and [Settle].
//
// # Exact in every store
//
// The algorithms are pure functions of ([State], now, [Op]) in integer
// microseconds, so that every store decides bit for bit alike: the memory
// store calls them and redisstore's Lua script is a line-by-line port. Lua numbers are doubles, exact only
// up to 2^53, so [ValidateLimits] keeps every intermediate value of every
// algorithm at or under [MaxExact], given a clock under 2^52 µs since the
// epoch (the year 2112). Go computes the same values in int64 without
// overflow.
//
// # One call, two passes
//
// A call goes in two passes over a request's ops (rules.Store's contract):
//
//	for i := range ops { res[i] = Check(&st[i], now, &ops[i]) }
//	refused := Refused(ops, res)
//	for i := range ops { ttl[i] = Settle(&st[i], now, &ops[i], refused, &res[i]) }
//
// Check decides against the state before the call; Settle applies what the
// contract says the op does ([Consume]) and fills Remaining, ResetAfter (the
// effective window, RateLimit's t) and a refused op's RetryAfter from the
// state after it. Every stored key gets the TTL Settle returns: the time
// until its state has decayed to empty, after which a missing key and the
// stored one decide alike. A TTL of 0 means the state is empty and need not
// be stored at all.
//
// Add may run a counter into debt ("charge an estimate up front and settle
// later, letting the balance go negative", the lesson says), by at most one
// full allowance: a gcra TAT at most now + 2×burst×T, a bucket at most one
// burst below empty, a window count at most 2×limit. A sliding_log never
// holds more than Limit timestamps, nor a distinct set more than Limit
// members, and so cannot run into debt. A take never runs into debt: one
// that does not fit (an Attempts op counted while refused) leaves the
// counter full.
//
// Clock skew: when now is earlier than the time a state was last written
// (another node's clock, or the wall clock stepping back), the state is read
// as of its own time: nothing refills and nothing expires, so a step back
// never grants a fresh allowance; the wait only grows by the skew.
//
// # Adding an algorithm
//
// An algorithm is a file of this package (gcra.go is one) holding its
// table entry and its steps, an id in the constants of algorithm.go (the
// next number: the id is on the wire and in stored state, so ids never
// change), its line in the table there and its case in each of the four
// switches of steps.go (TestEveryAlgorithmIsDispatched fails without
// them). The stores read the entry, and need nothing more but the
// algorithm's port in redisstore's take.lua (its Lua name and id in the
// port table, which TestTakeLuaMatchesTable holds to the table, and its
// cases of check, consume and report) and its conformance cases in
// rules/storetest (TestEveryAlgorithmHasCases names what is missing).
// docs/architecture.md, "Adding an algorithm", lists the files.
package counter
