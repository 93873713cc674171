package counter

import "time"

// The types of this file are the stores' vocabulary as much as the
// algorithms': rules names them all (rules.Op is Op, rules.Key is Key), so
// that the algorithms read a store's op itself, with nothing copied on the
// decision path, and policy code writes rules.Op{Kind: rules.OpTake, …}.

// Key identifies one counter. Bytes [0:8] are a hash of the rule's name (so
// counters follow a rule across reloads), byte [8] is the characteristic kind
// and bytes [9:24] a keyed hash of the characteristic values in the engine's
// key format (internal/keyhash): format 2, SipHash-2-4-128 under a subkey
// derived from the key secret, or format 1, HMAC-SHA256 under the secret,
// each truncated to 15 bytes; Op.KeyFormat says which, and a Redis store
// names the two apart (docs/deploying.md, "Key format and rolling
// upgrades"). It is comparable and needs no allocation as a map key.
type Key [24]byte

// KeyFormat is the format of a counter key's keyed hash (Key[9:24]),
// internal/keyhash's.
type KeyFormat uint8

const (
	// KeyFormat1 is HMAC-SHA256(secret, values)[:15].
	KeyFormat1 KeyFormat = 1
	// KeyFormat2 is SipHash-2-4-128(subkey, values)[:15], the 128-bit
	// output as its two 64-bit halves little-endian, low half first.
	KeyFormat2 KeyFormat = 2
)

// StoreErrorMode is a rule's `on_store_error`: what a failure-handling
// store answers for an op (Op.OnError) when the backing store cannot decide.
type StoreErrorMode uint8

const (
	// FailOpen allows the request when the store cannot decide.
	FailOpen StoreErrorMode = iota
	// FailClosed refuses it with 503.
	FailClosed
	// FailLocal decides from a local bucket at limit ÷ fleet_size.
	FailLocal
)

// OpKind says what an Op does to its counter.
type OpKind uint8

const (
	// OpTake checks the counter and consumes Cost if the request is allowed.
	OpTake OpKind = iota
	// OpPeek checks the counter without consuming.
	OpPeek
	// OpAdd consumes Cost without checking (count after the fact). Its result
	// still reports whether the counter was within its limit before the add.
	OpAdd
	// OpRefund gives back Cost previously consumed (the "settle later" of an
	// estimate charged up front); the counter never goes below empty.
	OpRefund
	// OpReset clears the counter.
	OpReset
)

