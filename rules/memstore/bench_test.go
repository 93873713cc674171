package memstore

import (
	"context"
	"runtime"
	"testing"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

func BenchmarkTake(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) rules.Store {
		s, err := New(Options{SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// BenchmarkMemoryPerKey reports the heap a tracked key costs, at one
// million keys of one rule's budget, per algorithm: the entry (with its
// place in the recency list and the expiry heap), the map slot and the
// heap slot, and for sliding_log the timestamps (a full log: every key
// took its limit). docs/memory-store.md quotes it.
func BenchmarkMemoryPerKey(b *testing.B) {
	const keys = 1_000_000
	type bench struct {
		name  string
		alg   rules.Algorithm
		limit int64
	}
	benches := []bench{
		{"gcra", rules.GCRA, 5}, {"token_bucket", rules.TokenBucket, 5}, {"leaky_bucket", rules.LeakyBucket, 5},
		{"fixed_window", rules.FixedWindow, 5}, {"sliding_window", rules.SlidingWindow, 5},
		{"sliding_log_3", rules.SlidingLog, 3}, {"sliding_log_5", rules.SlidingLog, 5}, {"sliding_log_15", rules.SlidingLog, 15},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			ctx := context.Background()
			cost := int64(1)
			if bb.alg == rules.SlidingLog {
				cost = bb.limit
			}
			op := []rules.Op{{Kind: rules.OpTake, Algorithm: bb.alg, Limit: bb.limit, Burst: bb.limit, PeriodUS: 60_000_000, Cost: cost, Enforce: true, MaxKeys: keys}}
			res := make([]rules.Result, 1)
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, err := New(Options{SweepInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				for i := range keys {
					op[0].Key = rules.Key{'m', 'e', 'm', 0, 0, 0, 0, 0, byte(i), byte(i >> 8), byte(i >> 16)}
					if err := s.Take(ctx, storetest.Base, op, res); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if n := s.Len(); n != keys {
					b.Fatalf("got %d keys, want %d", n, keys)
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "bytes/key")
				runtime.KeepAlive(s)
				s.Close()
			}
		})
	}
}
