//go:build !race

package gateway

import (
	"context"
	"testing"
)

// BenchmarkDecisionPathKnown is the decision path of a known caller on
// benchKnownPolicy: its known block's marker resolved (by its visitor ID
// and its account) and checked in the call before the main one with the
// ban and its guilt marker, the exempt rule's op made a peek.
func BenchmarkDecisionPathKnown(b *testing.B) {
	bs := newBenchSetupWith(b, benchKnownPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", validCookie)
	bs.ctx.Request.Header.Set("X-User", "alice@example.com")
	bs.s.decide(bs.ctx, bs.st, bs.rs)
	if _, err := bs.s.engine.Settle(context.Background(), bs.rs.now, bs.rs.sc, 200, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		bs.s.decide(bs.ctx, bs.st, bs.rs)
	}
}
