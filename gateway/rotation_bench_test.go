package gateway

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// BenchmarkDecisionPathRotating is BenchmarkDecisionPath in a key-secret
// rotation window (docs/operations.md, "Rotating the key secret"): each
// of the five rules' keys hashed under both secrets and sent with its
// twin, which the memory store finds empty (every key was first made
// under the new secret) and skips. Beside BenchmarkDecisionPath it is the
// window's cost; outside a window the path is BenchmarkDecisionPath's.
func BenchmarkDecisionPathRotating(b *testing.B) {
	for _, tt := range []struct{ name, peer, xff string }{
		{"ipv4", "10.1.2.3", "203.0.113.9, 10.0.0.2"},
		{"ipv6", "fd00::1", "2001:db8:1:2::9, fd00::2"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			bs := newBenchSetupWith(b, benchPolicy, tt.peer, tt.xff, nil, func(o *Options) {
				o.KeySecret = []byte("the bench's new key secret, 32+ bytes")
				o.PreviousKeySecret = []byte("the bench's old key secret, 32+ bytes")
			})
			now := bs.s.clock.Now()
			bs.s.Engine().SetKeyFormats(rules.KeyFormats{RotateUntil: now.Add(time.Hour)})
			if !bs.s.decide(bs.ctx, bs.st, bs.rs) || len(bs.rs.sc.Ops) == 0 {
				b.Fatal("setup: no decision")
			}
			b.ReportAllocs()
			for b.Loop() {
				bs.s.decide(bs.ctx, bs.st, bs.rs)
			}
		})
	}
}
