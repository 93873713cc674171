package builtin_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// reviewCondOrder puts visitor_valid after a phone condition. Before issue
// 10 (ff6f3a1) visitor_valid was part of matching (Rule.matches), decided
// before any other condition: a rule whose visitor_valid does not hold does
// not apply, whatever the phone says.
const reviewCondOrder = `
visitor {}
identity { phone = ["json:phone"] }
rule "intl-cookieless" {
  methods = ["POST"]
  paths   = ["/otp"]
  key     = ["ip"]
  limit   = 5
  period  = "1h"
  when {
    phone_country_not_in = ["US"]
    visitor_valid        = false
  }
}
rule "intl-cookie" {
  methods = ["POST"]
  paths   = ["/otp2"]
  key     = ["ip"]
  limit   = 5
  period  = "1h"
  when {
    phone_country_in = ["GB"]
    visitor_valid    = true
  }
}
`

// TestReviewVisitorValidDecidedFirst: a request whose visitor_valid does not
// hold is not refused for an invalid phone by a rule that does not apply to
// it. The pre-issue-10 engine forwarded both requests below with no match
// (Forward, no match), and refused only the requests visitor_valid admits
// (RejectInvalid). Fails before 7db8a14 (conditions decided in the order
// written, an undecidable phone condition before visitor_valid).
func TestReviewVisitorValidDecidedFirst(t *testing.T) {
	p, diags := builtin.Load("review.hcl", []byte(reviewCondOrder))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := rules.NewEngine(rules.EngineOptions{Store: st, Secret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	vc := nat.ConfigOf(p)
	for _, c := range []struct {
		path    string
		valid   bool
		want    rules.Verdict
		matches int
	}{
		{"/otp", true, rules.Forward, 0}, // visitor_valid = false does not hold
		{"/otp", false, rules.RejectInvalid, 1},
		{"/otp2", false, rules.Forward, 0}, // visitor_valid = true does not hold
		{"/otp2", true, rules.RejectInvalid, 1},
	} {
		s := rules.NewScratch(len(p.Rules))
		req := rules.Request{Method: []byte("POST"), Host: []byte("example.com"), Path: []byte(c.path), Client: netip.MustParseAddr("192.0.2.1"),
			Fields: &keyFields{headers: map[string]string{}, ct: "application/json", body: `{"phone":"12"}`}}
		s.Begin(p)
		vc.SetVisitor(s, visitorID("v"), c.valid)
		d := e.Check(context.Background(), time.Unix(1e9, 0), p, &req, s)
		if d.Verdict != c.want || len(s.Matches) != c.matches {
			t.Errorf("%s, visitor valid %v: verdict %d with %d matches, want %d with %d (the pre-issue-10 engine's)", c.path, c.valid, d.Verdict, len(s.Matches), c.want, c.matches)
		}
	}
}
