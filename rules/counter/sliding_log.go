package counter

import (
	"slices"
)

// slidingLog is SlidingLog's entry: the timestamps of consumed units
// (State.Log), at most Limit, exact. It keeps an array, and so runs in
// take.lua's port, in a sorted set beside the key's string.
var slidingLog = algorithm{
	Spec:   Spec{Name: "sliding_log", Policy: true, Lua: "LOG", Periods: 1, Set: true},
	limits: limitAtMost(MaxLogLimit, "sliding_log limit %d exceeds %d timestamps per key; use sliding_window"),
}

func logWait(st *State, nowUS int64, op *Op, cost int64) int64 {
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
}

func logWindow(st *State, nowUS int64, op *Op) int64 {
	// Spent, the log holds max(n, limit) timestamps (the r new ones at
	// nowUS); one more fits once the k-th oldest has left.
	log := logAt(st, nowUS, op)
	n := int64(len(log))
	if k := max(n, op.Limit) + 1 - op.Limit; k <= n {
		return log[k-1] + op.PeriodUS - nowUS
	}
	return op.PeriodUS
}

func logReport(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	log := logAt(st, nowUS, op)
	if len(log) == 0 {
		return op.Limit, 0
	}
	return max(op.Limit-int64(len(log)), 0), log[len(log)-1] + op.PeriodUS - nowUS
}

func logConsume(st *State, nowUS int64, op *Op, cost int64) {
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
