package rules

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"
)

// The algorithms are pure functions of (State, now, Op) in integer
// microseconds, so that every store decides bit for bit alike: memstore calls
// them directly and redisstore's Lua script is a line-by-line port. Lua numbers
// are doubles, exact only up to 2^53, so ValidateLimits keeps every
// intermediate value of every algorithm at or under MaxExact, given a clock
// under 2^52 µs since the epoch (the year 2112). Go computes the same values
// in int64 without overflow.
//
// A call goes in two passes over a request's ops (Store's contract):
//
//	for i := range ops { res[i] = Check(&st[i], now, &ops[i]) }
//	refused := Refused(ops, res)
//	for i := range ops { ttl[i] = Settle(&st[i], now, &ops[i], refused, &res[i]) }
//
// Check decides against the state before the call; Settle applies what the
// contract says the op does (Consume) and fills Remaining, ResetAfter (the
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
// members, and so cannot run into debt. A take never
// runs into debt: one that does not fit (an Attempts op counted while
// refused) leaves the counter full.
//
// Clock skew: when now is earlier than the time a state was last written
// (another node's clock, or the wall clock stepping back), the state is read
// as of its own time: nothing refills and nothing expires, so a step back
// never grants a fresh allowance; the wait only grows by the skew.

const (
	// MaxExact is the largest magnitude any intermediate value reaches:
	// 2^53, up to which a double (a Lua number) holds every integer.
	MaxExact = 1 << 53
	// MaxPeriodUS is the longest period, 2^50 µs (about 35 years).
	MaxPeriodUS = 1 << 50
	// MaxSpanUS bounds a gcra tolerance, burst × (period/limit) µs, so that
	// now + 2×tolerance (debt) + cost×T stays under MaxExact.
	MaxSpanUS = 1 << 50
	// MaxScaled bounds burst×period for token_bucket and leaky_bucket (their
	// scaled capacity, one token being PeriodUS units) and limit×period for
	// sliding_window (its cross-multiplied estimate), so that the largest
	// intermediate, three or four times that, stays under MaxExact.
	MaxScaled = 1 << 51
	// MaxLogLimit is the largest sliding_log limit: it stores one
	// timestamp per unit, which the lesson keeps for small limits.
	MaxLogLimit = 10000
	// MaxDistinctLimit is the largest Distinct limit: it stores one member
	// per distinct value and the memory store looks one up by a scan of at
	// most that many. A full set of 10000 is 160KB in memory (a Seen is 16
	// bytes) and 1.4MB in Redis 7.0 (MEMORY USAGE of a sorted set of 10000
	// members of 16 hex digits: 143 bytes a member as a skiplist; 31 while
	// it is a listpack, up to zset-max-listpack-entries, 128 by default).
	// It is MaxLogLimit's bound, for the same reason: the count is exact.
	MaxDistinctLimit = 10000
)

// RetryNever is the RetryAfter of a refused op whose Cost exceeds what the
// counter can ever hold (more than its burst or limit): no wait helps.
const RetryNever time.Duration = -1

var (
	// ErrInvalidLimits wraps the errors of ValidateLimits and ValidateOp
	// about parameters out of bounds.
	ErrInvalidLimits = errors.New("invalid limits")
	// ErrUnsupported wraps their errors about an algorithm no store
	// implements (a number past Distinct).
	ErrUnsupported = errors.New("unsupported algorithm")
)

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

