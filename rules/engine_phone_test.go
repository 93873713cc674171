package rules_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/rules"
)

// Cookies joins the cookie map as a Cookie header, in name order.
func (f fields) Cookies() []byte {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(f.cookie)) {
		pairs = append(pairs, k+"="+f.cookie[k])
	}
	return []byte(strings.Join(pairs, "; "))
}

// phoneCountryPolicy builds an OTP policy from its parts, in order: an
// identity block, then the given rules.
func phoneCountryPolicy(t *testing.T, ruleBlocks ...string) *rules.Policy {
	t.Helper()
	return load(t, `
identity {
  phone        = ["json:phone", "form:phone"]
  phone_region = "US"
}
`+strings.Join(ruleBlocks, "\n"))
}

const (
	perClientRule = `
rule "per-client" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["ip"]
  limit     = 3
  period    = "1h"
  sensitive = true
}`
	perPhoneRule = `
rule "per-phone" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["phone"]
  algorithm = "sliding_log"
  limit     = 3
  period    = "15m"
  sensitive = true
}`
	allowListRule = `
rule "countries" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  action    = "deny"
  sensitive = true
  when {
    phone_country_not_in = ["US", "CA", "GB"]
  }
}`
	blockListRule = `
rule "countries" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  action    = "deny"
  sensitive = true
  when {
    phone_country_in = ["RU"]
  }
}`
	// A counting rule whose condition needs the phone: premium-rate
	// destinations get one send an hour per client.
	premiumLimitRule = `
rule "countries" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["ip"]
  limit     = 1
  period    = "1h"
  sensitive = true
  when {
    phone_country_in = ["RU"]
  }
}`
)

// garbagePhones are phone fields that are not phone numbers: the tester's
// two (a stray letter after a number no region claims, a local number
// without its area code behind some words), the README's example, a stray
// letter inside a valid US number and a star after it (phonenumbers drops
// both silently, so both used to be that US number).
var garbagePhones = []string{"+44 7700 900123x", "call me 5550199", "call me maybe", "+1 202 5a55 0100", "2025550100*"}

