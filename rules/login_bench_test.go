package rules_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// benchFields is a rules.Fields that allocates nothing: a body, no query,
// no cookies, no headers.
type benchFields struct{ ct, body []byte }

func (f *benchFields) Header([]byte) []byte   { return nil }
func (f *benchFields) Cookie([]byte) []byte   { return nil }
func (f *benchFields) Query([]byte) []byte    { return nil }
func (f *benchFields) RawQuery() []byte       { return nil }
func (f *benchFields) Body() ([]byte, []byte) { return f.ct, f.body }
func (f *benchFields) Cookies() []byte        { return nil }

// BenchmarkLoginDecision is one login request's decision and its settle
// step on a login.hcl-like policy: the account read from a JSON body and
// normalised, a failures rule per account and client (charged before,
// refunded after the origin's 200), a count_distinct rule per IP, on the
// memory store. "check" is the decision alone; "check+settle" adds the
// second store call count = "failures" makes once the origin answered.
func BenchmarkLoginDecision(b *testing.B) {
	p, diags := builtin.Load("login.hcl", []byte(loginDecisionPolicy))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	benchLoginDecision(b, p, `{"username":"Alice@Example.com","password":"hunter2"}`)
}

// loginDecisionPolicy is BenchmarkLoginDecision's policy.
const loginDecisionPolicy = `
identity {
  account = ["json:username", "form:username"]
}
rule "login-per-client" {
  methods = ["POST"]
  paths   = ["/login"]
  key     = ["ip"]
  limit   = 1000000
  period  = "1s"
}
rule "login-failures-account-client" {
  methods          = ["POST"]
  paths            = ["/login"]
  key              = ["account", "ip"]
  count            = "failures"
  reset_on_success = true
  algorithm        = "sliding_window"
  limit            = 5
  period           = "15m"
}
rule "login-accounts-per-ip" {
  methods        = ["POST"]
  paths          = ["/login"]
  key            = ["ip"]
  count          = "failures"
  count_distinct = "account"
  limit          = 10
  period         = "1h"
}
`

// benchLoginDecision runs BenchmarkLoginDecision's sub-benchmarks on p,
// for a login whose JSON body is body.
func benchLoginDecision(b *testing.B, p *rules.Policy, body string) {
	for _, settle := range []bool{false, true} {
		name := "check"
		if settle {
			name = "check+settle"
		}
		b.Run(name, func(b *testing.B) {
			ms, err := memstore.New(memstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer ms.Close()
			e, err := rules.NewEngine(rules.EngineOptions{Store: ms, Secret: []byte("bench secret")})
			if err != nil {
				b.Fatal(err)
			}
			s := rules.NewScratch(len(p.Rules))
			rq := &rules.Request{Method: []byte("POST"), Path: []byte("/login"), Client: netip.MustParseAddr("203.0.113.7"),
				Fields: &benchFields{ct: []byte("application/json"), body: []byte(body)}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				d := e.Check(ctx, rulestest.T0, p, rq, s)
				if settle && d.Settle {
					if _, err := e.Settle(ctx, rulestest.T0, s, 200, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
