//go:build !race

package gateway

import (
	"testing"
	"time"
)

// TestRefusalTrackingAllocatesNothing: counting a refusal in the top
// refused keys allocates nothing once its rule has refused before, however
// many distinct keys come (a full bucket replaces its smallest entry).
func TestRefusalTrackingAllocatesNothing(t *testing.T) {
	var tr refusedTracker
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var key [15]byte
	var client [16]byte
	tr.add("per-ip", key, client, now)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		i++
		key[0], key[1] = byte(i), byte(i>>8)
		tr.add("per-ip", key, client, now)
	}); n != 0 {
		t.Errorf("got %v allocations per refusal, want 0", n)
	}
}

func BenchmarkRefusalTracking(b *testing.B) {
	b.ReportAllocs()
	var tr refusedTracker
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var key [15]byte
	var client [16]byte
	i := 0
	for b.Loop() {
		i++
		key[0], key[1] = byte(i), byte(i>>8)
		tr.add("per-ip", key, client, now)
	}
}