// Op is one counter operation of a request. rules' Engine builds one Op per
// matching rule (two for a visitor rule with an IP ceiling) and hands all of
// a request's ops to the rules.Store in one call. The algorithms read its
// Kind, Algorithm, Limit, Burst, PeriodUS, Cost, Member, Attempts, Calendar
// and WindowStartUS; the other fields are the stores' (its key, budgets and
// flags).
type Op struct {
	Kind      OpKind
	Algorithm Algorithm
	Key       Key
	// LeaseUnits is the op's rule's budget_lease { units }
	// (behaviour/budgetlease): a store in front of a shared one
	// (rules/leasestore) may take up to that many units in one call and
	// answer the op, and the next ones on its key, from them on this node.
	// 0 leases nothing; every other store ignores it. It fits in the
	// padding after Key: an Op is 96 bytes with it as without.
	LeaseUnits uint16
	// Network is the network of the request's client: a keyed hash of
	// its address masked to the policy's network prefixes (never the
	// address), 0 when there is none (an operator's call). The Engine sets
	// it on every op of a request. With NetworkKeys, the memory store
	// bounds the keys each network makes in a budget (docs/memory-store.md,
	// "Network shares"); other stores ignore it.
	Network uint32
	// Limit is the number of units allowed per period.
	Limit int64
	// Burst is the bucket size in units for an algorithm whose Spec.Burst is
	// set (gcra, token_bucket and leaky_bucket); the others ignore it.
	Burst int64
	// PeriodUS is the period in microseconds. GCRA's emission interval is
	// PeriodUS/Limit microseconds (validation refuses one under 1µs).
	PeriodUS int64
	// Cost is the number of units the request takes, normally 1.
	Cost int64
	// Member is the keyed hash of the counted value for an algorithm whose
	// Spec.Members is set, Distinct (the Engine's, so no raw value reaches a
	// store); other algorithms ignore it.
	Member uint64
	// Enforce is false for dry-run rules: the op is decided exactly as if it
	// enforced, but never refuses the request and never changes the outcome
	// of the other ops.
	Enforce bool
	// Attempts marks count = "attempts": the op consumes even when the
	// request is refused (by itself or by another rule), on a key that
	// exists; in a refused call it makes no new key (a missing key, or one
	// whose state has decayed, is left fresh).
	Attempts bool
	// OnError is the rule's on_store_error: what a failure-handling store
	// (failclosed) answers for this op when the backing store cannot
	// decide. Plain stores ignore it, except that the memory store answers
	// by it for a new key of a Sensitive op whose key budget is full of live
	// state (MaxKeys).
	OnError StoreErrorMode
	// Sensitive marks an op of a sensitive rule: the memory store never
	// evicts its live state to make room, and when its key budget is full
	// of live state, a new key is answered by OnError with StoreError set
	// (docs/memory-store.md). Other stores ignore it.
	Sensitive bool
	// MaxKeys is the op's key budget in the memory store: how many keys
	// the ops whose Key starts with the same rule ID (Key[0:8]) may hold
	// there at once, so that one rule's flood of new keys never evicts
	// another rule's counters. The Engine sets the rule's Rule.MaxKeys (its
	// max_keys, or its share of the store's), so the budget follows the
	// rule's name across reloads and a reload's new size applies from the
	// next new key. 0 puts the op in the store's own budget
	// (memstore.Options.MaxKeys), shared by every op with 0 that is not a
	// Marker's. Other stores ignore it. Sensitive, MaxKeys and Marker fit
	// in Op's padding: an Op is 96 bytes with them as without.
	MaxKeys int32
	// Calendar marks a fixed_window op of a calendar period (period =
	// "day", "week" or "month", behaviour/calendar): its window is
	// [WindowStartUS, WindowStartUS + PeriodUS), computed by the caller
	// in the rule's time_zone from its clock, instead of the multiple of
	// PeriodUS since the epoch that holds now. PeriodUS is then that
	// window's own length (a day of 23 or 25 hours across a DST change, a
	// month of 28 to 31 days). Only FixedWindow may set it (ValidateOp).
	Calendar bool
	// KeyFormat is the format of Key's hash (internal/keyhash): a Redis
	// store names format 2 keys apart (redisstore's doc). 0, an op no
	// engine hashed, is named as format 1 is.
	KeyFormat KeyFormat
	// Marker marks an op on a marker: a ban (behaviour/ban), a known visitor
	// (behaviour/known) or a forgive's exemption (behaviour/forgive), a key whose
	// presence is the point and that must last its whole time. The memory
	// store keeps its rule's markers in a budget of their own (MaxKeys
	// more keys beside the rule's counters; Options.MaxKeys when MaxKeys
	// is 0), never evicts one while it lasts, and answers a new one whose
	// budget is full of live markers as a Sensitive op's (not stored;
	// docs/memory-store.md, "Markers"). Every op on a marker key carries
	// it. Other stores ignore it.
	Marker bool
	// Twin marks an op on the previous key secret's key of the op before
	// it, ops[i-1], in a key-secret rotation (internal/keyhash,
	// docs/operations.md "Rotating the key secret"): the same op on the
	// key and Member the values had under the previous secret. The Engine
	// puts each twin right after its op and refuses the op when either
	// refuses. Before anything is decided, a store that finds no state
	// under ops[i-1].Key and live state under the twin's key, for any
	// algorithm but Distinct (whose members are hashes under the previous
	// secret), carries that state over in the same atomic step: the memory
	// store moves it (the twin's key is then gone), the Redis store
	// copies it (nodes still on the previous secret go on reading it). A
	// twin whose key then holds no state may be skipped (the memory store
	// does, answering Allowed with Remaining math.MaxInt64, which changes
	// nothing in the Engine's combination): no key is made under the
	// previous secret. Otherwise it is decided and applied as any op. A
	// store that ignores the flag still decides right (the twin is an op
	// like any other), without the carry. Twin fits in Op's padding.
	Twin bool
	// NetworkKeys is how many keys of the op's budget one Network may
	// hold in the memory store: the rule's network_share of its max_keys
	// (at least 1), 0 for no bound. A new key of a network that holds
	// that many is refused, for that network only: Allowed false,
	// NetworkFull set, nothing stored, and a refusal like any other (an
	// enforcing take refuses the request, all or nothing). Keys that exist
	// are never refused by it. Other stores ignore it. Network, Marker and
	// NetworkKeys fit in Op's padding too.
	NetworkKeys int32
	// WindowStartUS is a Calendar op's window start, µs since the Unix
	// epoch; 0 otherwise.
	WindowStartUS int64
}