// TestEngineUnparsablePhoneWhateverTheCountryRule: a phone that does not
// parse is a 400 (invalid_identity = "reject", the default), charged to the
// per-client rules as an attempt, whatever country rule the policy has and
// wherever it stands, so garbage never tells an attacker anything of the
// country rule; valid numbers are decided by the country rule as before.
func TestEngineUnparsablePhoneWhateverTheCountryRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules []string
	}{
		{"allow list last", []string{perPhoneRule, perClientRule, allowListRule}},
		{"allow list first", []string{allowListRule, perClientRule, perPhoneRule}},
		{"allow list, no phone key", []string{allowListRule, perClientRule}},
		{"allow list after per-client, no phone key", []string{perClientRule, allowListRule}},
		{"block list, no phone key", []string{blockListRule, perClientRule}},
		{"block list with a phone key", []string{perClientRule, perPhoneRule, blockListRule}},
		{"counting rule with a country condition", []string{premiumLimitRule, perClientRule}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := phoneCountryPolicy(t, tt.rules...)
			e := newEngine(t, nil)
			s := rules.NewScratch(8)
			client := 0
			send := func(from, phone string) rules.Decision {
				if from == "" {
					client++
					from = fmt.Sprintf("192.0.2.%d", client)
				}
				body := fmt.Sprintf(`{"phone":%q}`, phone)
				return check(e, p, req{method: "POST", path: "/otp/send", client: from,
					f: fields{contentType: "application/json", body: body}}, s)
			}
			for _, ph := range garbagePhones {
				d := send("", ph)
				if d.Verdict != rules.RejectInvalid || d.Refusing != nil || !d.Sensitive {
					t.Errorf("%q: got verdict %d by %v (sensitive %v), want RejectInvalid by none, sensitive",
						ph, d.Verdict, ruleName(d.Refusing), d.Sensitive)
				}
				for _, m := range s.Matches {
					if m.Rule.Name == "countries" && m.Outcome != rules.OutcomeInvalid {
						t.Errorf("%q: country rule's outcome %v, want invalid_identity", ph, m.Outcome)
					}
				}
			}
			// Valid numbers: the country rule decides as before.
			if d := send("", "+1 202-555-0100"); d.Verdict != rules.Forward {
				t.Errorf("allowed US number: got verdict %d by %v, want Forward", d.Verdict, ruleName(d.Refusing))
			}
			if d := send("", "+44 20 7946 0958"); d.Verdict != rules.Forward {
				t.Errorf("allowed GB number: got verdict %d by %v, want Forward", d.Verdict, ruleName(d.Refusing))
			}
			ru := "+7 912 345-67-89"
			from := ""
			if strings.Contains(tt.name, "counting rule") {
				from = "198.51.100.1"
				if d := send(from, ru); d.Verdict != rules.Forward {
					t.Errorf("first RU send: got verdict %d by %v, want Forward", d.Verdict, ruleName(d.Refusing))
				}
			}
			if d := send(from, ru); d.Verdict != rules.RefuseLimit || d.Refusing == nil || d.Refusing.Name != "countries" {
				t.Errorf("RU number: got verdict %d by %v, want RefuseLimit by countries", d.Verdict, ruleName(d.Refusing))
			}
			if strings.Contains(tt.name, "allow list") {
				// Documented: a possible number no region claims (ZZ) is
				// refused by phone_country_not_in.
				if d := send("", "+44 7700 900123"); d.Verdict != rules.RefuseLimit || d.Refusing == nil || d.Refusing.Name != "countries" {
					t.Errorf("ZZ number: got verdict %d by %v, want RefuseLimit by countries", d.Verdict, ruleName(d.Refusing))
				}
			}
			// Garbage is charged to the per-client rule: three rejected
			// sends spend the client's three, and its next valid send is
			// refused by per-client, not forwarded.
			const garbler = "203.0.113.7"
			for i := range 3 {
				if d := send(garbler, garbagePhones[i%len(garbagePhones)]); d.Verdict != rules.RejectInvalid {
					t.Errorf("garbage #%d: got verdict %d by %v, want RejectInvalid", i+1, d.Verdict, ruleName(d.Refusing))
				}
			}
			if d := send(garbler, "+1 202-555-0177"); d.Verdict != rules.RefuseLimit || d.Refusing == nil || d.Refusing.Name != "per-client" {
				t.Errorf("after three rejected sends: got verdict %d by %v, want RefuseLimit by per-client", d.Verdict, ruleName(d.Refusing))
			}
		})
	}
}

// TestEngineUnparsablePhoneSkip: invalid_identity = "skip" on a country
// rule means the rule does not apply to a phone that does not parse.
func TestEngineUnparsablePhoneSkip(t *testing.T) {
	t.Parallel()
	p := phoneCountryPolicy(t, strings.Replace(allowListRule, `action    = "deny"`, `action    = "deny"
  invalid_identity = "skip"`, 1), perClientRule)
	e := newEngine(t, nil)
	s := rules.NewScratch(4)
	d := check(e, p, req{method: "POST", path: "/otp/send", client: "192.0.2.1",
		f: fields{contentType: "application/json", body: `{"phone":"call me maybe"}`}}, s)
	if d.Verdict != rules.Forward {
		t.Errorf("got verdict %d by %v, want Forward (the country rule skips)", d.Verdict, ruleName(d.Refusing))
	}
	for _, m := range s.Matches {
		if m.Rule.Name == "countries" {
			t.Errorf("skipped country rule matched with outcome %v", m.Outcome)
		}
	}
}

// ruleName is r's name, or "none".
func ruleName(r *rules.Rule) string {
	if r == nil {
		return "none"
	}
	return r.Name
}
