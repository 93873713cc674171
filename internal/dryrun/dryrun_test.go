package dryrun_test

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/dryrun"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

const dryRunPolicy = `
rule "a" {
  paths  = ["/a"]
  key    = ["ip"]
  limit  = 1
  period = "1h"
}

rule "b" {
  paths   = ["/b"]
  key     = ["ip"]
  limit   = 1
  period  = "1h"
  dry_run = true
}
`

// TestDryRunToggles: a toggle puts its rule (or, as "*", every rule) in
// dry-run until its end by the request clock, and "off" never enforces a
// rule the policy puts in dry-run.
func TestDryRunToggles(t *testing.T) {
	p := rulestest.Load(t, dryRunPolicy)
	a, b := p.Rules[0], p.Rules[1]
	tests := []struct {
		name    string
		toggles []dryrun.Toggle
		at      time.Duration // after rulestest.T0
		wantA   bool          // a enforces
		wantB   bool
	}{
		{"none", nil, 0, true, false},
		{"rule a", []dryrun.Toggle{{Rule: "a", Until: rulestest.T0.Add(time.Minute)}}, 0, false, false},
		{"rule a, just before its end", []dryrun.Toggle{{Rule: "a", Until: rulestest.T0.Add(time.Minute)}}, time.Minute - time.Nanosecond, false, false},
		{"rule a, at its end", []dryrun.Toggle{{Rule: "a", Until: rulestest.T0.Add(time.Minute)}}, time.Minute, true, false},
		{"another name", []dryrun.Toggle{{Rule: "A", Until: rulestest.T0.Add(time.Minute)}}, 0, true, false},
		{"node", []dryrun.Toggle{{Rule: dryrun.Node, Until: rulestest.T0.Add(time.Minute)}}, 0, false, false},
		{"node, expired", []dryrun.Toggle{{Rule: dryrun.Node, Until: rulestest.T0.Add(time.Minute)}}, time.Hour, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := rulestest.NewEngine(t, nil)
			e.DryRuns().Replace(tt.toggles)
			now := rulestest.T0.Add(tt.at)
			if got := e.RuleEnforces(p, a, now); got != tt.wantA {
				t.Errorf("a enforces: got %v, want %v", got, tt.wantA)
			}
			if got := e.RuleEnforces(p, b, now); got != tt.wantB {
				t.Errorf("b enforces: got %v, want %v", got, tt.wantB)
			}
			// Check agrees: a's second request is refused only when a enforces.
			s := rules.NewScratch(len(p.Rules))
			r := rulestest.Req{Method: "GET", Path: "/a", Client: "192.0.2.1"}.Build()
			e.Check(t.Context(), now, p, r, s)
			d := e.Check(t.Context(), now, p, r, s)
			if got := d.Verdict == rules.RefuseLimit; got != tt.wantA {
				t.Errorf("second request refused: got %v, want %v", got, tt.wantA)
			}
			if !tt.wantA && s.Matches[0].Outcome != rules.OutcomeDryRunDeny {
				t.Errorf("second request's outcome: got %v, want dry_run_deny", s.Matches[0].Outcome)
			}
		})
	}

	e := rulestest.NewEngine(t, nil)
	e.DryRuns().Set("a", true, rulestest.T0.Add(time.Minute), "why", "who")
	e.DryRuns().Set("b", false, time.Time{}, "off", "who") // b stays in dry-run by the policy
	if e.RuleEnforces(p, a, rulestest.T0) || e.RuleEnforces(p, b, rulestest.T0) {
		t.Error("after a on and b off: want both in dry-run")
	}
	if tg, ok := e.DryRuns().Rule(a.Name, rulestest.T0); !ok || tg.Reason != "why" || tg.Actor != "who" {
		t.Errorf("RuleDryRun(a): got %+v %v", tg, ok)
	}
	e.DryRuns().Set("a", false, time.Time{}, "done", "who")
	if !e.RuleEnforces(p, a, rulestest.T0) || len(e.DryRuns().List()) != 0 {
		t.Errorf("after a off: want a enforcing and no toggles, got %v", e.DryRuns().List())
	}
}
