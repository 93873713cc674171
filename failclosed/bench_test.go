package failclosed

import (
	"context"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// BenchmarkTake measures what failclosed adds to a healthy memstore, and
// what a refused flood and an outage cost.
func BenchmarkTake(b *testing.B) {
	tests := []struct {
		name  string
		wrap  bool
		inner func(b *testing.B) rules.Store
		op    rules.Op
	}{
		{"memstore/allowed", false, func(b *testing.B) rules.Store { return newMemstore(b) }, op(1, rules.FailOpen, 1_000_000, time.Second)},
		{"failclosed/allowed", true, func(b *testing.B) rules.Store { return newMemstore(b) }, op(1, rules.FailOpen, 1_000_000, time.Second)},
		{"failclosed/refused_flood", true, func(b *testing.B) rules.Store { return newMemstore(b) }, op(1, rules.FailOpen, 1, time.Hour)},
		{"failclosed/down_deny", true, func(*testing.B) rules.Store { return &fakeStore{err: errDown} }, op(1, rules.FailClosed, 1, time.Hour)},
		{"failclosed/down_local", true, func(*testing.B) rules.Store { return &fakeStore{err: errDown} }, op(1, rules.FailLocal, 1_000_000, time.Second)},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			s := tt.inner(b)
			if tt.wrap {
				s = newStore(b, s, Options{NoBackgroundProbe: true})
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ops := []rules.Op{tt.op}
				res := make([]rules.Result, 1)
				ctx := context.Background()
				now := storetest.Base
				for pb.Next() {
					now = now.Add(time.Microsecond)
					s.Take(ctx, now, ops, res)
				}
			})
		})
	}
}