// ValidateLimits reports whether an algorithm can run with these parameters,
// within the bounds that keep every store exact (MaxExact): limit ≥ 1,
// 1 ≤ period ≤ MaxPeriodUS, an emission interval period/limit of at least
// 1µs (docs/policy.md, "rule"), burst ≥ 1 for the bucket algorithms (windows ignore it),
// burst×T ≤ MaxSpanUS for gcra, burst×period ≤ MaxScaled for the buckets,
// limit×period ≤ MaxScaled for sliding_window, limit ≤ MaxLogLimit for
// sliding_log and limit ≤ MaxDistinctLimit for distinct (which ignores
// burst, as the windows do). The error wraps ErrInvalidLimits or
// ErrUnsupported and reads as a diagnostic detail. The policy compiler calls
// it for every rule.
func ValidateLimits(alg Algorithm, limit, burst, periodUS int64) error {
	switch {
	case alg >= numAlgorithms:
		return fmt.Errorf("%w: algorithm %d", ErrUnsupported, alg)
	case limit < 1:
		return fmt.Errorf("%w: limit %d must be at least 1", ErrInvalidLimits, limit)
	case periodUS < 1 || periodUS > MaxPeriodUS:
		return fmt.Errorf("%w: period %dµs must be between 1µs and %v", ErrInvalidLimits, periodUS, time.Duration(MaxPeriodUS)*time.Microsecond)
	case periodUS < limit:
		return fmt.Errorf("%w: limit %d per %dµs is an emission interval under 1µs", ErrInvalidLimits, limit, periodUS)
	}
	// The products are checked in 128 bits: this runs on every Take, and
	// divisions cost more than multiplications.
	switch alg {
	case GCRA:
		if burst < 1 {
			return fmt.Errorf("%w: gcra burst %d must be at least 1", ErrInvalidLimits, burst)
		}
		if t := periodUS / limit; over(burst, t, MaxSpanUS) {
			return fmt.Errorf("%w: gcra burst %d × interval %dµs exceeds 2^50µs", ErrInvalidLimits, burst, t)
		}
	case TokenBucket, LeakyBucket:
		if burst < 1 {
			return fmt.Errorf("%w: %s burst %d must be at least 1", ErrInvalidLimits, alg, burst)
		}
		if over(burst, periodUS, MaxScaled) {
			return fmt.Errorf("%w: %s burst %d × period %dµs exceeds 2^51; use gcra (same decisions) or a smaller burst", ErrInvalidLimits, alg, burst, periodUS)
		}
	case SlidingWindow:
		if over(limit, periodUS, MaxScaled) {
			return fmt.Errorf("%w: sliding_window limit %d × period %dµs exceeds 2^51; use fixed_window, gcra or a shorter period", ErrInvalidLimits, limit, periodUS)
		}
	case SlidingLog:
		if limit > MaxLogLimit {
			return fmt.Errorf("%w: sliding_log limit %d exceeds %d timestamps per key; use sliding_window", ErrInvalidLimits, limit, MaxLogLimit)
		}
	case Distinct:
		if limit > MaxDistinctLimit {
			return fmt.Errorf("%w: count_distinct limit %d exceeds %d distinct values per key", ErrInvalidLimits, limit, MaxDistinctLimit)
		}
	}
	return nil
}

// over reports whether a×b > bound, for a, b ≥ 0, without overflow.
func over(a, b, bound int64) bool {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return hi != 0 || lo > uint64(bound)
}

// ValidateOp reports whether a store can apply op: a known kind, limits that
// pass ValidateLimits and a Cost of at least 0. Stores call it for every op,
// so that a bad op is an error rather than a division by zero; it allocates
// only when it fails.
func ValidateOp(op *Op) error {
	if op.Kind > OpReset {
		return fmt.Errorf("%w: op kind %d", ErrInvalidLimits, op.Kind)
	}
	if op.Cost < 0 {
		return fmt.Errorf("%w: cost %d is negative", ErrInvalidLimits, op.Cost)
	}
	if op.Calendar && op.Algorithm != FixedWindow {
		return fmt.Errorf("%w: a calendar window is a fixed_window, not %s", ErrInvalidLimits, op.Algorithm)
	}
	if op.Calendar && (op.WindowStartUS < 0 || op.WindowStartUS > MaxExact-MaxPeriodUS) {
		return fmt.Errorf("%w: calendar window start %dµs out of range", ErrInvalidLimits, op.WindowStartUS)
	}
	return ValidateLimits(op.Algorithm, op.Limit, op.Burst, op.PeriodUS)
}

// Refused reports whether a request whose ops were decided into res is
// refused: some OpTake with Enforce set is not Allowed.
func Refused(ops []Op, res []Result) bool {
	for i := range ops {
		if ops[i].Kind == OpTake && ops[i].Enforce && !res[i].Allowed {
			return true
		}
	}
	return false
}

