package refusal_test

import (
	"strings"
	"testing"

	"github.com/edge-gateway/edge/behaviour/refusal"
	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/golden"
)

// refusalPolicy is one ordinary limit rule with attrs on lines 7 on, each
// indented two columns (column 3).
func refusalPolicy(sensitive bool, attrs ...string) []byte {
	s := "\nrule \"api\" {\n  paths  = [\"/api/*\"]\n  key    = [\"ip\"]\n  limit  = 10\n  period = \"1m\"\n"
	for _, a := range attrs {
		s += "  " + a + "\n"
	}
	if sensitive {
		s += "  sensitive = true\n"
	}
	return []byte(s + "}\n")
}

func TestRefusalAttrsCompile(t *testing.T) {
	p, diags := builtin.Load("p.hcl", refusalPolicy(false,
		`retry_after_jitter   = "12.5%"`,
		`refusal_status       = 503`,
		`refusal_content_type = "text/html; charset=utf-8"`,
		`refusal_body         = "<p>Busy</p>\n"`,
	))
	if diags.HasErrors() {
		t.Fatal(golden.Lines(diags))
	}
	rf := refusal.Of(p.Rules[0])
	if rf == nil || rf.Jitter != 0.125 || rf.Status != 503 || string(rf.Body) != "<p>Busy</p>\n" || rf.ContentType != "text/html; charset=utf-8" {
		t.Fatalf("refusal = %+v", rf)
	}
	p, diags = builtin.Load("p.hcl", refusalPolicy(false, `refusal_body = "slow down"`))
	if diags.HasErrors() {
		t.Fatal(golden.Lines(diags))
	}
	if rf := refusal.Of(p.Rules[0]); rf == nil || rf.ContentType != "text/plain; charset=utf-8" || rf.Status != 0 || rf.Jitter != 0 {
		t.Fatalf("defaults: refusal = %+v", rf)
	}
	p, diags = builtin.Load("p.hcl", refusalPolicy(false))
	if rf := refusal.Of(p.Rules[0]); diags.HasErrors() || rf != nil && (rf.Body != nil || rf.Status != 0) {
		t.Fatalf("no attributes: %+v %s", rf, golden.Lines(diags))
	}
}

// Every bad value is an error at its file:line,column: the value's for a
// bad value, the attribute's name for one that does not apply.
func TestRefusalAttrsErrors(t *testing.T) {
	long := strings.Repeat("x", 4097)
	for _, tc := range []struct {
		sensitive bool
		attrs     []string
		want      string // the diagnostic's start, then a substring of it
		detail    string
	}{
		{false, []string{`retry_after_jitter = "20"`}, "p.hcl:7,24-28: Invalid retry_after_jitter", "percentage from 0% to 100%"},
		{false, []string{`retry_after_jitter = "101%"`}, "p.hcl:7,24-30: Invalid retry_after_jitter", "percentage"},
		{false, []string{`retry_after_jitter = "-1%"`}, "p.hcl:7,24-29: Invalid retry_after_jitter", "percentage"},
		{false, []string{`retry_after_jitter = 20`}, "p.hcl:7,24-26: Invalid retry_after_jitter", "must be a string"},
		{false, []string{`refusal_status = 200`}, "p.hcl:7,20-23: Invalid refusal_status", "400 to 599"},
		{false, []string{`refusal_status = 302`}, "p.hcl:7,20-23: Invalid refusal_status", "400 to 599"},
		{false, []string{`refusal_status = 600`}, "p.hcl:7,20-23: Invalid refusal_status", "400 to 599"},
		{false, []string{`refusal_status = 429.5`}, "p.hcl:7,20-25: Invalid refusal_status", "400 to 599"},
		{false, []string{`refusal_status = 401`}, "p.hcl:7,20-23: Invalid refusal_status", "WWW-Authenticate"},
		{false, []string{`refusal_status = 408`}, "p.hcl:7,20-23: Invalid refusal_status", "would break clients"},
		{false, []string{`refusal_status = "503"`}, "p.hcl:7,20-25: Invalid refusal_status", "must be a number"},
		{false, []string{`refusal_body = ""`}, "p.hcl:7,18-20: Invalid refusal_body", "1 to 4096"},
		{false, []string{`refusal_body = "` + long + `"`}, "p.hcl:7,18-4117: Invalid refusal_body", "holds 4097 bytes"},
		{false, []string{`refusal_content_type = "not a type"`}, "p.hcl:7,26-38: Invalid refusal_content_type", "not a media type"},
		{false, []string{`refusal_content_type = "text/html"`}, "p.hcl:7,3-23: refusal_content_type without refusal_body", "no refusal_body"},
		{true, []string{`retry_after_jitter = "20%"`}, "p.hcl:7,3-21: Invalid retry_after_jitter", "is sensitive"},
		{true, []string{`refusal_status = 503`}, "p.hcl:7,3-17: Invalid refusal_status", "always the bare 429"},
		{true, []string{`refusal_body = "no"`}, "p.hcl:7,3-15: Invalid refusal_body", "is sensitive"},
		{true, []string{`refusal_content_type = "text/html"`}, "p.hcl:7,3-23: Invalid refusal_content_type", "is sensitive"},
		{false, []string{`action = "log"`, `refusal_status = 503`}, "p.hcl:8,3-17: Invalid refusal_status", `action is not "limit"`},
	} {
		_, diags := builtin.Load("p.hcl", refusalPolicy(tc.sensitive, tc.attrs...))
		got := golden.Lines(diags)
		if !diags.HasErrors() || !strings.HasPrefix(got, tc.want) || !strings.Contains(got, tc.detail) {
			t.Errorf("%v sensitive=%v: want an error %q … %q, got:\n%s", tc.attrs, tc.sensitive, tc.want, tc.detail, got)
		}
	}
}
