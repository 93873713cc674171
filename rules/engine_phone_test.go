package rules_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// phoneCountryPolicy builds an OTP policy from its parts, in order: an
// identity block, then the given rules.
func phoneCountryPolicy(t *testing.T, ruleBlocks ...string) *rules.Policy {
	t.Helper()
	return rulestest.Load(t, `
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
			e := rulestest.NewEngine(t, nil)
			s := rules.NewScratch(8)
			client := 0
			send := func(from, phone string) rules.Decision {
				if from == "" {
					client++
					from = fmt.Sprintf("192.0.2.%d", client)
				}
				body := fmt.Sprintf(`{"phone":%q}`, phone)
				return check(e, p, req{Method: "POST", Path: "/otp/send", Client: from,
					Fields: fields{ContentType: "application/json", Text: body}}, s)
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
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	d := check(e, p, req{Method: "POST", Path: "/otp/send", Client: "192.0.2.1",
		Fields: fields{ContentType: "application/json", Text: `{"phone":"call me maybe"}`}}, s)
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

// TestEngineBodyIdentityMergedWithQueryAndCookies: origins that merge the
// query string (and PHP's $_REQUEST cookies) into the body's fields read
// a body identity from there too, so a body field's name elsewhere must
// agree with the body (docs/body-identities.md §6), and a name only in
// the query is read only when the identity lists that query source.
func TestEngineBodyIdentityMergedWithQueryAndCookies(t *testing.T) {
	t.Parallel()
	const (
		a    = "%2B12025550100" // +12025550100, as a query writes it
		b    = "%2B12025550177"
		jA   = `{"phone":"+12025550100"}`
		json = "application/json"
		form = "application/x-www-form-urlencoded"
	)
	perPhone := func(extra string) string {
		return `
rule "per-phone" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["phone"]
  limit     = 100
  period    = "1h"
  ` + extra + `
}`
	}
	identity := func(sources string) string {
		return `
identity {
  phone        = [` + sources + `]
  phone_region = "US"
}`
	}
	bodyOnly := identity(`"json:phone", "form:phone"`) + perPhone("sensitive = true")
	skipping := identity(`"json:phone", "form:phone"`) + perPhone(`missing_identity = "skip"`)
	queryLast := identity(`"json:phone", "form:phone", "query:phone"`) + perPhone("sensitive = true")
	queryFirst := identity(`"query:phone", "json:phone"`) + perPhone("sensitive = true")
	nested := identity(`"json:user.phone"`) + perPhone("sensitive = true")
	jsonKey := `
rule "per-phone" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["json:phone"]
  limit     = 100
  period    = "1h"
  sensitive = true
}`
	q := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name   string
		policy string
		f      fields
		want   rules.Verdict
	}{
		{"json, no query", bodyOnly, fields{ContentType: json, Text: jA}, rules.Forward},
		{"json, query agrees", bodyOnly, fields{ContentType: json, Text: jA, QueryValues: q("phone", a)}, rules.Forward},
		{"json, query differs", bodyOnly, fields{ContentType: json, Text: jA, QueryValues: q("phone", b)}, rules.RejectInvalid},
		{"json, query in PHP's spelling", bodyOnly, fields{ContentType: json, Text: jA, QueryValues: q("+phone", b)}, rules.RejectInvalid},
		{"json, query in Rack's spelling", bodyOnly, fields{ContentType: json, Text: jA, QueryValues: q("[phone]", b)}, rules.RejectInvalid},
		{"json, query array", bodyOnly, fields{ContentType: json, Text: jA, QueryValues: q("phone[]", a)}, rules.RejectInvalid},
		{"json, query bad escape", bodyOnly, fields{ContentType: json, Text: jA, QueryValues: q("phone", "%2B1202555010%")}, rules.RejectInvalid},
		{"json, other query", bodyOnly, fields{ContentType: json, Text: jA, QueryValues: q("phones", b, "xphone", b)}, rules.Forward},
		{"json lacks it, query has it", bodyOnly, fields{ContentType: json, Text: `{}`, QueryValues: q("phone", a)}, rules.RejectInvalid},
		{"no body, query has it", bodyOnly, fields{QueryValues: q("phone", a)}, rules.RejectInvalid},
		{"no body, query has it, skipping rule", skipping, fields{QueryValues: q("phone", a)}, rules.RejectInvalid},
		{"no body, no query, skipping rule", skipping, fields{}, rules.Forward},
		{"form, query differs", bodyOnly, fields{ContentType: form, Text: "phone=" + a, QueryValues: q("phone", b)}, rules.RejectInvalid},
		{"form, query agrees", bodyOnly, fields{ContentType: form, Text: "phone=" + a, QueryValues: q("phone", a)}, rules.Forward},
		{"json, cookie differs", bodyOnly, fields{ContentType: json, Text: jA, CookieValues: q("phone", b)}, rules.RejectInvalid},
		{"json, cookie agrees", bodyOnly, fields{ContentType: json, Text: jA, CookieValues: q("phone", a)}, rules.Forward},
		{"json, cookie plus is a plus", bodyOnly, fields{ContentType: json, Text: jA, CookieValues: q("phone", "+12025550100")}, rules.Forward},
		{"json, cookie in PHP's spelling", bodyOnly, fields{ContentType: json, Text: jA, CookieValues: q(" phone", b)}, rules.RejectInvalid},
		{"json, cookie array", bodyOnly, fields{ContentType: json, Text: jA, CookieValues: q("phone[x]", a)}, rules.RejectInvalid},
		{"json, other cookie", bodyOnly, fields{ContentType: json, Text: jA, CookieValues: q("phone.", b, "phones", b)}, rules.Forward},
		{"no body, cookie only", bodyOnly, fields{CookieValues: q("phone", a)}, rules.RejectInvalid},

		// A query: source after the body's reads the query when the body
		// lacks the field; the body must agree when it has it.
		{"query source: no body", queryLast, fields{QueryValues: q("phone", a)}, rules.Forward},
		{"query source: json lacks it", queryLast, fields{ContentType: json, Text: `{}`, QueryValues: q("phone", a)}, rules.Forward},
		{"query source: json differs", queryLast, fields{ContentType: json, Text: jA, QueryValues: q("phone", b)}, rules.RejectInvalid},
		{"query source: cookie differs from the query", queryLast, fields{QueryValues: q("phone", a), CookieValues: q("phone", b)}, rules.RejectInvalid},
		{"query source first: json differs", queryFirst, fields{ContentType: json, Text: `{"phone":"+12025550177"}`, QueryValues: q("phone", a)}, rules.RejectInvalid},
		{"query source first: json agrees", queryFirst, fields{ContentType: json, Text: jA, QueryValues: q("phone", a)}, rules.Forward},
		{"query source first: multipart body", queryFirst, fields{ContentType: "multipart/form-data; boundary=x", Text: "--x--", QueryValues: q("phone", a)}, rules.RejectInvalid},

		// json:user.phone is user[phone] in a query.
		{"nested: query agrees", nested, fields{ContentType: json, Text: `{"user":{"phone":"+12025550100"}}`, QueryValues: q("user[phone]", a)}, rules.Forward},
		{"nested: query differs", nested, fields{ContentType: json, Text: `{"user":{"phone":"+12025550100"}}`, QueryValues: q("user[phone]", b)}, rules.RejectInvalid},
		{"nested: query names the parent", nested, fields{ContentType: json, Text: `{"user":{"phone":"+12025550100"}}`, QueryValues: q("user", b)}, rules.RejectInvalid},
		{"nested: query names a sibling", nested, fields{ContentType: json, Text: `{"user":{"phone":"+12025550100"}}`, QueryValues: q("user[name]", b)}, rules.Forward},
		{"nested: Rack spelling", nested, fields{ContentType: json, Text: `{"user":{"phone":"+12025550100"}}`, QueryValues: q("user]phone", b)}, rules.RejectInvalid},
		{"nested: flat name is another field", nested, fields{ContentType: json, Text: `{"user":{"phone":"+12025550100"}}`, QueryValues: q("phone", b)}, rules.Forward},

		// A key naming the body field itself is held to the same.
		{"json key: query differs", jsonKey, fields{ContentType: json, Text: jA, QueryValues: q("phone", b)}, rules.RejectInvalid},
		{"json key: query agrees", jsonKey, fields{ContentType: json, Text: `{"phone":"x"}`, QueryValues: q("phone", "x")}, rules.Forward},

		// Other seams of the body itself.
		{"content encoding", bodyOnly, fields{ContentType: json, Text: jA, HeaderValues: q("Content-Encoding", "gzip")}, rules.RejectInvalid},
		{"multipart, skipping rule", skipping, fields{ContentType: "multipart/form-data; boundary=x", Text: "--x--"}, rules.RejectInvalid},
		{"no type, skipping rule", skipping, fields{Text: jA}, rules.RejectInvalid},
		{"bypass 1 type, skipping rule", skipping, fields{ContentType: "application/x-www-form-urlencoded,x", Text: jA}, rules.RejectInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := rulestest.Load(t, tt.policy)
			e := rulestest.NewEngine(t, nil)
			s := rules.NewScratch(4)
			d := check(e, p, req{Method: "POST", Path: "/otp/send", Client: "192.0.2.1", Fields: tt.f}, s)
			if d.Verdict != tt.want {
				t.Errorf("got verdict %d by %v, want %d", d.Verdict, ruleName(d.Refusing), tt.want)
			}
		})
	}
}

// TestEngineQuerySourceCountsTheQuery: with query:phone after the body
// sources, a phone only in the query is counted under its own number: the
// same bucket as the body's spelling of it.
func TestEngineQuerySourceCountsTheQuery(t *testing.T) {
	t.Parallel()
	p := rulestest.Load(t, `
identity {
  phone        = ["json:phone", "query:phone"]
  phone_region = "US"
}
rule "per-phone" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["phone"]
  algorithm = "sliding_log"
  limit     = 2
  period    = "1h"
  sensitive = true
}`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	send := func(f fields) rules.Verdict {
		return check(e, p, req{Method: "POST", Path: "/otp/send", Client: "192.0.2.1", Fields: f}, s).Verdict
	}
	if v := send(fields{QueryValues: map[string]string{"phone": "%2B1+202+555+0100"}}); v != rules.Forward {
		t.Fatalf("query: got %d, want Forward", v)
	}
	if v := send(fields{ContentType: "application/json", Text: `{"phone":"(202) 555-0100"}`}); v != rules.Forward {
		t.Fatalf("json: got %d, want Forward", v)
	}
	if v := send(fields{ContentType: "application/json", Text: `{}`, QueryValues: map[string]string{"phone": "2025550100"}}); v != rules.RefuseLimit {
		t.Fatalf("third send, query: got %d, want RefuseLimit (one phone, one bucket)", v)
	}
}
