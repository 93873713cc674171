package counter

// fixedWindow is FixedWindow's entry: a count (State.N) per window, windows
// starting at multiples of the period since the Unix epoch (State.At, the
// window's start), or a calendar op's own window (Op.Calendar).
var fixedWindow = algorithm{
	Spec: Spec{Name: "fixed_window", Policy: true, Lua: "FIXED", Periods: 1, FastPath: true},
}

func fixedWait(st *State, nowUS int64, op *Op, cost int64) int64 {
	if cost > op.Limit {
		return -1
	}
	start, n := fixedAt(st, nowUS, op)
	if n+cost > op.Limit {
		return fixedLeft(start, nowUS, op)
	}
	return 0
}

func fixedWindowUS(st *State, nowUS int64, op *Op) int64 {
	// Spent, the window is full until it ends.
	start, _ := fixedAt(st, nowUS, op)
	return fixedLeft(start, nowUS, op)
}

func fixedReport(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	start, n := fixedAt(st, nowUS, op)
	if n == 0 {
		return op.Limit, 0
	}
	return max(op.Limit-n, 0), fixedLeft(start, nowUS, op)
}

func fixedConsume(st *State, nowUS int64, op *Op, cost int64) {
	start, n := fixedAt(st, nowUS, op)
	st.At, st.N, st.Prev = start, consumeCount(n, op, cost), 0
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
