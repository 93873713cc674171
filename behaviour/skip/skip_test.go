package skip_test

import (
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// loginPerIP is exemptPolicy's sensitive rule, which its skip rules
// exempt some from.
const loginPerIP = `
rule "login-per-ip" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 2
  period    = "1h"
  sensitive = true
}
`

const exemptPolicy = loginPerIP + `
rule "api-per-ip" {
  paths  = ["/*"]
  key    = ["ip"]
  limit  = 3
  period = "1h"
}

rule "blocked-path" {
  paths  = ["/admin"]
  action = "deny"
}

# Written after the rules it skips: skipping is order-independent.
rule "office" {
  action = "skip"
  skip   = ["login-per-ip"]
  when { ip_in = ["10.0.0.0/8"] }
}

rule "ops" {
  action = "skip"
  skip   = ["*"]
  when {
    ip_in          = ["192.0.2.0/24"]
    header_present = ["X-Ops"]
  }
}
`

func outcomes(s *rules.Scratch) map[string]rules.Outcome {
	out := map[string]rules.Outcome{}
	for _, m := range s.Matches {
		out[m.Rule.Name] = m.Outcome
	}
	return out
}

func TestSkipExemptsFromTheListedRulesOnly(t *testing.T) {
	k := rulestest.NewRun(t, exemptPolicy)
	login := rulestest.Req{Method: "POST", Path: "/login", Host: "example.com", Client: "10.1.2.3"}
	for i := range 3 {
		d := k.Check(login)
		if d.Verdict != rules.Forward {
			t.Fatalf("office login %d: got verdict %v, want forward", i+1, d.Verdict)
		}
		if d.Sensitive {
			t.Errorf("office login %d: the skipped sensitive rule made the answer bare", i+1)
		}
		got := outcomes(k.S)
		if got["login-per-ip"] != rules.OutcomeExempt || got["office"] != rules.OutcomeAllow || got["api-per-ip"] != rules.OutcomeAllow {
			t.Errorf("office login %d: got outcomes %v, want login-per-ip exempt, office and api-per-ip allow", i+1, got)
		}
		for _, m := range k.S.Matches {
			if m.Rule.Name == "login-per-ip" && m.Op >= 0 {
				t.Errorf("office login %d: the skipped rule has an op", i+1)
			}
		}
	}
	// api-per-ip was not skipped: its limit of 3 holds for the office too.
	if d := k.Check(login); d.Verdict != rules.RefuseLimit || d.Refusing.Name != "api-per-ip" {
		t.Fatalf("fourth office request: got %v by %v, want refused by api-per-ip", d.Verdict, d.Refusing)
	}
	// Another address meets the login limit after 2.
	other := rulestest.Req{Method: "POST", Path: "/login", Host: "example.com", Client: "203.0.113.9"}
	k.WantVerdicts("other login", other, rules.Forward, rules.Forward, rules.RefuseLimit)
}

// A skipped rule counts nothing: once the exemption is gone (a policy
// without it, same rule names, same store), the office still has its whole
// login budget.
func TestSkippedRuleCountsNothing(t *testing.T) {
	k := rulestest.NewRun(t, exemptPolicy)
	login := rulestest.Req{Method: "POST", Path: "/login", Host: "example.com", Client: "10.1.2.3"}
	for range 2 {
		k.Check(login)
	}
	k.P = rulestest.Load(t, loginPerIP)
	k.WantVerdicts("login without the exemption", login, rules.Forward, rules.Forward, rules.RefuseLimit)
}

// skip = ["*"] passes over every rule, sensitive and deny rules included,
// but only for requests its conditions all hold for.
func TestSkipAllExemptsFromEveryRule(t *testing.T) {
	k := rulestest.NewRun(t, exemptPolicy)
	ops := rulestest.Fields{HeaderValues: map[string]string{"X-Ops": "1"}}
	for i := range 10 {
		for _, path := range []string{"/login", "/admin"} {
			d := k.Check(rulestest.Req{Method: "POST", Path: path, Host: "example.com", Client: "192.0.2.5", Fields: ops})
			if d.Verdict != rules.Forward || d.Sensitive {
				t.Fatalf("ops %s %d: got verdict %v (sensitive %v), want forward, not bare", path, i+1, d.Verdict, d.Sensitive)
			}
			if got := outcomes(k.S); got["ops"] != rules.OutcomeAllow || got["api-per-ip"] != rules.OutcomeExempt {
				t.Errorf("ops %s: got outcomes %v", path, got)
			}
			if len(k.S.Ops) != 0 {
				t.Errorf("ops %s: got %d store ops, want none", path, len(k.S.Ops))
			}
		}
	}
	// Without the header, the same address is an ordinary client.
	if d := k.Check(rulestest.Req{Method: "GET", Path: "/admin", Host: "example.com", Client: "192.0.2.5"}); d.Verdict != rules.RefuseForbidden {
		t.Errorf("no X-Ops: got verdict %v, want the deny rule's 403", d.Verdict)
	}
}

// A skip rule whose condition cannot be decided (a phone that is garbage)
// exempts nobody and rejects nothing: the rules it would skip decide.
func TestSkipOnAnUndecidableConditionExemptsNobody(t *testing.T) {
	k := rulestest.NewRun(t, `
identity { phone = ["json:phone"] }

rule "otp-per-ip" {
  paths  = ["/otp"]
  key    = ["ip"]
  limit  = 1
  period = "1h"
}

rule "domestic" {
  action = "skip"
  skip   = ["otp-per-ip"]
  when { phone_country_in = ["US"] }
}
`)
	body := func(phone string) rulestest.Fields {
		return rulestest.Fields{ContentType: "application/json", Text: `{"phone":"` + phone + `"}`}
	}
	us := rulestest.Req{Method: "POST", Path: "/otp", Host: "example.com", Client: "203.0.113.1", Fields: body("+12025550100")}
	for range 3 {
		if d := k.Check(us); d.Verdict != rules.Forward {
			t.Fatalf("US phone: got verdict %v, want forward (exempt)", d.Verdict)
		}
	}
	junk := rulestest.Req{Method: "POST", Path: "/otp", Host: "example.com", Client: "203.0.113.2", Fields: body("not a phone")}
	k.WantVerdicts("garbage phone", junk, rules.Forward, rules.RefuseLimit)
}
