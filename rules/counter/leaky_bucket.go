package counter

// leakyBucket is LeakyBucket's entry, the meter form of token_bucket: a
// level (State.N, scaled as token_bucket's tokens) that drains at Limit per
// period since State.At and refuses what would overflow Burst. Its
// decisions equal token_bucket's, and so do its limits (bucketLimits).
var leakyBucket = algorithm{
	Spec:   Spec{Name: "leaky_bucket", Policy: true, Lua: "LEAKY", Burst: true, Periods: 1, FastPath: true},
	limits: bucketLimits,
}

func leakyWait(st *State, nowUS int64, op *Op, cost int64) int64 {
	if cost > op.Burst {
		return -1
	}
	level := levelAt(st, nowUS, op)
	if excess := level + cost*op.PeriodUS - op.Burst*op.PeriodUS; excess > 0 {
		return skew(st, nowUS, op) + ceilDiv(excess, op.Limit)
	}
	return 0
}

func leakyWindow(st *State, nowUS int64, op *Op) int64 {
	capacity := op.Burst * op.PeriodUS
	level := levelAt(st, nowUS, op)
	r := max(capacity-level, 0) / op.PeriodUS
	return skew(st, nowUS, op) + ceilDiv(level+(r+1)*op.PeriodUS-capacity, op.Limit)
}

func leakyReport(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	level := levelAt(st, nowUS, op)
	if resetUS = ceilDiv(level, op.Limit); resetUS > 0 {
		resetUS += skew(st, nowUS, op)
	}
	return max(op.Burst*op.PeriodUS-level, 0) / op.PeriodUS, resetUS
}

func leakyConsume(st *State, nowUS int64, op *Op, cost int64) {
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