// Consumes reports whether op changes its counter, given its own decision
// (allowed) and the request's (refused), as Store's contract says: a take
// consumes when allowed and the request is not refused, or always when it
// counts attempts; a peek never; add, refund and reset always.
func Consumes(op *Op, allowed, refused bool) bool {
	switch op.Kind {
	case OpTake:
		return op.Attempts || (allowed && !refused)
	case OpPeek:
		return false
	}
	return true
}

// Settle finishes op after every op of the call has been decided: it
// consumes when Consumes says so, fills r from the state after the call,
// and returns the TTL to store st with (0: st is empty):
//
//   - Remaining: the units left (0 when r is not Allowed).
//   - RetryAfter, when r is not Allowed: the wait until a take of the op's
//     Cost fits the state after the call (RetryNever stays), recomputed
//     because an Attempts op that consumed while refused has moved it.
//     A client that retries then, and sends nothing meanwhile, is admitted
//     by this op (waitUS).
//   - ResetAfter: RateLimit's t, the effective window of
//     draft-ietf-httpapi-ratelimit-headers-11 §4.1.2, "the time within
//     which the client can use no more than the available quota". When not
//     Allowed it equals RetryAfter (r is 0 until then). When Allowed it is
//     windowUS: the time until one unit more than Remaining could be
//     admitted, however the client spends them. See docs/headers.md for the
//     bounds (at most the period, or period + ⌈period ÷ limit⌉ for
//     sliding_window, without debt).
//
// The TTL is the time until st has decayed to empty, which can be longer
// than ResetAfter (TTL).
func Settle(st *State, nowUS int64, op *Op, refused bool, r *Result) (ttlUS int64) {
	if Consumes(op, r.Allowed, refused) {
		Consume(st, nowUS, op)
	}
	remaining, ttlUS := reportState(st, nowUS, op)
	switch {
	case r.Allowed:
		r.Remaining = remaining
		r.ResetAfter = DurationUS(windowUS(st, nowUS, op))
	case r.RetryAfter == RetryNever:
		r.Remaining = 0
		r.ResetAfter = DurationUS(windowUS(st, nowUS, op))
	default:
		// Refused means the wait before the call was > 0, and no op makes
		// a refused op's state emptier, so this wait is > 0 too; but for
		// a Distinct op needing several places (rules/values.go) that an
		// attempt counted, now known: 1µs, a retry fits.
		r.Remaining = 0
		r.RetryAfter = DurationUS(max(waitUS(st, nowUS, op, max(op.Cost, 0)), 1))
		r.ResetAfter = r.RetryAfter
	}
	return ttlUS
}

// TTL returns the time in µs until st has decayed to empty at op's
// parameters (back to the full allowance); 0 when it is empty now. It is
// the TTL Settle returns.
func TTL(st *State, nowUS int64, op *Op) int64 {
	_, resetUS := reportState(st, nowUS, op)
	return resetUS
}