// Result is the outcome of one Op.
type Result struct {
	// Allowed reports whether this op, on its own, admits the request.
	Allowed bool
	// Remaining is the number of units left after this request (0 when
	// refused), for RateLimit's r= parameter.
	Remaining int64
	// ResetAfter is RateLimit's t= parameter, the effective window of
	// draft-ietf-httpapi-ratelimit-headers-11 §4.1.2: when refused, equal to
	// RetryAfter; when allowed, the time until one unit more than Remaining
	// could be admitted (Settle, docs/headers.md). It is not the time
	// until the counter is back to full (a key's TTL), which can be longer.
	ResetAfter time.Duration
	// RetryAfter is, when refused, the time until a request of the same cost
	// is allowed if nothing else is sent meanwhile, from the state after the
	// call; 0 when allowed.
	RetryAfter time.Duration
	// StoreError is set when the backing store could not decide this op and
	// Allowed comes from the op's OnError mode instead: FailOpen allows,
	// FailClosed refuses, FailLocal asks a local bucket at the limit divided
	// by the fleet size. Only failure-handling stores (failclosed) set it.
	StoreError bool
	// NetworkFull is set, with Allowed false, when the op would make a new
	// key and its Network already holds its NetworkKeys in the op's
	// budget (the memory store). RetryAfter is then the time until the
	// earliest of the network's keys in the budget decays (never later
	// than a slot frees; the op's period when the store could not see
	// them all), its decayed keys having been reclaimed first.
	NetworkFull bool
}

// State is the stored state of one key, the same for every store. Its zero
// value is the fresh state of every algorithm, and a State last written by
// another algorithm (a rule whose algorithm changed across a reload) reads
// as fresh. Fields by algorithm:
//
//	gcra            At = TAT (theoretical arrival time, µs)
//	token_bucket    At = last refill (µs), N = tokens × PeriodUS
//	leaky_bucket    At = last drain (µs),  N = level × PeriodUS
//	fixed_window    At = window start (µs, a multiple of PeriodUS), N = count
//	sliding_window  At = current window start, N = its count, Prev = the previous window's count
//	sliding_log     Log = timestamps of consumed units (µs), ascending, at most Limit
//	distinct        Seen = the members seen and when each was last (µs), ascending by (At, Member), at most Limit
//
// Log and Seen are reused in place: once grown to Limit entries, consuming
// allocates nothing. A State is not safe for concurrent use; stores lock.
type State struct {
	Alg  Algorithm
	At   int64
	N    int64
	Prev int64
	Log  []int64
	Seen []Seen
}

// Seen is one member of a Distinct state: the Op.Member counted and the
// time it was last counted, in µs. A member is live while At > now −
// PeriodUS, as a sliding_log timestamp is.
type Seen struct {
	Member uint64
	At     int64
}

// Cleared returns st emptied (the fresh state of every algorithm), keeping
// the arrays of Log and Seen for reuse.
func (st *State) Cleared() State { return State{Log: st.Log[:0], Seen: st.Seen[:0]} }

// DurationUS returns us microseconds (the unit of the algorithms, of
// Op.PeriodUS and of the Redis script's replies) as a time.Duration.
func DurationUS(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
