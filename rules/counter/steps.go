package counter

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

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
	// implements (an id past the table's).
	ErrUnsupported = errors.New("unsupported algorithm")
)

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
	case alg >= NumAlgorithms:
		return fmt.Errorf("%w: algorithm %d", ErrUnsupported, alg)
	case limit < 1:
		return fmt.Errorf("%w: limit %d must be at least 1", ErrInvalidLimits, limit)
	case periodUS < 1 || periodUS > MaxPeriodUS:
		return fmt.Errorf("%w: period %dµs must be between 1µs and %v", ErrInvalidLimits, periodUS, time.Duration(MaxPeriodUS)*time.Microsecond)
	case periodUS < limit:
		return fmt.Errorf("%w: limit %d per %dµs is an emission interval under 1µs", ErrInvalidLimits, limit, periodUS)
	}
	if a := &table[alg]; a.limits != nil {
		return a.limits(a.Name, limit, burst, periodUS)
	}
	return nil
}

// limitAtMost returns the limits of an algorithm that stores one entry
// per unit of its limit (sliding_log, distinct): a limit over max is
// refused, why given by format, of the limit and max.
func limitAtMost(max int64, format string) func(name string, limit, burst, periodUS int64) error {
	return func(_ string, limit, _, _ int64) error {
		if limit > max {
			return fmt.Errorf("%w: "+format, ErrInvalidLimits, limit, max)
		}
		return nil
	}
}

// over reports whether a×b > bound, for a, b ≥ 0, without overflow: the
// products of ValidateLimits are checked in 128 bits, since it runs on every
// Take and divisions cost more than multiplications.
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
// (allowed) and the request's (refused), as rules.Store's contract says: a
// take consumes when allowed and the request is not refused, or always when
// it counts attempts; a peek never; add, refund and reset always.
func Consumes(op *Op, allowed, refused bool) bool {
	switch op.Kind {
	case OpTake:
		return op.Attempts || (allowed && !refused)
	case OpPeek:
		return false
	}
	return true
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
		// a Distinct op needing several places (behaviour/values) that an
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
		gcraConsume(st, nowUS, op, cost)
	case TokenBucket:
		tokenConsume(st, nowUS, op, cost)
	case LeakyBucket:
		leakyConsume(st, nowUS, op, cost)
	case FixedWindow:
		fixedConsume(st, nowUS, op, cost)
	case SlidingWindow:
		slidingConsume(st, nowUS, op, cost)
	case SlidingLog:
		logConsume(st, nowUS, op, cost)
	case Distinct:
		distinctConsume(st, nowUS, op)
	default:
		return
	}
	st.Alg = op.Algorithm
}

// The steps of the algorithms, dispatched by one switch each (the table
// cannot hold them: algorithm's doc). A case per table entry.

// waitUS returns the µs from nowUS until a take of cost would fit st,
// with nothing else happening meanwhile: 0 when it fits now, -1 when it
// never can (cost over the burst or limit, or an unknown algorithm). Every
// algorithm's state only decays towards empty while idle, so the take fits
// at any time from then on: a client retrying after the wait is admitted.
func waitUS(st *State, nowUS int64, op *Op, cost int64) int64 {
	switch op.Algorithm {
	case GCRA:
		return gcraWait(st, nowUS, op, cost)
	case TokenBucket:
		return tokenWait(st, nowUS, op, cost)
	case LeakyBucket:
		return leakyWait(st, nowUS, op, cost)
	case FixedWindow:
		return fixedWait(st, nowUS, op, cost)
	case SlidingWindow:
		return slidingWaitUS(st, nowUS, op, cost)
	case SlidingLog:
		return logWait(st, nowUS, op, cost)
	case Distinct:
		return distinctWait(st, nowUS, op, cost)
	}
	return -1
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
// 0 for an unknown algorithm.
func windowUS(st *State, nowUS int64, op *Op) int64 {
	switch op.Algorithm {
	case GCRA:
		return gcraWindow(st, nowUS, op)
	case TokenBucket:
		return tokenWindow(st, nowUS, op)
	case LeakyBucket:
		return leakyWindow(st, nowUS, op)
	case FixedWindow:
		return fixedWindowUS(st, nowUS, op)
	case SlidingWindow:
		return slidingWindowUS(st, nowUS, op)
	case SlidingLog:
		return logWindow(st, nowUS, op)
	case Distinct:
		return distinctWindow(st, nowUS, op)
	}
	return 0
}

// reportState returns the units left and the µs until st is back to the full
// allowance (equivalently, decayed to empty) at op's parameters; 0, 0 for an
// unknown algorithm.
func reportState(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	switch op.Algorithm {
	case GCRA:
		return gcraReport(st, nowUS, op)
	case TokenBucket:
		return tokenReport(st, nowUS, op)
	case LeakyBucket:
		return leakyReport(st, nowUS, op)
	case FixedWindow:
		return fixedReport(st, nowUS, op)
	case SlidingWindow:
		return slidingReport(st, nowUS, op)
	case SlidingLog:
		return logReport(st, nowUS, op)
	case Distinct:
		return distinctReport(st, nowUS, op)
	}
	return 0, 0
}

// ceilDiv returns ⌈a/b⌉ for b > 0, and 0 for a ≤ 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
