package rules_test

import (
	"context"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
)

// TestBanOnEveryTag: a ban's marker key never meets the rule's own counter
// key, whatever the first characteristic's tag (global's, 16, once shared
// the ban flag's bit): after a trip the key stays refused for the ban,
// though its counter recovers, and is allowed again after it.
func TestBanOnEveryTag(t *testing.T) {
	for _, key := range []string{`["global"]`, `["ip"]`, `["route"]`, `["ip", "route"]`} {
		p, diags := builtin.Load("ban.hcl", []byte(`
rule "r" {
  key    = `+key+`
  limit  = 2
  period = "1m"
  ban    = "10m"
}
`))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		e := newEngine(t, nil)
		s := rules.NewScratch(1)
		r := req{method: "GET", path: "/x", client: "192.0.2.1"}
		at := func(d time.Duration) rules.Verdict {
			return e.Check(context.Background(), t0.Add(d), p, r.build(), s).Verdict
		}
		for i, want := range []rules.Verdict{rules.Forward, rules.Forward, rules.RefuseLimit} {
			if got := at(0); got != want {
				t.Fatalf("key %s, request %d: verdict %d, want %d", key, i+1, got, want)
			}
		}
		if got := at(5 * time.Minute); got != rules.RefuseLimit {
			t.Errorf("key %s: 5 minutes into the ban (the counter long recovered): verdict %d, want RefuseLimit", key, got)
		}
		if got := at(10*time.Minute + time.Second); got != rules.Forward {
			t.Errorf("key %s: after the ban: verdict %d, want Forward", key, got)
		}
	}
}
