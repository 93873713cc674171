package counter

import "fmt"

// tokenBucket is TokenBucket's entry: up to Burst tokens (State.N, scaled:
// one token is PeriodUS units), refilled at Limit per period since State.At.
var tokenBucket = algorithm{
	Spec:   Spec{Name: "token_bucket", Policy: true, Lua: "TOKEN", Burst: true, Periods: 1, FastPath: true},
	limits: bucketLimits,
}

// bucketLimits are token_bucket's and leaky_bucket's: burst ≥ 1, and their
// scaled capacity burst×period at most MaxScaled.
func bucketLimits(name string, _, burst, periodUS int64) error {
	if burst < 1 {
		return fmt.Errorf("%w: %s burst %d must be at least 1", ErrInvalidLimits, name, burst)
	}
	if over(burst, periodUS, MaxScaled) {
		return fmt.Errorf("%w: %s burst %d × period %dµs exceeds 2^51; use gcra (same decisions) or a smaller burst", ErrInvalidLimits, name, burst, periodUS)
	}
	return nil
}

func tokenWait(st *State, nowUS int64, op *Op, cost int64) int64 {
	if cost > op.Burst {
		return -1
	}
	tokens := tokensAt(st, nowUS, op)
	if need := cost*op.PeriodUS - tokens; need > 0 {
		return skew(st, nowUS, op) + ceilDiv(need, op.Limit)
	}
	return 0
}

func tokenWindow(st *State, nowUS int64, op *Op) int64 {
	tokens := tokensAt(st, nowUS, op)
	r := max(tokens, 0) / op.PeriodUS
	return skew(st, nowUS, op) + ceilDiv((r+1)*op.PeriodUS-tokens, op.Limit)
}

func tokenReport(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	tokens := tokensAt(st, nowUS, op)
	if resetUS = ceilDiv(op.Burst*op.PeriodUS-tokens, op.Limit); resetUS > 0 {
		resetUS += skew(st, nowUS, op)
	}
	return max(tokens, 0) / op.PeriodUS, resetUS
}

func tokenConsume(st *State, nowUS int64, op *Op, cost int64) {
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
