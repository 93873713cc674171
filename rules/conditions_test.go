package rules_test

import (
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// ip_in and ip_not_in themselves are package basic's (basic/conditions_test.go).

// Through the Engine: the condition decides whether the rule applies to
// the client as counted, and a masked CIDR written with host bits means
// its network.
func TestIPConditionsDecideTheRule(t *testing.T) {
	p := rulestest.Load(t, `
rule "blocked" {
  action = "deny"
  when {
    ip_in     = ["198.51.100.0/24", "2001:db8:1::/48"]
    ip_not_in = ["198.51.100.7"]
  }
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(len(p.Rules))
	tests := []struct {
		client string
		want   rules.Verdict
	}{
		{"198.51.100.1", rules.RefuseForbidden},
		{"198.51.100.7", rules.Forward}, // in the first list, but also in the second
		{"198.51.101.1", rules.Forward},
		{"2001:db8:1:2::9", rules.RefuseForbidden},
		{"2001:db8:2::9", rules.Forward},
	}
	for _, tt := range tests {
		d := check(e, p, req{Method: "GET", Path: "/", Host: "example.com", Client: tt.client}, s)
		if d.Verdict != tt.want {
			t.Errorf("%s: got verdict %v, want %v", tt.client, d.Verdict, tt.want)
		}
	}
}
