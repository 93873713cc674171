package rules_test

import (
	"context"
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// TestExplainSendsOnlyPeeks: Explain of a request that a missing identity
// rejects (which Check charges to every rule as an attempt) decides as
// Check does but sends only peeks without Attempts; after many explains,
// the attempts rule's counter is untouched: a real request leaves it
// where a fresh engine's first request does.
func TestExplainSendsOnlyPeeks(t *testing.T) {
	p := rulestest.Load(t, `
rule "verify-per-ip" {
  paths     = ["/otp/verify"]
  key       = ["ip"]
  algorithm = "sliding_log"
  limit     = 3
  period    = "1m"
  count     = "attempts"
}
rule "verify-per-key" {
  paths            = ["/otp/verify"]
  key              = ["header:X-Api-Key"]
  missing_identity = "reject"
  limit            = 10
  period           = "1m"
}
`)
	rec := &rulestest.Recorder{Store: rulestest.NewStore(t)}
	e, control := rulestest.NewEngine(t, rec), rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	bare := req{Method: "POST", Path: "/otp/verify", Host: "example.com", Client: "192.0.2.1"}
	for range 5 {
		d := e.Explain(context.Background(), rulestest.T0, p, bare.Build(), s)
		if d.Verdict != rules.RejectMissing {
			t.Fatalf("explain: verdict %d, want RejectMissing", d.Verdict)
		}
	}
	if rec.N() != 5 {
		t.Fatalf("%d store calls for 5 explains, want 5", rec.N())
	}
	for _, ops := range rec.Since(0) {
		for _, op := range ops {
			if op.Kind != rules.OpPeek || op.Attempts {
				t.Fatalf("explain sent op kind %d attempts %v, want a peek without attempts", op.Kind, op.Attempts)
			}
		}
	}
	keyed := bare
	keyed.Fields = fields{HeaderValues: map[string]string{"X-Api-Key": "k1"}}
	got := check(e, p, keyed, s)
	gotRemaining := s.Res[s.Matches[0].Op].Remaining
	cs := rules.NewScratch(4)
	want := check(control, p, keyed, cs)
	if got.Verdict != want.Verdict || gotRemaining != cs.Res[cs.Matches[0].Op].Remaining {
		t.Errorf("after 5 explains: verdict %d remaining %d; a fresh engine: verdict %d remaining %d",
			got.Verdict, gotRemaining, want.Verdict, cs.Res[cs.Matches[0].Op].Remaining)
	}
	// Check itself still charges the rejected request as an attempt.
	check(e, p, bare, s)
	if ops := rec.Last(); ops[0].Kind != rules.OpTake || !ops[0].Attempts {
		t.Errorf("Check after Explain sent kind %d attempts %v, want a take charged as an attempt", ops[0].Kind, ops[0].Attempts)
	}
}
