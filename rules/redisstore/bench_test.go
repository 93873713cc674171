package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// The benchmarks run against $EDGE_REDIS_ADDR, on the server's clock as in
// production, and skip without it. BenchmarkTake's redis_rate sub-benchmark
// is go-redis/redis_rate's one-key GCRA on the same server in the same run,
// the yardstick for one round trip with a Lua script:
//
//	EDGE_REDIS_ADDR=127.0.0.1:6390 go test -run '^$' -bench . -benchtime 3s ./rules/redisstore/

const (
	benchKeys = 1024
	// benchParallelism callers per CPU keep the server busy, so that ns/op
	// measures throughput (the server's work per call), not one caller's
	// round-trip latency.
	benchParallelism = 8
)

func BenchmarkTake(b *testing.B) {
	addr := redisAddr(b)
	ctx := context.Background()
	gcraOp := func(k rules.Key) rules.Op {
		return rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: k, Limit: 1_000_000, Burst: 1_000_000, PeriodUS: 1_000_000, Cost: 1, Enforce: true}
	}
	mixed := []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.FixedWindow, rules.SlidingWindow, rules.LeakyBucket}
	benches := []struct {
		name string
		ops  func(i int) []rules.Op
	}{
		{"1op_gcra", func(i int) []rules.Op {
			return []rules.Op{gcraOp(rules.Key{'b', 1, byte(i >> 8), byte(i)})}
		}},
		{"5ops_gcra", func(i int) []rules.Op {
			var ops []rules.Op
			for j := range 5 {
				ops = append(ops, gcraOp(rules.Key{'b', 5, byte(j), byte(i >> 8), byte(i)}))
			}
			return ops
		}},
		{"5ops_mixed", func(i int) []rules.Op {
			var ops []rules.Op
			for j, alg := range mixed {
				op := gcraOp(rules.Key{'b', 6, byte(j), byte(i >> 8), byte(i)})
				op.Algorithm = alg
				ops = append(ops, op)
			}
			return ops
		}},
	}
	// coalesced runs defaultFlushers flushers, coalesced_1 one: larger
	// pipelines, fewer round trips, each call waiting longer.
	modes := []struct {
		name     string
		disable  bool
		flushers int
	}{{"coalesced", false, 0}, {"coalesced_1", false, 1}, {"direct", true, 0}}
	for _, bb := range benches {
		for _, mode := range modes {
			b.Run(bb.name+"/"+mode.name, func(b *testing.B) {
				s := mustNew(b, Options{URL: "redis://" + addr, Prefix: testPrefix("bench"), Timeout: time.Second, DisableCoalescing: mode.disable, flushers: mode.flushers})
				defer s.Close()
				if err := s.Ping(ctx); err != nil {
					b.Fatal(err)
				}
				// Every caller's ops and results, made before timing, as the
				// Engine's pooled scratch holds them.
				calls := make([][]rules.Op, benchKeys)
				for i := range calls {
					calls[i] = bb.ops(i)
				}
				var next atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(benchParallelism)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					res := make([]rules.Result, len(calls[0]))
					for pb.Next() {
						ops := calls[next.Add(1)%benchKeys]
						if err := s.Take(ctx, time.Now(), ops, res); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				if p := s.Stats().Pipelines; p > 0 {
					b.ReportMetric(float64(b.N)/float64(p), "calls/pipeline")
				}
			})
		}
	}
	b.Run("redis_rate", func(b *testing.B) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DisableIdentity: true})
		defer rdb.Close()
		limiter := redis_rate.NewLimiter(rdb)
		limit := redis_rate.PerSecond(1_000_000)
		prefix := testPrefix("bench-rate")
		keys := make([]string, benchKeys)
		for i := range keys {
			keys[i] = prefix + strconv.Itoa(i)
		}
		if _, err := limiter.Allow(ctx, keys[0], limit); err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := limiter.Allow(ctx, keys[next.Add(1)%benchKeys], limit); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkStoretest is the shared store benchmark (one sub-benchmark per
// algorithm, and three ops per call) against a real Redis, on the callers'
// clocks as the shared benchmark drives them.
func BenchmarkStoretest(b *testing.B) {
	addr := redisAddr(b)
	storetest.Bench(b, func(b *testing.B) rules.Store {
		return mustNew(b, Options{URL: "redis://" + addr, Prefix: testPrefix("storebench"), UseCallerClock: true, Timeout: time.Second})
	})
}
