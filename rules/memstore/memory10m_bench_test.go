package memstore

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// BenchmarkMemoryPerGCRAKeyMany reports the heap a tracked GCRA key costs
// at one and ten million keys of one rule's budget (MaxKeys the key
// count), and fails if the store holds more keys than that budget. The
// ten-million case needs about 3 GiB, so it runs only with
// EDGE_BENCH_10M=1 set:
//
//	EDGE_BENCH_10M=1 go test -run XXX -bench MemoryPerGCRAKeyMany -benchtime 1x ./rules/memstore/
func BenchmarkMemoryPerGCRAKeyMany(b *testing.B) {
	for _, keys := range []int{1_000_000, 10_000_000} {
		b.Run(map[int]string{1_000_000: "1M", 10_000_000: "10M"}[keys], func(b *testing.B) {
			if keys > 1_000_000 && os.Getenv("EDGE_BENCH_10M") != "1" {
				b.Skip("set EDGE_BENCH_10M=1 to run the ten-million-key case (about 3 GiB)")
			}
			ctx := context.Background()
			op := []rules.Op{{Kind: rules.OpTake, Algorithm: rules.GCRA, Limit: 5, Burst: 5, PeriodUS: 60_000_000, Cost: 1, Enforce: true, MaxKeys: int32(keys)}}
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
				// Past the budget by a tenth: the store must evict, never hold more.
				for i := range keys + keys/10 {
					op[0].Key = rules.Key{'m', 'e', 'm', 0, 0, 0, 0, 0, byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)}
					if err := s.Take(ctx, storetest.Base, op, res); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if n := s.Len(); n > keys || n < keys*9/10 {
					b.Fatalf("store holds %d keys, want at most the budget %d (and most of it)", n, keys)
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(s.Len()), "bytes/key")
				runtime.KeepAlive(s)
				s.Close()
			}
		})
	}
}
