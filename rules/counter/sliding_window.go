package counter

import "fmt"

// slidingWindow is SlidingWindow's entry, the two-counter estimate: the
// current window's start (State.At) and count (State.N), and the previous
// window's count (State.Prev), weighted by its overlap with the rolling
// period. Its state lasts two periods: a count weighs in the estimate until
// the end of the window after its own.
var slidingWindow = algorithm{
	Spec:   Spec{Name: "sliding_window", Policy: true, Lua: "SLIDING", Periods: 2, FastPath: true},
	limits: slidingLimits,
}

func slidingLimits(_ string, limit, _, periodUS int64) error {
	if over(limit, periodUS, MaxScaled) {
		return fmt.Errorf("%w: sliding_window limit %d × period %dµs exceeds 2^51; use fixed_window, gcra or a shorter period", ErrInvalidLimits, limit, periodUS)
	}
	return nil
}

func slidingWaitUS(st *State, nowUS int64, op *Op, cost int64) int64 {
	if cost > op.Limit {
		return -1
	}
	start, prev, cur := slidingAt(st, nowUS, op)
	return slidingWait(start, prev, cur, nowUS, op, cost)
}

func slidingWindowUS(st *State, nowUS int64, op *Op) int64 {
	p := op.PeriodUS
	start, prev, cur := slidingAt(st, nowUS, op)
	e := max(nowUS-start, 0)
	r := max(op.Limit-cur-ceilDiv(prev*(p-e), p), 0)
	return slidingWait(start, prev, cur+r, nowUS, op, 1)
}

func slidingReport(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
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
}

func slidingConsume(st *State, nowUS int64, op *Op, cost int64) {
	start, prev, cur := slidingAt(st, nowUS, op)
	if op.Kind == OpRefund && cost > cur {
		// The unit refunded may have been charged in the previous
		// window, before the boundary passed.
		prev = max(prev-(cost-cur), 0)
	}
	st.At, st.N, st.Prev = start, consumeCount(cur, op, cost), prev
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
