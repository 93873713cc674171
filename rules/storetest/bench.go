package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// Bench measures Take on keys that already exist, from parallel callers
// (b.RunParallel), with caller-owned ops and results as the Engine holds
// them: one sub-benchmark per algorithm with one op per call, "distinct_64"
// (count_distinct, 64 values a second; each key sees 48 values in turn,
// so that every call finds a known one among 48 live members and moves it
// to the newest place) and
// "mixed_3ops" with three. Limits are roomy, so most calls are allowed and
// consume, the common path. Each caller works its own 64 keys and clock.
func Bench(b *testing.B, newStore func(b *testing.B) rules.Store) {
	const keysPerCaller, callers = 64, 256
	mk := func(alg rules.Algorithm, limit, periodUS int64) rules.Op {
		return rules.Op{Kind: rules.OpTake, Algorithm: alg, Limit: limit, Burst: limit, PeriodUS: periodUS, Cost: 1, Enforce: true}
	}
	type bench struct {
		name string
		ops  []rules.Op // templates; op j of key i gets keyOf(i, j)
	}
	var benches []bench
	for _, alg := range algorithms {
		o := mk(alg, 1_000_000, second)
		if alg == rules.SlidingLog {
			o = mk(alg, 64, 100_000)
		}
		benches = append(benches, bench{alg.String(), []rules.Op{o}})
	}
	benches = append(benches, bench{"distinct_64", []rules.Op{mk(rules.Distinct, 64, second)}})
	benches = append(benches, bench{"mixed_3ops", []rules.Op{
		mk(rules.GCRA, 1_000_000, second), mk(rules.SlidingWindow, 1_000_000, second), mk(rules.FixedWindow, 1_000_000, second),
	}})
	keyOf := func(i, j int) rules.Key {
		var k rules.Key
		k[0], k[1], k[2], k[3] = 'b', byte(j), byte(i>>8), byte(i)
		return k
	}
	setKeys := func(ops []rules.Op, i int) {
		for j := range ops {
			ops[j].Key = keyOf(i, j)
		}
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			s := newStore(b)
			defer s.Close()
			ctx := context.Background()
			// Create every key first: the benchmark measures existing keys.
			ops := append([]rules.Op(nil), bb.ops...)
			res := make([]rules.Result, len(ops))
			for i := range keysPerCaller * callers {
				setKeys(ops, i)
				if err := s.Take(ctx, Base, ops, res); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				first := int(next.Add(1)-1) % callers * keysPerCaller
				ops := append([]rules.Op(nil), bb.ops...)
				res := make([]rules.Result, len(ops))
				now := Base
				for n := 0; pb.Next(); n++ {
					now = now.Add(10 * time.Microsecond)
					setKeys(ops, first+n%keysPerCaller)
					for j := range ops {
						ops[j].Member = uint64(n / keysPerCaller % 48) // distinct's value; the others ignore it
					}
					if err := s.Take(ctx, now, ops, res); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
