package basic_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
)

// ip_in and ip_not_in judge the client address as it counts: an IPv4
// address, an IPv6 one, a single host, and IPv4 embedded in IPv6 (which the
// gateway unwraps into Request.Client before any rule sees it).
func TestIPConditions(t *testing.T) {
	p, diags := builtin.Load("test.hcl", []byte(`
rule "in" {
  action = "deny"
  when { ip_in = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"] }
}
rule "not-in" {
  action = "deny"
  when { ip_not_in = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"] }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in, notIn := p.Rule("in").Conditions[0], p.Rule("not-in").Conditions[0]
	if got, want := fmt.Sprint(in), `ip_in = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]`; got != want {
		t.Errorf("String: got %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(notIn), `ip_not_in = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]`; got != want {
		t.Errorf("String: got %s, want %s", got, want)
	}
	tests := []struct {
		client string
		in     bool
	}{
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"11.0.0.0", false},
		{"9.255.255.255", false},
		{"192.0.2.7", true},
		{"192.0.2.8", false}, // a single address is /32
		{"2001:db8::1", true},
		{"2001:db8:ffff:ffff::1", true},
		{"2001:db9::1", false},
		{"::ffff:10.0.0.1", false}, // never reaches a rule: the gateway unmaps it (Request.Client)
		{"2001:db8::10.0.0.1", true},
	}
	s := rules.NewScratch(len(p.Rules))
	s.Begin(p)
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			req := &rules.Request{Client: netip.MustParseAddr(tt.client)}
			wantIn, wantNot := rules.Missing, rules.Present
			if tt.in {
				wantIn, wantNot = rules.Present, rules.Missing
			}
			if got := in.Eval(req, s); got != wantIn {
				t.Errorf("ip_in: got %v, want %v", got, wantIn)
			}
			if got := notIn.Eval(req, s); got != wantNot {
				t.Errorf("ip_not_in: got %v, want %v", got, wantNot)
			}
		})
	}
	// An address that is not valid meets neither: the rule does not apply.
	var zero rules.Request
	if in.Eval(&zero, s) != rules.Missing || notIn.Eval(&zero, s) != rules.Missing {
		t.Error("an invalid client address meets ip_in or ip_not_in")
	}
}