// windowUS returns the effective window of st at nowUS, in µs: the time
// until a take of one unit would fit had the client spent the r units left
// (reportState's remaining) at nowUS. Spending them at nowUS is what frees
// the next unit soonest for every algorithm (a unit counted later decays
// later), so within the window no schedule of requests gets more than r
// units admitted, and at its end one does: it is the longest window the
// draft's "no more than the available quota" holds for. It is > 0 (a full
// counter's window is the time its first unit takes to come back).
//
// Without debt (OpAdd) and clock steps back it is at most: gcra and the
// buckets, the emission interval ⌈period ÷ limit⌉; fixed_window, the rest of
// the window; sliding_log and distinct, the period; sliding_window, period +
// ⌈period ÷ limit⌉ (the limit spent at a window's start: the estimate lets
// one more in once the previous window's weight has fallen by one unit).
func windowUS(st *State, nowUS int64, op *Op) int64 {
	switch op.Algorithm {
	case GCRA:
		// r = ⌊(tol−ahead)/T⌋ units left; spent, TAT is ahead + r×T, and
		// one more fits once ahead + (r+1)×T − tol has passed.
		t := op.PeriodUS / op.Limit
		tol := op.Burst * t
		ahead := max(gcraTAT(st, op)-nowUS, 0)
		r := max((tol-ahead)/t, 0)
		return ahead + (r+1)*t - tol
	case TokenBucket:
		tokens := tokensAt(st, nowUS, op)
		r := max(tokens, 0) / op.PeriodUS
		return skew(st, nowUS, op) + ceilDiv((r+1)*op.PeriodUS-tokens, op.Limit)
	case LeakyBucket:
		capacity := op.Burst * op.PeriodUS
		level := levelAt(st, nowUS, op)
		r := max(capacity-level, 0) / op.PeriodUS
		return skew(st, nowUS, op) + ceilDiv(level+(r+1)*op.PeriodUS-capacity, op.Limit)
	case FixedWindow:
		// Spent, the window is full until it ends.
		start, _ := fixedAt(st, nowUS, op)
		return fixedLeft(start, nowUS, op)
	case SlidingWindow:
		p := op.PeriodUS
		start, prev, cur := slidingAt(st, nowUS, op)
		e := max(nowUS-start, 0)
		r := max(op.Limit-cur-ceilDiv(prev*(p-e), p), 0)
		return slidingWait(start, prev, cur+r, nowUS, op, 1)
	case SlidingLog:
		// Spent, the log holds max(n, limit) timestamps (the r new ones at
		// nowUS); one more fits once the k-th oldest has left.
		log := logAt(st, nowUS, op)
		n := int64(len(log))
		if k := max(n, op.Limit) + 1 - op.Limit; k <= n {
			return log[k-1] + op.PeriodUS - nowUS
		}
		return op.PeriodUS
	case Distinct:
		// As sliding_log's, one member a unit: spent on r new values, the
		// set holds max(n, limit) members; one more new value fits once the
		// k-th oldest has expired.
		seen := distinctAt(st, nowUS, op)
		n := int64(len(seen))
		if k := max(n, op.Limit) + 1 - op.Limit; k <= n {
			return seen[k-1].At + op.PeriodUS - nowUS
		}
		return op.PeriodUS
	}
	return 0
}

// Check decides op against st at nowUS without changing st: Allowed, and
// RetryAfter when refused (RetryNever when Cost exceeds the burst or limit).
// Remaining and ResetAfter are left zero for Settle, since they describe the
// state after the whole call (and Settle recomputes RetryAfter from it).
// Allowed means a take of Cost would fit, for every kind that checks
// (OpTake, OpPeek, OpAdd); OpRefund and OpReset are always Allowed.
func Check(st *State, nowUS int64, op *Op) Result {
	if op.Kind == OpRefund || op.Kind == OpReset {
		return Result{Allowed: true}
	}
	switch wait := waitUS(st, nowUS, op, max(op.Cost, 0)); {
	case wait == 0:
		return Result{Allowed: true}
	case wait < 0:
		return Result{RetryAfter: RetryNever}
	default:
		return Result{RetryAfter: DurationUS(wait)}
	}
}

