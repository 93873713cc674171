package fields_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
)

// headers is a rules.Fields of request headers only, looked up
// case-insensitively as fasthttp does; a header sent empty is "".
type headers map[string]string

func (h headers) Header(n []byte) []byte {
	for k, v := range h {
		if strings.EqualFold(k, string(n)) {
			return []byte(v)
		}
	}
	return nil
}
func (headers) Cookie([]byte) []byte   { return nil }
func (headers) Query([]byte) []byte    { return nil }
func (headers) RawQuery() []byte       { return nil }
func (headers) Body() ([]byte, []byte) { return nil, nil }
func (headers) Cookies() []byte        { return nil }

func loadCond(t *testing.T, when string) (*rules.Policy, rules.Condition) {
	t.Helper()
	p, diags := builtin.Load("test.hcl", []byte("rule \"r\" {\n  action = \"deny\"\n  when {\n    "+when+"\n  }\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p, p.Rule("r").Conditions[0]
}

func eval(p *rules.Policy, c rules.Condition, f rules.Fields) rules.Status {
	s := rules.NewScratch(len(p.Rules))
	s.Begin(p)
	return c.Eval(&rules.Request{Client: netip.MustParseAddr("192.0.2.1"), Fields: f}, s)
}

func TestHeaderPresent(t *testing.T) {
	p, c := loadCond(t, `header_present = ["X-Monitoring", "X-Probe-Region"]`)
	if got, want := fmt.Sprint(c), `header_present = ["X-Monitoring", "X-Probe-Region"]`; got != want {
		t.Errorf("String: got %s, want %s", got, want)
	}
	tests := []struct {
		name string
		f    rules.Fields
		want rules.Status
	}{
		{"both", headers{"X-Monitoring": "1", "X-Probe-Region": "eu"}, rules.Present},
		{"other spelling", headers{"x-monitoring": "1", "X-PROBE-REGION": "eu"}, rules.Present},
		{"one missing", headers{"X-Monitoring": "1"}, rules.Missing},
		{"one empty", headers{"X-Monitoring": "1", "X-Probe-Region": ""}, rules.Missing},
		{"none", headers{}, rules.Missing},
		{"no fields", nil, rules.Missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eval(p, c, tt.f); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := p.HeaderNames(); len(got) != 2 || got[0] != "X-Monitoring" || got[1] != "X-Probe-Region" {
		t.Errorf("HeaderNames: got %q, want the two names as written", got)
	}
}

func TestHeaderEquals(t *testing.T) {
	const secret = "pk_live_7f3a9c2e"
	p, c := loadCond(t, `header_equals = { "X-Partner-Key" = "`+secret+`", "X-Partner" = "acme" }`)
	if got := fmt.Sprint(c); strings.Contains(got, secret) || strings.Contains(got, "acme") {
		t.Errorf("String shows a value: %s", got)
	}
	if got, want := fmt.Sprint(c), `header_equals = { "X-Partner-Key" = (redacted), "X-Partner" = (redacted) }`; got != want {
		t.Errorf("String: got %s, want %s", got, want)
	}
	tests := []struct {
		name string
		f    rules.Fields
		want rules.Status
	}{
		{"both equal", headers{"X-Partner-Key": secret, "X-Partner": "acme"}, rules.Present},
		{"name in another case", headers{"x-partner-key": secret, "x-partner": "acme"}, rules.Present},
		{"value in another case", headers{"X-Partner-Key": strings.ToUpper(secret), "X-Partner": "acme"}, rules.Missing},
		{"a prefix", headers{"X-Partner-Key": secret[:len(secret)-1], "X-Partner": "acme"}, rules.Missing},
		{"longer", headers{"X-Partner-Key": secret + "0", "X-Partner": "acme"}, rules.Missing},
		{"one wrong", headers{"X-Partner-Key": secret, "X-Partner": "acme2"}, rules.Missing},
		{"one missing", headers{"X-Partner-Key": secret}, rules.Missing},
		{"empty", headers{"X-Partner-Key": "", "X-Partner": "acme"}, rules.Missing},
		{"no fields", nil, rules.Missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eval(p, c, tt.f); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := p.HeaderNames(); len(got) != 2 {
		t.Errorf("HeaderNames: got %q, want X-Partner-Key and X-Partner", got)
	}
}

// A diagnostic about a header_equals value never prints the value: it is
// often a secret, and diagnostics end up in CI logs.
func TestHeaderEqualsDiagnosticsHideTheValue(t *testing.T) {
	const secret = "pk_live_7f3a9c2e "
	_, diags := builtin.Load("test.hcl", []byte(`rule "r" {
  action = "deny"
  when { header_equals = { "X-Partner-Key" = "`+secret+`" } }
}`))
	if !diags.HasErrors() {
		t.Fatal("a value with trailing whitespace loaded")
	}
	if strings.Contains(diags.Error(), strings.TrimSpace(secret)) {
		t.Errorf("the diagnostic shows the secret: %s", diags.Error())
	}
}
