// Package redisstore is the Redis rules.Store, for a fleet of edge nodes
// sharing one Redis (or one Redis Cluster), and the only package that
// imports go-redis.
//
// It owns one Lua script, take.lua (embedded), which ports the seven
// algorithms of rules/counter line by line (its port table is counter's
// table, TestTakeLuaMatchesTable checks) and runs one Store call on
// the server, atomically: pass 1 decides every op against the state before
// the call (counter.Check), pass 2 applies the all-or-nothing contract and
// stores each key's new state with its TTL (counter.Settle). Every request
// is one EVALSHA carrying all its keys, so one round trip (shared with
// other requests' when coalescing, below). The script works
// in integer microseconds; counter.ValidateLimits keeps every intermediate
// value under 2^53, where Lua's doubles are exact, and the script divides
// without rounding (math.fmod), so it decides bit for bit as memstore
// does: rules/storetest runs the same tables, the seed trace and a
// differential run against counter.Check and counter.Settle on both.
//
// The script's cost is Redis' CPU per request, which a fleet shares, so
// it runs a take without a sliding_log (the common call) as straight code
// with no closure and, for one op, no table but its reply; the port of
// the algorithms function by function runs the rest (sliding_log ops,
// undos). take.lua's header says why and how the two agree.
//
// # Time
//
// The script reads the server's clock (TIME), so a fleet shares one clock
// and the now passed to Take is not used. In a cluster each key lives on
// one master and uses that master's clock. Options.UseCallerClock, for
// tests only, passes the caller's now instead, so that the conformance
// tables run against a real Redis without sleeping.
//
// Calendar quotas (behaviour/calendar) are the exception that needs no
// zone data here: the node computes the window from its own clock, in the
// rule's time zone, and sends its start and length with the op (the
// start in the burst's slot, take.lua's header); the script counts in
// that window by TIME. Near a boundary the two clocks can disagree by
// their skew: a request the node puts in the old window after Redis has
// passed its end finds that window's count expired (its TTL was the
// window's end) and is decided against an empty count living 1µs, and
// a node behind joins the new window as soon as another node has written
// it (a stored window later than the op's stays current). The error is
// bounded by the skew, as for every algorithm; a window's quota is never
// granted twice over a whole day or month.
//
// # Keys and expiry
//
// A key is Options.Prefix followed by the 24-byte rules.Key in hex inside a
// hash tag, "edge:{…48 hex digits…}": the Key is already a keyed hash of
// its values, so nothing a client sent reaches Redis raw. It holds a short
// string, the algorithm's state (rules.State's fields) and the time, in
// µs, at which that state has decayed to empty. A sliding_log keeps its
// timestamps (at most Limit, the newest) in a sorted set beside it, the
// same name plus ":log", in the same hash slot; two timestamps in one
// microsecond get distinct members.
//
// Every write sets the key's TTL (PX) to the time its state takes to decay
// to empty, rounded up to whole milliseconds; a state that is empty is
// deleted, never stored, so no key is ever left without a TTL. The script
// also treats a state at or past its stored decay time as fresh, whatever
// Redis' own expiry (lazy, millisecond-grained, and on another clock in
// caller-clock mode, where every TTL gets CallerClockSlack more) has done
// with the key yet.
//
// # Failures and the time budget
//
// Options.Timeout, the budget of a call, is the client's pool-wait
// timeout, and the read and write timeout of a call on a connection of its
// own (DisableCoalescing, a cluster); establishing a connection (TCP, a
// TLS handshake, with Sentinel the question to a sentinel) has
// Options.DialTimeout, 1s by default, since a handshake is several round
// trips and some CPU; a dial is tried once. Calls do not dial in the
// steady state: idle connections are kept (no idle timeout; TCP keep-alive
// finds dead ones), and Ping, which the node runs at start and its
// breaker's probes run after an outage, opens the connections the
// flushers use. An uncoalesced call that finds no idle connection waits
// for the dial; a coalesced one is bounded by its own timer, below.
//
// A coalesced call (below) has a timer of its own from the moment it is
// queued, and its pipeline is read and written for 20 budgets. The budget
// bounds the store's silence, not its lateness nor the node's: past its
// budget, a call goes on waiting while the store answers (a reply that
// comes late is read and decides its calls; a flusher that a node short of
// CPU runs late still carries its call), and fails when the last pipeline
// failed below the script (dial, write or read), when the store is silent
// (a pipeline has been out for its silence, 4 budgets or twice the store's
// recent latency when that is longer, and no pipeline was answered since
// it was written: Redis down, asleep, paused or cut off), or after 20
// budgets in all. The recent latency is a decaying maximum of the time the
// answered pipelines took, so a link that is steadily slow is late, not
// silent; while it is over a budget, 6 spare flushers put more pipelines
// in flight, so that a call does not wait its 20 budgets for a flusher. A
// store that stops answering thus fails the calls queued then within about
// 4 budgets (twice its latency, on a slow link), and every later call at
// its budget; a store that answers late, now and then or on every reply,
// decides calls for up to 20 budgets (100ms at the default 5ms), but for
// the calls sent after a link turns slow past 4 budgets and before its
// first slow reply is read, which fail as on silence (docs/deploying.md,
// "A slow link"). Stats.LateReplies counts the calls a late reply decided.
// Either way the error is a net.Error whose Timeout()
// is true. Without this a node saturated by its own traffic (every core
// busy, goroutines waiting milliseconds for one) would see its healthy
// Redis as slow and apply on_store_error to most requests: allow lets a
// flood through, deny refuses everyone. Store.Replies counts the server's
// answers (script results and PONGs, late ones included), which makes
// the Store a failclosed.Liveness: its breaker opens on silence, not on
// calls failing while Redis answers. A caller's ctx deadline, when
// shorter, ends the call at it. Nothing is retried by the client library
// (MaxRetries and, in a cluster, MaxRedirects are -1): a retried EVALSHA
// that did run would charge twice. A Take that fails returns the error
// and the caller applies each rule's on_store_error (failclosed).
//
// # Store time
//
// The budget is meant to catch a slow or dead store, not a busy node. Go
// notices that a socket has data through its network poller, which a
// node whose every core is busy runs late (when a processor runs out of
// goroutines, or every 10ms from the runtime's monitor), while it runs
// timers on time; so under its own load a node can see a read deadline
// fire with Redis' reply already in the socket. The store's connections
// (storetime.go) therefore look, when a read times out before its first
// byte, whether the socket holds data (recv with MSG_PEEK|MSG_DONTWAIT)
// and if so read it (Stats.LateReads); a server that has not answered is
// a timeout at the same moment as before. The coalescer's timer follows
// the same rule (above). BENCHMARKS.md has what this changed under load.
//
// NOSCRIPT (the server restarted, failed over or flushed its script cache)
// means the script did not run, so the store runs it once more by EVAL,
// which also caches it again: nothing is counted twice (Stats.NoScript).
// New does no I/O, so a node starts while Redis is down; Ping checks the
// server and loads the script for readiness probes and start-up.
//
// Replies are decoded with checked type assertions and range checks: a
// malformed reply is ErrMalformedReply, never a panic.
//
// # TLS, ACL users and Sentinel
//
// A "rediss://" URL speaks TLS (1.2 at least) verified against Options.TLS's
// CA file or the system's pool, presenting its client certificate when the
// server asks for one (tls.go); Options.Password replaces the URL's
// password, so that it can come from the environment. A
// "redis+sentinel://[user:password@]MASTER@host:port,…" URL (or
// "rediss+sentinel://", TLS to the sentinels and the master alike) is
// go-redis' failover client, a *redis.Client whose dialer asks a sentinel
// for the master before each new connection and which drops its
// connections to the old master on the sentinels' +switch-master
// (sentinel.go). Everything above holds for it unchanged: one script call
// per Take, coalesced, never retried; a call in flight when the master
// fails fails; the new master answers the first call NOSCRIPT. What a
// failover forgets (writes the old master took and had not replicated) is
// docs/deploying.md's "Redis over TLS, ACLs and Sentinel".
//
// # Redis Cluster
//
// With a "redis+cluster://" URL, the ops of a call are grouped by hash
// slot. A call whose keys share one slot (every call of one op) is one
// script call, exactly as on a single Redis. Otherwise each slot's ops are
// one script call, atomic in its slot, the calls for one master go in one
// pipeline, and the masters are called in parallel: still one round trip.
// Each slot decides its own ops against its own state and settles them as
// if the request were allowed unless one of its own takes refuses. When
// some slot refuses the request, a second round trip undoes, in the other
// slots, what their takes consumed only because they looked allowed
// (OpTake ops without Attempts, dry-run ones included, and Attempts ones
// that made a new key, exactly those a single call would not have
// consumed: an attempt in a refused call charges a key that exists but
// makes no new one); other attempts ops, adds, refunds, resets and peeks
// are the same as in one call. The ops so undone report
// Allowed (their own verdict) and the Remaining and ResetAfter of the state
// after the undo.
//
// An undo restores the key exactly as the take found it when nothing else
// wrote the key in between (it compares the stored value; a sliding_log's
// changes on every write), so calls one at a time decide exactly as on a
// single Redis: rules/storetest's tables, the seed trace and the
// differential run pass against a cluster unchanged. When another call
// wrote the key in between, the undo gives back only what is verifiably
// still the refused request's own at the undo's time: for gcra the part of
// its emission intervals not yet passed, for the buckets its units not yet
// refilled or drained, for the windows its units while their window still
// counts, for sliding_log its own timestamps.
//
// The error bound, which TestClusterErrorBound and storetest's concurrent
// check (Options.PerShard) test against a real three-master cluster:
//
//   - Never over-admission. A take consumes only what one atomic call would
//     have, given its key's state, and an undo never gives back more than
//     its take put in and is still there: no key admits more than its limit
//     because of cross-slot calls, and once every call has returned (and
//     every undo has succeeded) each key is charged for exactly the
//     requests admitted.
//   - Over-refusal. Between a take and its undo (the slowest slot's round
//     trip, then the undo's: at most twice the budget, about 2×Timeout),
//     other requests see the refused request's units as taken. A key can
//     thus refuse early by up to the total cost of the cross-slot requests
//     on it that are being refused elsewhere at that moment: with R such
//     requests a second, about R × 2×Timeout × cost units (a thousand a
//     second at the 5ms default: 10 units). Under a refused flood on one
//     key and a tight limit on another, this can refuse requests the tight
//     key alone would have allowed; the test above logs how many.
//   - A failed undo (timeout, lost connection; Stats.UndoErrors) leaves its
//     units taken until the key decays (its TTL): more over-refusal, never
//     over-admission. The request stays refused.
//   - A call that fails in one slot returns the error; the slots that
//     answered keep what they took (no undo: the caller's on_store_error
//     decides the request, and failing open with the units taken is
//     correct). Failing closed, those units are over-refusal until they
//     decay.
//   - Clocks: each slot decides at its master's time; masters' clocks may
//     differ by their skew, which shifts each key's decisions as the
//     algorithms' clock-skew note says (a step back never refills).
//   - A slot that moved (MOVED, ASK: resharding) fails the call without
//     running; the client reloads its slot map in the background, and
//     later calls go to the new owner.
//
// # Coalescing
//
// On a single Redis, concurrent Takes share round trips: each queues its
// prepared script call, and a flusher (two per Store, so that one
// pipeline can be assembled while another waits for its replies) writes
// whatever is queued, up to 128 calls, as one pipeline, reads the replies
// and hands each caller its own. The calls of take.lua's fast path (takes
// without a sliding_log or undo payloads: nearly all of them) go together
// as one shared script call, which decides them one after another in
// queue order, each all-or-nothing exactly as alone, on one reading of
// the server's TIME (Stats.SharedCalls); the others go as an EVALSHA each.
// Every Take's ops are still in one script call, atomic on the server and
// never retried; what is shared is the write, the read, the server's read
// and write events and the script call's own cost (parsing the command,
// setting up Lua, TIME): on this project's 2-core machine about 15% of
// Redis' CPU per request at 64 connections. The price: a script error
// (a key of another type, Redis out of memory) fails every call of the
// shared call, where it would have failed one; each then gets its rule's
// on_store_error. A call whose caller's budget or context ended while it
// was queued is not sent. Calls answered NOSCRIPT go again by EVAL in one
// more pipeline. Close fails what is queued, stops the
// flushers and closes the connections (a pipeline in flight then fails).
// Options.DisableCoalescing sends each call on a connection of its own;
// on a Redis Cluster, a single-slot call is sent on its own as well.
//
// # Concurrency
//
// A Store is safe for concurrent use. A Take's call (its keys, arguments
// and go-redis command) comes from a pool and is rewritten in place, so a
// single-slot Take allocates only go-redis' decoding of the reply (and,
// amortized over a pipeline, the pipeline's own); a cross-slot call on a
// cluster runs one goroutine per extra master it calls.
package redisstore