// waitUS returns the µs from nowUS until a take of cost would fit st, with
// nothing else happening meanwhile: 0 when it fits now, -1 when it never
// can (cost over the burst or limit). Every algorithm's state only decays
// towards empty while idle, so the take fits at any time from then on: a
// client retrying after the wait is admitted.
func waitUS(st *State, nowUS int64, op *Op, cost int64) (wait int64) {
	switch op.Algorithm {
	case GCRA:
		t := op.PeriodUS / op.Limit
		tol := op.Burst * t
		if cost > op.Burst {
			return -1
		}
		tat := max(gcraTAT(st, op), nowUS)
		return max(tat+cost*t-nowUS-tol, 0)
	case TokenBucket:
		if cost > op.Burst {
			return -1
		}
		tokens := tokensAt(st, nowUS, op)
		if need := cost*op.PeriodUS - tokens; need > 0 {
			return skew(st, nowUS, op) + ceilDiv(need, op.Limit)
		}
		return 0
	case LeakyBucket:
		if cost > op.Burst {
			return -1
		}
		level := levelAt(st, nowUS, op)
		if excess := level + cost*op.PeriodUS - op.Burst*op.PeriodUS; excess > 0 {
			return skew(st, nowUS, op) + ceilDiv(excess, op.Limit)
		}
		return 0
	case FixedWindow:
		if cost > op.Limit {
			return -1
		}
		start, n := fixedAt(st, nowUS, op)
		if n+cost > op.Limit {
			return fixedLeft(start, nowUS, op)
		}
		return 0
	case SlidingWindow:
		if cost > op.Limit {
			return -1
		}
		start, prev, cur := slidingAt(st, nowUS, op)
		return slidingWait(start, prev, cur, nowUS, op, cost)
	case SlidingLog:
		if cost > op.Limit {
			return -1
		}
		log := logAt(st, nowUS, op)
		if k := int64(len(log)) + cost - op.Limit; k > 0 {
			// The k oldest timestamps in the window must leave it; the
			// k-th leaves at its time + period (out when t ≤ now-period).
			return log[k-1] + op.PeriodUS - nowUS
		}
		return 0
	case Distinct:
		// One member: a live member is counted already, and a new one
		// needs cost free places (1, or one more for each value of the
		// same key earlier in the request, which the call may add before
		// it: rules/values.go), which the oldest live members give up
		// when they expire (the k-th oldest, after a limit was lowered).
		// -1 only when cost is over the limit.
		places := max(cost, 1)
		seen := distinctAt(st, nowUS, op)
		if indexOf(seen, op.Member) >= 0 {
			return 0
		}
		if places > op.Limit {
			return -1
		}
		if k := int64(len(seen)) + places - op.Limit; k > 0 {
			return seen[k-1].At + op.PeriodUS - nowUS
		}
		return 0
	}
	return -1
}

// slidingWait returns the µs until a take of cost (≤ limit) fits the
// two-counter estimate prev×(P−e)/P + cur + cost ≤ limit, e being the time
// elapsed in the current window (which starts at start); the comparison is
// multiplied out by P.
func slidingWait(start, prev, cur, nowUS int64, op *Op, cost int64) int64 {
	p := op.PeriodUS
	e := max(nowUS-start, 0)
	room := op.Limit - cur - cost
	if room >= 0 {
		if prev*(p-e) <= room*p {
			return 0
		}
		// Within this window the estimate falls as e grows: the first e'
		// with prev×(P−e') ≤ room×P is P − floor(room×P/prev).
		return start + p - room*p/prev - nowUS
	}
	// Not this window: in the next one prev' = cur and cur' = 0, and cur >
	// limit-cost ≥ 0 here.
	return start + 2*p - (op.Limit-cost)*p/cur - nowUS
}

// Consume applies op's effect to st at nowUS, whatever the decision:
// OpTake takes Cost but never past full (a take that does not fit leaves the
// counter full), OpAdd takes Cost into at most one allowance of debt,
// OpRefund gives Cost back down to empty, OpReset empties, OpPeek only
// brings st up to date. Stores call it through Settle.
func Consume(st *State, nowUS int64, op *Op) {
	if op.Kind == OpReset {
		*st = st.Cleared()
		return
	}
	cost := max(op.Cost, 0)
	switch op.Algorithm {
	case GCRA:
		consumeGCRA(st, nowUS, op, cost)
	case TokenBucket:
		consumeTokens(st, nowUS, op, cost)
	case LeakyBucket:
		consumeLevel(st, nowUS, op, cost)
	case FixedWindow:
		start, n := fixedAt(st, nowUS, op)
		st.At, st.N, st.Prev = start, consumeCount(n, op, cost), 0
	case SlidingWindow:
		start, prev, cur := slidingAt(st, nowUS, op)
		if op.Kind == OpRefund && cost > cur {
			// The unit refunded may have been charged in the previous
			// window, before the boundary passed.
			prev = max(prev-(cost-cur), 0)
		}
		st.At, st.N, st.Prev = start, consumeCount(cur, op, cost), prev
	case SlidingLog:
		consumeLog(st, nowUS, op, cost)
	case Distinct:
		consumeDistinct(st, nowUS, op)
	default:
		return
	}
	st.Alg = op.Algorithm
}

