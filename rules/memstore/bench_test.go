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

// BenchmarkMemoryPerGCRAKey reports the heap a tracked GCRA key costs, at
// one million keys: entry, LRU element and map slot.
func BenchmarkMemoryPerGCRAKey(b *testing.B) {
	const keys = 1_000_000
	ctx := context.Background()
	op := []rules.Op{{Kind: rules.OpTake, Algorithm: rules.GCRA, Limit: 5, Burst: 5, PeriodUS: 1_000_000, Cost: 1, Enforce: true}}
	res := make([]rules.Result, 1)
	b.ReportAllocs()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := New(Options{MaxKeys: 2 * keys, SweepInterval: -1}) // no shard evicts
		if err != nil {
			b.Fatal(err)
		}
		for i := range keys {
			op[0].Key = rules.Key{byte(i), byte(i >> 8), byte(i >> 16), 'm'}
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
}
