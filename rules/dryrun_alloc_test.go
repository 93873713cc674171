//go:build !race

package rules_test

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// TestDryRunToggleAllocatesNothing: Check with toggles set (one applying,
// one for another rule, one node-wide and expired) allocates nothing.
func TestDryRunToggleAllocatesNothing(t *testing.T) {
	p := load(t, dryRunPolicy)
	e := newEngine(t, nil)
	e.ReplaceDryRuns([]rules.DryRunToggle{
		{Rule: "a", Until: t0.Add(time.Hour)},
		{Rule: "gone", Until: t0.Add(time.Hour)},
		{Rule: rules.NodeDryRun, Until: t0.Add(-time.Second)},
	})
	s := rules.NewScratch(len(p.Rules))
	ra := req{method: "GET", path: "/a", client: "192.0.2.1"}.build()
	rb := req{method: "GET", path: "/b", client: "192.0.2.1"}.build()
	e.Check(t.Context(), t0, p, ra, s) // size the Scratch
	allocs := testing.AllocsPerRun(100, func() {
		e.Check(t.Context(), t0, p, ra, s)
		e.Check(t.Context(), t0, p, rb, s)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per pair of checks, want 0", allocs)
	}
}