func consumeGCRA(st *State, nowUS int64, op *Op, cost int64) {
	t := op.PeriodUS / op.Limit
	tol := op.Burst * t
	tat := gcraTAT(st, op)
	base := max(tat, nowUS)
	switch op.Kind {
	case OpTake:
		if cost <= op.Burst && base+cost*t-nowUS <= tol {
			tat = base + cost*t
		} else {
			tat = max(tat, nowUS+tol) // full, never lowered
		}
	case OpAdd:
		c := min(cost, 2*op.Burst)
		tat = max(tat, min(base+c*t, nowUS+2*tol))
	case OpRefund:
		if tat > nowUS {
			if cost > (tat-nowUS)/t {
				tat = nowUS
			} else {
				tat -= cost * t
			}
		}
	}
	st.At = tat
}

func consumeTokens(st *State, nowUS int64, op *Op, cost int64) {
	capacity := op.Burst * op.PeriodUS
	tokens := tokensAt(st, nowUS, op)
	c := min(cost, 2*op.Burst)
	switch op.Kind {
	case OpTake:
		if cost <= op.Burst && tokens >= cost*op.PeriodUS {
			tokens -= cost * op.PeriodUS
		} else {
			tokens = min(tokens, 0)
		}
	case OpAdd:
		tokens = max(tokens-c*op.PeriodUS, min(tokens, -capacity))
	case OpRefund:
		if room := capacity - tokens; room > 0 {
			tokens += min(c*op.PeriodUS, room)
		}
	}
	st.N = tokens
	st.At = max(stampOf(st, op), nowUS)
}

func consumeLevel(st *State, nowUS int64, op *Op, cost int64) {
	capacity := op.Burst * op.PeriodUS
	level := levelAt(st, nowUS, op)
	c := min(cost, 2*op.Burst)
	switch op.Kind {
	case OpTake:
		if cost <= op.Burst && level+cost*op.PeriodUS <= capacity {
			level += cost * op.PeriodUS
		} else {
			level = max(level, capacity)
		}
	case OpAdd:
		level = min(level+c*op.PeriodUS, max(level, 2*capacity))
	case OpRefund:
		level = max(level-c*op.PeriodUS, 0)
	}
	st.N = level
	st.At = max(stampOf(st, op), nowUS)
}

// consumeCount applies a take, add or refund to a window count.
func consumeCount(n int64, op *Op, cost int64) int64 {
	switch op.Kind {
	case OpTake:
		return min(n+min(cost, op.Limit+1), max(n, op.Limit))
	case OpAdd:
		return min(n+min(cost, 2*op.Limit), max(n, 2*op.Limit))
	case OpRefund:
		return max(n-cost, 0)
	}
	return n
}

func consumeLog(st *State, nowUS int64, op *Op, cost int64) {
	// Drop what has left the window (and, after a limit was lowered,
	// anything beyond the newest Limit), in place.
	log := logAt(st, nowUS, op)
	if excess := int64(len(log)) - op.Limit; excess > 0 {
		log = log[excess:]
	}
	n := copy(st.Log, log)
	st.Log = st.Log[:n]
	switch op.Kind {
	case OpTake, OpAdd:
		c := min(cost, op.Limit)
		if drop := int64(n) + c - op.Limit; drop > 0 {
			n = copy(st.Log, st.Log[drop:])
			st.Log = st.Log[:n]
		}
		// Timestamps stay ascending even when the clock stepped back: a
		// unit counted "now" is never older than the newest one stored.
		ts := nowUS
		if n > 0 {
			ts = max(ts, st.Log[n-1])
		}
		for range c {
			st.Log = append(st.Log, ts)
		}
	case OpRefund:
		// Give back the newest units: most likely this request's own.
		st.Log = st.Log[:int64(n)-min(cost, int64(n))]
	}
}

