//go:build !race

package dryrun_test

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/dryrun"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// TestDryRunToggleAllocatesNothing: Check with toggles set (one applying,
// one for another rule, one node-wide and expired) allocates nothing.
func TestDryRunToggleAllocatesNothing(t *testing.T) {
	p := rulestest.Load(t, dryRunPolicy)
	e := rulestest.NewEngine(t, nil)
	e.DryRuns().Replace([]dryrun.Toggle{
		{Rule: "a", Until: rulestest.T0.Add(time.Hour)},
		{Rule: "gone", Until: rulestest.T0.Add(time.Hour)},
		{Rule: dryrun.Node, Until: rulestest.T0.Add(-time.Second)},
	})
	s := rules.NewScratch(len(p.Rules))
	ra := rulestest.Req{Method: "GET", Path: "/a", Client: "192.0.2.1"}.Build()
	rb := rulestest.Req{Method: "GET", Path: "/b", Client: "192.0.2.1"}.Build()
	e.Check(t.Context(), rulestest.T0, p, ra, s) // size the Scratch
	allocs := testing.AllocsPerRun(100, func() {
		e.Check(t.Context(), rulestest.T0, p, ra, s)
		e.Check(t.Context(), rulestest.T0, p, rb, s)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per pair of checks, want 0", allocs)
	}
}
