package memstore

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// gcraModel is a naive GCRA written as the token bucket it is equivalent
// to when the emission interval T is exact: a rational number of tokens,
// refilled at 1/T per µs up to the burst, with math/big so that it cannot
// round or overflow. It shares no code with rules' integer arithmetic.
type gcraModel struct {
	t, burst int64
	tokens   *big.Rat
	last     int64
}

func newGCRAModel(t, burst int64, now int64) *gcraModel {
	return &gcraModel{t: t, burst: burst, tokens: big.NewRat(burst, 1), last: now}
}

func rat(n int64) *big.Rat { return big.NewRat(n, 1) }

func minRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) < 0 {
		return a
	}
	return b
}

func maxRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) > 0 {
		return a
	}
	return b
}

// toUS converts a whole number of µs held in a Rat.
func toUS(r *big.Rat) time.Duration {
	if !r.IsInt() {
		panic("model: fractional µs " + r.String())
	}
	return time.Duration(r.Num().Int64()) * time.Microsecond
}

// apply runs one op alone at now and returns what a store must report.
func (m *gcraModel) apply(now int64, kind rules.OpKind, cost int64, attempts bool) rules.Result {
	// Refill: elapsed/T tokens, capped at the burst.
	elapsed := big.NewRat(now-m.last, m.t)
	m.tokens = minRat(new(big.Rat).Add(m.tokens, elapsed), rat(m.burst))
	m.last = now
	full := rat(m.burst)
	c := rat(cost)

	var r rules.Result
	switch kind {
	case rules.OpRefund, rules.OpReset:
		r.Allowed = true
	default:
		r.Allowed = cost <= m.burst && m.tokens.Cmp(c) >= 0
		if !r.Allowed && cost > m.burst {
			r.RetryAfter = rules.RetryNever
		}
	}
	switch kind {
	case rules.OpTake:
		switch {
		case r.Allowed:
			m.tokens = new(big.Rat).Sub(m.tokens, c)
		case attempts: // counted, but never below empty
			m.tokens = minRat(m.tokens, rat(0))
		}
	case rules.OpAdd: // into debt, at most one burst
		m.tokens = maxRat(new(big.Rat).Sub(m.tokens, c), minRat(m.tokens, rat(-m.burst)))
	case rules.OpRefund:
		m.tokens = minRat(new(big.Rat).Add(m.tokens, c), full)
	case rules.OpReset:
		m.tokens = full
	}
	left := maxRat(m.tokens, rat(0))
	whole := new(big.Int).Quo(left.Num(), left.Denom()).Int64()
	switch {
	case r.Allowed:
		r.Remaining = whole
		// The effective window (RateLimit's t): the whole tokens left
		// spent, the next one is (whole + 1 − tokens) × T µs away.
		r.ResetAfter = toUS(new(big.Rat).Mul(new(big.Rat).Sub(rat(whole+1), m.tokens), rat(m.t)))
	case r.RetryAfter == rules.RetryNever:
		r.ResetAfter = toUS(new(big.Rat).Mul(new(big.Rat).Sub(rat(whole+1), m.tokens), rat(m.t)))
	default:
		// Refused: the wait for cost from the tokens the op left (an
		// attempt emptied the bucket), and t is that wait.
		r.RetryAfter = toUS(new(big.Rat).Mul(new(big.Rat).Sub(c, m.tokens), rat(m.t)))
		r.ResetAfter = r.RetryAfter
	}
	return r
}

// FuzzGCRA drives memstore's gcra and the naive model with the same ops
// (each a call of its own, at a clock that only moves forward) and requires
// identical results. Input: interval T (µs), limit, burst, then 4 bytes per
// op: two of elapsed time, one of cost, one of kind and flags.
func FuzzGCRA(f *testing.F) {
	f.Add(uint16(200), uint8(5), uint8(5), []byte{0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0})
	f.Add(uint16(1), uint8(1), uint8(1), []byte{1, 0, 1, 0, 0, 0, 2, 2, 0, 0, 9, 2, 3, 0, 1, 3, 0, 0, 1, 4})
	f.Add(uint16(997), uint8(3), uint8(7), []byte{0, 1, 3, 0x10, 0, 200, 4, 0, 2, 0, 1, 1, 0xff, 0xff, 2, 0x80, 7, 0, 3, 2})
	f.Fuzz(func(t *testing.T, interval uint16, limit, burst uint8, script []byte) {
		if interval == 0 || limit == 0 || burst == 0 {
			return
		}
		T, L, B := int64(interval), int64(limit), int64(burst)
		s, err := New(Options{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		op := rules.Op{Algorithm: rules.GCRA, Key: rules.Key{'f'}, Limit: L, Burst: B, PeriodUS: T * L, Enforce: true}
		now := storetest.Base.UnixMicro()
		m := newGCRAModel(T, B, now)
		res := make([]rules.Result, 1)
		for i := 0; i+4 <= len(script); i += 4 {
			dt := int64(script[i]) | int64(script[i+1])<<8
			if script[i+3]&0x80 != 0 {
				dt *= T // long gaps too
			}
			now += dt
			op.Cost = int64(script[i+2]) % (2*B + 2)
			op.Kind = []rules.OpKind{rules.OpTake, rules.OpTake, rules.OpPeek, rules.OpAdd, rules.OpRefund, rules.OpReset, rules.OpTake, rules.OpTake}[script[i+3]&7]
			op.Attempts = script[i+3]&0x40 != 0
			if err := s.Take(context.Background(), time.UnixMicro(now), []rules.Op{op}, res); err != nil {
				t.Fatal(err)
			}
			want := m.apply(now, op.Kind, op.Cost, op.Attempts)
			if res[0] != want {
				t.Fatalf("op %d (kind %d cost %d attempts %v, T %d burst %d) at +%dµs: got %+v, want %+v",
					i/4, op.Kind, op.Cost, op.Attempts, T, B, now-storetest.Base.UnixMicro(), res[0], want)
			}
		}
	})
}