// consumeDistinct applies op to a Distinct set, ignoring Cost (a call
// counts one member): live members are kept (expired ones dropped, and
// after a limit was lowered only the newest Limit), then a take or add
// counts Member at max(now, newest) (a refresh moves a live member there;
// a new one joins only while fewer than Limit are live, so a full set
// evicts nothing and stays full), a refund removes Member. A take that
// does not fit (an Attempts op refused) thus changes nothing but the
// expired members.
func consumeDistinct(st *State, nowUS int64, op *Op) {
	seen := distinctAt(st, nowUS, op)
	var ts int64
	if len(seen) > 0 {
		ts = seen[len(seen)-1].At
	}
	ts = max(ts, nowUS)
	n := copy(st.Seen, seen)
	seen = st.Seen[:n]
	keep := op.Limit
	if i := indexOf(seen, op.Member); i >= 0 && op.Kind != OpPeek {
		seen = append(seen[:i], seen[i+1:]...)
		if op.Kind != OpRefund {
			keep-- // its place is kept for it
		}
	}
	if excess := int64(len(seen)) - keep; excess > 0 {
		seen = seen[:copy(seen, seen[excess:])]
	}
	if (op.Kind == OpTake || op.Kind == OpAdd) && int64(len(seen)) < op.Limit {
		// Ascending by (At, Member), the order of a Redis sorted set
		// (score, then member bytes: the member's fixed-width hex).
		i := len(seen)
		for i > 0 && seen[i-1].At == ts && seen[i-1].Member > op.Member {
			i--
		}
		seen = slices.Insert(seen, i, Seen{Member: op.Member, At: ts})
	}
	st.Seen = seen
}

// indexOf returns the index of member in seen, -1 when absent: a scan, of
// at most MaxDistinctLimit members.
func indexOf(seen []Seen, member uint64) int {
	for i := range seen {
		if seen[i].Member == member {
			return i
		}
	}
	return -1
}

// reportState returns the units left and the µs until st is back to the full
// allowance (equivalently, decayed to empty) at op's parameters.
func reportState(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	switch op.Algorithm {
	case GCRA:
		t := op.PeriodUS / op.Limit
		tol := op.Burst * t
		ahead := max(gcraTAT(st, op)-nowUS, 0)
		return max((tol-ahead)/t, 0), ahead
	case TokenBucket:
		tokens := tokensAt(st, nowUS, op)
		if resetUS = ceilDiv(op.Burst*op.PeriodUS-tokens, op.Limit); resetUS > 0 {
			resetUS += skew(st, nowUS, op)
		}
		return max(tokens, 0) / op.PeriodUS, resetUS
	case LeakyBucket:
		level := levelAt(st, nowUS, op)
		if resetUS = ceilDiv(level, op.Limit); resetUS > 0 {
			resetUS += skew(st, nowUS, op)
		}
		return max(op.Burst*op.PeriodUS-level, 0) / op.PeriodUS, resetUS
	case FixedWindow:
		start, n := fixedAt(st, nowUS, op)
		if n == 0 {
			return op.Limit, 0
		}
		return max(op.Limit-n, 0), fixedLeft(start, nowUS, op)
	case SlidingWindow:
		p := op.PeriodUS
		start, prev, cur := slidingAt(st, nowUS, op)
		e := max(nowUS-start, 0)
		w := prev * (p - e)
		remaining = max(op.Limit-cur-ceilDiv(w, p), 0)
		switch {
		case cur > 0:
			resetUS = start + 2*p - nowUS
		case w > 0:
			resetUS = start + p - nowUS
		}
		return remaining, resetUS
	case SlidingLog:
		log := logAt(st, nowUS, op)
		if len(log) == 0 {
			return op.Limit, 0
		}
		return max(op.Limit-int64(len(log)), 0), log[len(log)-1] + op.PeriodUS - nowUS
	case Distinct:
		seen := distinctAt(st, nowUS, op)
		if len(seen) == 0 {
			return op.Limit, 0
		}
		return max(op.Limit-int64(len(seen)), 0), seen[len(seen)-1].At + op.PeriodUS - nowUS
	}
	return 0, 0
}

// The ...At helpers read st as of nowUS for op's algorithm without changing
// it; a State of another algorithm reads as fresh.

func gcraTAT(st *State, op *Op) int64 {
	if st.Alg != op.Algorithm {
		return 0
	}
	return st.At
}

// stampOf returns the last update time of a bucket, 0 when fresh.
func stampOf(st *State, op *Op) int64 {
	if st.Alg != op.Algorithm {
		return 0
	}
	return st.At
}

