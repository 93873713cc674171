package counter

import "fmt"

// gcra is GCRA's entry: one theoretical arrival time (State.At), emission
// interval T = period/limit, tolerance burst×T.
var gcra = algorithm{
	Spec:   Spec{Name: "gcra", Policy: true, Lua: "GCRA", Burst: true, Periods: 1, FastPath: true},
	limits: gcraLimits,
}

func gcraLimits(_ string, limit, burst, periodUS int64) error {
	if burst < 1 {
		return fmt.Errorf("%w: gcra burst %d must be at least 1", ErrInvalidLimits, burst)
	}
	if t := periodUS / limit; over(burst, t, MaxSpanUS) {
		return fmt.Errorf("%w: gcra burst %d × interval %dµs exceeds 2^50µs", ErrInvalidLimits, burst, t)
	}
	return nil
}

func gcraWait(st *State, nowUS int64, op *Op, cost int64) int64 {
	t := op.PeriodUS / op.Limit
	tol := op.Burst * t
	if cost > op.Burst {
		return -1
	}
	tat := max(gcraTAT(st, op), nowUS)
	return max(tat+cost*t-nowUS-tol, 0)
}

func gcraWindow(st *State, nowUS int64, op *Op) int64 {
	// r = ⌊(tol−ahead)/T⌋ units left; spent, TAT is ahead + r×T, and
	// one more fits once ahead + (r+1)×T − tol has passed.
	t := op.PeriodUS / op.Limit
	tol := op.Burst * t
	ahead := max(gcraTAT(st, op)-nowUS, 0)
	r := max((tol-ahead)/t, 0)
	return ahead + (r+1)*t - tol
}

func gcraReport(st *State, nowUS int64, op *Op) (remaining, resetUS int64) {
	t := op.PeriodUS / op.Limit
	tol := op.Burst * t
	ahead := max(gcraTAT(st, op)-nowUS, 0)
	return max((tol-ahead)/t, 0), ahead
}

func gcraConsume(st *State, nowUS int64, op *Op, cost int64) {
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

// gcraTAT returns st's TAT, 0 when fresh (a State of another algorithm).
func gcraTAT(st *State, op *Op) int64 {
	if st.Alg != op.Algorithm {
		return 0
	}
	return st.At
}
