// Package failclosed is a rules.Store decorator that decides what a request
// gets when the counter store (Redis, in a fleet) is slow, down or refusing
// connections, and keeps a sick store from slowing every request.
//
// It owns four things:
//
//   - A circuit breaker. After FailureThreshold consecutive failed calls
//     (lasting FailureSpan from the first, when set: a burst of failures
//     from one coalesced round trip does not open it) the breaker opens
//     and Take stops calling the inner store. After Cooldown
//     one call, and only one, probes it (half-open); every other call keeps
//     failing fast until the probe answers. A successful probe closes the
//     breaker, a failed one reopens it for another Cooldown. A background
//     prober probes on its own while the breaker is open, so a node with no
//     traffic (say, one a strict readiness check took out of its load
//     balancer) still notices the store coming back: with the defaults the
//     node is healthy again well within one second of the store returning.
//     An inner store that is a Liveness (it counts the replies its backend
//     sends, late ones included) gets a breaker that opens on silence
//     rather than on failures: calls that miss their budget while replies
//     keep coming are late, not lost, so they are answered by their
//     on_store_error one by one and the breaker stays closed; and an open
//     breaker that sees a reply probes without waiting out its Cooldown.
//     Otherwise a node saturated on purpose, whose calls miss their budget
//     while the store is up, would answer every call by on_store_error for
//     a Cooldown at a time (docs/attacks.md, "Saturation fail-open").
//   - Per-rule on_store_error (rules.Op.OnError). When the store cannot
//     decide, every op of the call is answered from its rule's mode and
//     marked rules.Result.StoreError: FailOpen allows, FailClosed refuses
//     (the gateway answers 503, RFC 9110 §15.6.4: docs/policy.md,
//     "on_store_error"), FailLocal
//     asks a local in-memory bucket (rules/memstore) running the same
//     algorithm on the same key at the rule's limit and burst divided by the
//     fleet size, rounded up, at least 1. The policy loader defaults the mode
//     to deny for sensitive rules (login, signup, OTP) and allow elsewhere.
//     The rule comes from the lesson ("Fail open or fail closed"; "What
//     happens if Redis goes down?"): fail open and alert for ordinary API
//     limits, because minutes without limits beat an outage; fail closed
//     where the limit guards money or security; or fall back to a local
//     bucket at the limit divided by the pod count.
//   - A local deny cache of keys already over their limit, as envoyproxy's
//     ratelimit does (base_limiter.go, IsOverLimitWithLocalCache): when the
//     store refuses an enforcing take, the key is remembered until the
//     refusal's RetryAfter, and calls on that key are refused locally
//     without a round trip, so a refused flood does not hammer Redis.
//   - The degraded-state signal: Degraded for /readyz, State for the
//     breaker gauge, Stats for the counters. The package imports no metrics
//     library; nodestore's StoreMetrics exports these.
//
// # Time budget
//
// The budget of a call (the policy's store timeout, 5ms by default) is the
// inner store's to enforce: redisstore sets the client's pool, read and
// write timeouts from it (a new connection's dial has a budget of its own,
// redisstore.Options.DialTimeout, since a TLS handshake outlasts a call's
// budget), and memstore never blocks on I/O. The house
// style bans context.WithTimeout per request, and a goroutine or a timer per
// call would make the hot path allocate, so failclosed adds nothing to the
// call: ctx is passed through unchanged, and an inner store must honour its
// own budget (both of ours do). What failclosed does guard is the breaker:
// a probe that has not answered within ProbeTimeout is given up on, so one
// hung call cannot hold the breaker half-open forever, and the background
// prober calls the store under a context.WithTimeout of ProbeTimeout (it is
// not on the request path).
//
// # Errors
//
// Take answers every call it can decide and then returns nil, whatever the
// inner store said: an inner error is counted, fed to the breaker and turned
// into on_store_error answers. Take returns an error, having called nothing,
// only for a caller's bug: len(res) != len(ops), or an op counter.ValidateOp
// refuses. Such calls never count as store failures, so a bad op cannot
// open the breaker. An inner error while the caller's ctx is cancelled
// (context.Canceled: the client or the server went away) is answered the
// same way but not held against the store; a deadline that passed is: the
// store was too slow.
//
// # Deny cache accuracy
//
// A call is answered from the deny cache only when every op is an OpTake or
// OpPeek without Attempts (Attempts, Add, Refund and Reset ops must reach
// the store, which is why such calls bypass the cache), and some enforcing
// OpTake's key is cached. The cached ops are refused with the RetryAfter
// and ResetAfter left on their refusal; every other op is reported Allowed
// with Remaining, ResetAfter and RetryAfter zero, since the store was not
// asked. Nothing consumes, exactly as the store would have done for a
// refused request, so the request's decision is always the store's
// (TestDenyCacheDifferential replays random calls against a plain memstore
// to hold it to that). A dry-run op or a peek in such a call is not
// evaluated: its would-deny goes unrecorded for the calls the cache
// answers. Dry-run ops are never cached as refusals and never looked up.
// A refusal is remembered for the RetryAfter the store gave for the cost of
// that call, and answers only requests of that same cost (a cheaper one
// could pass sooner). A Reset, Refund or Add this node sends for a cached
// key drops it from the cache; one sent by another node of the fleet does
// not: a key another node reset stays refused here until its RetryAfter at
// most, and a key other nodes keep charging gets a RetryAfter shorter than
// the store's (the client comes back early and is refused again).
//
// # Clocks
//
// The breaker reads Options.Clock (rules.SystemClock by default), only when
// it is not closed or a call failed: a healthy store costs no clock read.
// The deny cache and the local buckets use the now each call passes, like
// every store.
//
// # Concurrency
//
// A Store is safe for concurrent use. The breaker is one atomic word (state
// and the time of its last transition) plus a failure count, so the healthy
// path takes no lock. The deny cache is a fixed, preallocated
// set-associative table whose readers take no lock (a sequence counter per
// set; writers serialise on the set's mutex), so a refused flood on one key
// does not contend on a mutex. The local fallback is a memstore, atomic per
// call like any store. Take allocates nothing: not on success, not from the
// deny cache, not on failure with allow or deny, and not with local for keys
// the local store already holds. Close stops the background prober, then
// closes the inner store and the local one.
package failclosed