// skew returns how far a bucket's last update lies ahead of nowUS (a clock
// step back), 0 normally: the bucket is read as of that time, so its waits
// count from there.
func skew(st *State, nowUS int64, op *Op) int64 {
	return max(stampOf(st, op)-nowUS, 0)
}

// tokensAt returns the scaled tokens (1 token = PeriodUS units) at nowUS:
// the stored tokens plus Limit units per elapsed µs, at most the capacity
// Burst×PeriodUS. The product elapsed×Limit is formed only when it is at
// most the deficit, so it cannot overflow however long the key was idle.
func tokensAt(st *State, nowUS int64, op *Op) int64 {
	capacity := op.Burst * op.PeriodUS
	if st.Alg != op.Algorithm {
		return capacity
	}
	tokens := min(st.N, capacity) // a burst lowered by a reload
	elapsed := nowUS - st.At
	if elapsed <= 0 {
		return tokens
	}
	deficit := capacity - tokens
	if elapsed > deficit/op.Limit {
		return capacity
	}
	return tokens + elapsed*op.Limit
}

// levelAt returns the scaled level (1 unit = PeriodUS) at nowUS: the stored
// level drained by Limit per elapsed µs, at least 0.
func levelAt(st *State, nowUS int64, op *Op) int64 {
	if st.Alg != op.Algorithm {
		return 0
	}
	level := st.N
	elapsed := nowUS - st.At
	if elapsed <= 0 {
		return level
	}
	if elapsed > level/op.Limit {
		return 0
	}
	return level - elapsed*op.Limit
}

// windowStart returns the start of the window holding nowUS: windows start
// at multiples of the period since the Unix epoch.
func windowStart(nowUS, periodUS int64) int64 {
	r := nowUS % periodUS
	if r < 0 {
		r += periodUS
	}
	return nowUS - r
}

// fixedAt returns the current window's start and count. A stored window
// later than now's (a clock step back) stays current.
func fixedAt(st *State, nowUS int64, op *Op) (start, n int64) {
	start = windowStart(nowUS, op.PeriodUS)
	if op.Calendar {
		start = op.WindowStartUS
	}
	if st.Alg != op.Algorithm || st.At < start {
		return start, 0
	}
	return st.At, st.N
}

// fixedLeft returns the µs from nowUS to the end of the fixed window that
// starts at start, at least 1. Only a Calendar op's window can end at or
// before nowUS: its bounds come from the caller's clock, its now may be
// another's (the Redis store's server-time mode), and then the window the
// caller chose is full or not for one µs more, never for a negative time
// (behaviour/calendar).
func fixedLeft(start, nowUS int64, op *Op) int64 {
	return max(start+op.PeriodUS-nowUS, 1)
}

// slidingAt returns the current window's start, the previous window's count
// and the current one's, rolling the stored windows forward to nowUS.
func slidingAt(st *State, nowUS int64, op *Op) (start, prev, cur int64) {
	start = windowStart(nowUS, op.PeriodUS)
	switch {
	case st.Alg != op.Algorithm || st.At < start-op.PeriodUS:
		return start, 0, 0
	case st.At < start:
		return start, st.N, 0
	}
	return st.At, st.Prev, st.N
}

// logAt returns the stored timestamps still in the window at nowUS: t is out
// when t ≤ now − period. The log is ascending, so they are a suffix,
// starting at the first t ≥ now − period + 1.
func logAt(st *State, nowUS int64, op *Op) []int64 {
	if st.Alg != op.Algorithm {
		return nil
	}
	i, _ := slices.BinarySearch(st.Log, nowUS-op.PeriodUS+1)
	return st.Log[i:]
}

// distinctAt returns the live members of a Distinct state at nowUS, those
// with At > now − period: a suffix, the set being ascending by At.
func distinctAt(st *State, nowUS int64, op *Op) []Seen {
	if st.Alg != op.Algorithm {
		return nil
	}
	cut := nowUS - op.PeriodUS
	i, _ := slices.BinarySearchFunc(st.Seen, cut, func(s Seen, cut int64) int {
		if s.At <= cut {
			return -1
		}
		return 1
	})
	return st.Seen[i:]
}

// ceilDiv returns ⌈a/b⌉ for b > 0, and 0 for a ≤ 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
