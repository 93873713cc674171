//go:build !race

package gateway

import (
	"testing"

	"github.com/edge-gateway/edge/rules"
)

// exemptBenchPolicy has a partner exemption that matches the bench request
// (client 203.0.113.9, X-Api-Key k-123456): the login rule is skipped, the
// key rule counts.
const exemptBenchPolicy = `
edge {
  trusted_proxies = ["10.0.0.0/8", "fd00::/8"]
}
rule "login-per-ip" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 5
  period    = "1m"
  sensitive = true
}
rule "per-key" {
  key    = ["header:X-Api-Key"]
  limit  = 1000000
  period = "1m"
}
rule "partner" {
  action = "skip"
  skip   = ["login-per-ip"]
  when {
    ip_in         = ["203.0.113.0/24", "2001:db8::/32"]
    header_equals = { "X-Api-Key" = "k-123456" }
  }
}
`

// TestExemptDecisionPathAllocatesNothing: the skip rules' pass and the
// header and address conditions add no allocation to the decision path.
func TestExemptDecisionPathAllocatesNothing(t *testing.T) {
	bs := newBenchSetupWith(t, exemptBenchPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", nil)
	if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
		t.Errorf("decision path with an exemption allocates %.1f times per request, want 0", n)
	}
	exempt := false
	for _, m := range bs.rs.sc.Matches {
		exempt = exempt || m.Rule.Name == "login-per-ip" && m.Outcome == rules.OutcomeExempt
	}
	if !exempt {
		t.Error("the bench request was not exempt from login-per-ip")
	}
}
