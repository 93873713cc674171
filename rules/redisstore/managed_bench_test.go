package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
)

// BenchmarkTakeTransport is BenchmarkTake's one-op GCRA on a fresh
// redis-server reached plainly, over TLS and through Sentinel (the TLS
// handshake is paid once per connection, before the timer), coalescing
// on, callers in parallel: what TLS costs a request in the steady state.
//
//	go test -run '^$' -bench TakeTransport -benchtime 3s ./rules/redisstore/
func BenchmarkTakeTransport(b *testing.B) {
	for _, tr := range []struct {
		name  string
		start func(b *testing.B) Options
	}{
		{"plain", func(b *testing.B) Options { return Options{URL: testredis.Start(b).URL()} }},
		{"tls", func(b *testing.B) Options {
			srv := testredis.StartTLS(b, testredis.TLSOptions{})
			return Options{URL: srv.URL(), TLS: TLS(srv.TLS())}
		}},
		{"sentinel", func(b *testing.B) Options {
			return Options{URL: testredis.StartSentinel(b, testredis.SentinelOptions{}).URL()}
		}},
	} {
		b.Run(tr.name, func(b *testing.B) {
			o := tr.start(b)
			o.Timeout = time.Second
			s := mustNew(b, o)
			defer s.Close()
			if err := s.Ping(context.Background()); err != nil {
				b.Fatal(err)
			}
			var next atomic.Uint32
			b.ReportAllocs()
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				res := make([]rules.Result, 1)
				for pb.Next() {
					i := next.Add(1) % benchKeys
					op := []rules.Op{{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{'t', byte(i >> 8), byte(i)}, Limit: 1_000_000, Burst: 1_000_000, PeriodUS: 1_000_000, Cost: 1, Enforce: true}}
					if err := s.Take(context.Background(), time.Now(), op, res); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
