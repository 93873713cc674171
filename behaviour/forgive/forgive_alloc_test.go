//go:build !race

package forgive_test

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/forgive"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// TestExemptCheckAllocatesNothing: Check of a key under a live exemption
// (its marker peeked in the precheck, its match taken out of its rule) and
// of another key of the rule allocates nothing once the Scratch is warm.
func TestExemptCheckAllocatesNothing(t *testing.T) {
	p := rulestest.Load(t, onePerIP)
	e := rulestest.NewEngine(t, nil)
	if _, err := forgive.Forgive(t.Context(), e, rulestest.T0, p, p.Rule("per-ip"), map[string]string{"ip": "203.0.113.7"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	s := rules.NewScratch(len(p.Rules))
	exempt := rulestest.Req{Method: "GET", Path: "/", Client: "203.0.113.7"}.Build()
	other := rulestest.Req{Method: "GET", Path: "/", Client: "198.51.100.9"}.Build()
	e.Check(t.Context(), rulestest.T0, p, exempt, s) // size the Scratch
	allocs := testing.AllocsPerRun(100, func() {
		if d := e.Check(t.Context(), rulestest.T0, p, exempt, s); d.Verdict != rules.Forward || !s.Matches[0].Known {
			t.Fatalf("the exempt key: got verdict %d, known %v, want forwarded and taken out", d.Verdict, s.Matches[0].Known)
		}
		e.Check(t.Context(), rulestest.T0, p, other, s)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per pair of checks, want 0", allocs)
	}
}
