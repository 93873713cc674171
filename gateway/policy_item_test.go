package gateway

import (
	"testing"

	"github.com/edge-gateway/edge/builtin"
)

// TestPolicyItem: the RateLimit-Policy item of each rule, written once per
// policy (rateLimitNames), is the one the gateway wrote per answer before: the quoted name,
// q the limit, w the period in whole seconds rounded up (at least 1); a
// calendar period has none (its w is the current window's).
func TestPolicyItem(t *testing.T) {
	p, diags := builtin.Load("test.hcl", []byte(`
rule "a-minute" {
  key = ["ip"]
  limit = 60
  period = "1m"
}
rule "odd \"name\"" {
  key = ["ip"]
  limit = 3
  period = "1500ms"
}
rule "fast" {
  key = ["ip"]
  limit = 1
  period = "100ms"
}
rule "monthly" {
  key = ["ip"]
  algorithm = "fixed_window"
  limit = 1000
  period = "month"
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := map[string]string{
		"a-minute":   `"a-minute";q=60;w=60`,
		`odd "name"`: `"odd \"name\"";q=3;w=2`,
		"fast":       `"fast";q=1;w=1`,
		"monthly":    "",
	}
	names := rateLimitNames(p)
	for _, r := range p.Rules {
		if got := string(names[r.Index].item); got != want[r.Name] {
			t.Errorf("%s: PolicyItem %q, want %q", r.Name, got, want[r.Name])
		}
		if got, want := "x"+string(names[r.Index].quoted), "x"+`"`+r.Name+`"`; r.Name != `odd "name"` && got != want {
			t.Errorf("%s: AppendQuotedName %q, want %q", r.Name, got, want)
		}
	}
}
