//go:build !race

package leasestore

import (
	"context"
	"testing"

	"github.com/edge-gateway/edge/rules"
)

// (Not under -race, whose sync.Pool drops items at random.)

// TestTakeAllocs: answering from held units, and sending a lease's batch,
// allocate nothing once the key's lease exists.
func TestTakeAllocs(t *testing.T) {
	sh := shared(t)
	st := New(sh, Options{})
	ops := []rules.Op{hourly(1, 1e9, 20), hourly(7, 1e9, 0)}
	res := make([]rules.Result, 2)
	ctx := context.Background()
	if err := st.Take(ctx, t0, ops, res); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = st.Take(ctx, t0, ops, res) }); n != 0 {
		t.Errorf("%.1f allocations a call, want 0", n)
	}
	if s := st.Stats(); s.Batches < 50 || s.Local < 500 {
		t.Errorf("stats %+v: the run did not take both paths", s)
	}
}
