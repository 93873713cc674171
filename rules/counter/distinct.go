package counter

import (
	"slices"
)

// distinct is Distinct's entry (count_distinct): the members seen in the
// last period and when each was last (State.Seen), at most Limit, exact.
// Its ops count Op.Member, one each whatever their Cost; it keeps an array,
// and so runs in take.lua's port, in a sorted set beside the key's string.
var distinct = algorithm{
	Spec:   Spec{Name: "distinct", Lua: "DISTINCT", Periods: 1, Set: true, Members: true},
	limits: limitAtMost(MaxDistinctLimit, "count_distinct limit %d exceeds %d distinct values per key"),
}

func distinctWait(st *State, nowUS int64, op *Op, cost int64) int64 {
	// One member: a live member is counted already, and a new one
	// needs cost free places (1, or one more for each value of the
	// same key earlier in the request, which the call may add before
	// it: behaviour/values), which the oldest live members give up
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

func distinctWindow(st *State, nowUS int64, op *Op) int64 {
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

func distinctReport(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	seen := distinctAt(st, nowUS, op)
	if len(seen) == 0 {
		return op.Limit, 0
	}
	return max(op.Limit-int64(len(seen)), 0), seen[len(seen)-1].At + op.PeriodUS - nowUS
}

// distinctConsume applies op to a Distinct set, ignoring Cost (a call
// counts one member): live members are kept (expired ones dropped, and
// after a limit was lowered only the newest Limit), then a take or add
// counts Member at max(now, newest) (a refresh moves a live member there;
// a new one joins only while fewer than Limit are live, so a full set
// evicts nothing and stays full), a refund removes Member. A take that
// does not fit (an Attempts op refused) thus changes nothing but the
// expired members.
func distinctConsume(st *State, nowUS int64, op *Op) {
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
