package node_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// diagSummaries lists a load's diagnostics as "error: Summary" and
// "warning: Summary".
func diagSummaries(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		out = append(out, sev+": "+d.Summary)
	}
	return out
}

// TestDecideListenRuleChecks: under decide_listen an enforcing rule that
// reads the body is an error, one that only logs or is in dry-run a
// warning, a rule needing the origin's answer a warning, and the same
// rules without decide_listen nothing.
func TestDecideListenRuleChecks(t *testing.T) {
	const identity = `
identity {
  account = ["json:username", "form:username"]
  phone   = ["header:X-Phone", "json:phone"]
}
`
	for _, c := range []struct {
		rule string
		want []string // with decide_listen
	}{
		{`key = ["ip"]`, nil},
		{`key = ["header:X-Api-Key"]`, nil},
		{`key = ["cookie:session", "query:user"]`, nil},
		{`key = ["json:username"]`, []string{"error: Rule reads the body under decide_listen"}},
		{`key = ["form:username"]`, []string{"error: Rule reads the body under decide_listen"}},
		{`key = ["account"]`, []string{"error: Rule reads the body under decide_listen"}},
		{`key = ["phone"]`, []string{"error: Rule reads the body under decide_listen"}}, // a header source first, the body next
		{`key = ["ip"]` + "\n" + `count_distinct = "account"`, []string{"error: Rule reads the body under decide_listen"}},
		{`action = "deny"` + "\n" + `when { header_equals = { "X-Mode" = "x" } }`, nil},
		{`key = ["account"]` + "\n" + `action = "log"`, []string{"warning: Rule reads the body under decide_listen"}},
		{`key = ["account"]` + "\n" + `dry_run = true`, []string{"warning: Rule reads the body under decide_listen"}},
		{`key = ["ip"]` + "\n" + `count = "failures"`, []string{"warning: Rule needs the origin's answer under decide_listen"}},
		{`key = ["ip"]` + "\n" + `reset_on_success = true`, []string{"warning: Rule needs the origin's answer under decide_listen"}},
	} {
		limit := "limit = 5\n  period = \"1m\"\n  "
		if strings.Contains(c.rule, `"deny"`) {
			limit = ""
		}
		rule := "rule \"r\" {\n  paths = [\"/login\"]\n  " + limit + c.rule + "\n}\n"
		for _, decide := range []bool{true, false} {
			edge := "edge {\n  trusted_proxies = [\"127.0.0.1/32\"]\n}\n"
			if decide {
				edge = "edge {\n  trusted_proxies = [\"127.0.0.1/32\"]\n  decide_listen = \"127.0.0.1:8081\"\n}\n"
			}
			_, diags := builtin.Load("d.hcl", []byte(edge+identity+rule))
			var got []string
			for _, s := range diagSummaries(diags) {
				if strings.Contains(s, "decide_listen") {
					got = append(got, s)
				}
			}
			want := c.want
			if !decide {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (decide_listen %v): %q, want %q\n%s", c.rule, decide, got, want, diags.Error())
			}
			if !decide && diags.HasErrors() {
				t.Errorf("%s without decide_listen: %s", c.rule, diags.Error())
			}
		}
	}
}

// TestDecideListenKnownBlock: a known block records its callers after the
// origin's success, which the decision-only listener never sees: a
// warning under decide_listen, nothing without.
func TestDecideListenKnownBlock(t *testing.T) {
	const body = `
known "seen" {
  by  = ["ip"]
  for = "1d"
}
rule "r" {
  key          = ["ip"]
  limit        = 5
  period       = "1m"
  exempt_known = ["seen"]
}
`
	for _, decide := range []bool{true, false} {
		edge := "edge {\n  trusted_proxies = [\"127.0.0.1/32\"]\n}\n"
		var want []string
		if decide {
			edge = "edge {\n  trusted_proxies = [\"127.0.0.1/32\"]\n  decide_listen = \"127.0.0.1:8081\"\n}\n"
			want = []string{"warning: Known block needs the origin's answer under decide_listen"}
		}
		_, diags := builtin.Load("d.hcl", []byte(edge+body))
		if got := diagSummaries(diags); !slices.Equal(got, want) {
			t.Errorf("decide_listen %v: %q, want %q", decide, got, want)
		}
	}
}

// TestShippedPolicyUnderDecideListen: the shipped policy's rules that read
// the body are exactly those refused under decide_listen; the others
// (ip, visitor, header keys) are not.
func TestShippedPolicyUnderDecideListen(t *testing.T) {
	path := filepath.Join("..", "policies.hcl")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	plain, diags := builtin.Load(path, src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var body []string
	for _, r := range plain.Rules {
		if node.ReadsBody(plain, r) {
			body = append(body, r.Name)
		}
	}
	for _, name := range []string{"otp-send-per-phone", "login-failures-account", "login-accounts-per-ip", "otp-verify-per-session", "signup-per-email"} {
		if !slices.Contains(body, name) {
			t.Errorf("ReadsBody(%s) = false", name)
		}
	}
	for _, name := range []string{"login-per-visitor", "login-per-network", "api-per-key", "api-per-ip", "otp-send-per-client"} {
		if slices.Contains(body, name) {
			t.Errorf("ReadsBody(%s) = true", name)
		}
	}
	decide := strings.Replace(string(src), "edge {", "edge {\n  decide_listen = \"127.0.0.1:8081\"", 1)
	_, diags = builtin.Load(path, []byte(decide))
	var refused []string
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			if d.Summary != "Rule reads the body under decide_listen" && d.Summary != "Concurrency rule under decide_listen" {
				t.Errorf("unexpected error %s", d.Error())
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(d.Detail, "rule \""), "\"")
			refused = append(refused, name)
		}
	}
	for _, r := range plain.Rules {
		enforcing := (r.Action == rules.ActionLimit || r.Action == rules.ActionDeny) && !r.DryRun
		// An enforcing rule that reads the body, or holds slots in flight
		// until the origin answers (a concurrency limit, not an adaptive
		// one: that is node-local and only warned of), cannot be decided.
		inFlight := r.InFlight() && r.LocalLimit() == nil
		if want := enforcing && (slices.Contains(body, r.Name) || inFlight); slices.Contains(refused, r.Name) != want {
			t.Errorf("rule %s: refused %v, want %v", r.Name, !want, want)
		}
	}
}
