//go:build !race

package rules_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// conflictLoginPolicy is BenchmarkLoginDecision's policy with an account
// read from a username and an email, as the shipped policy's is.
const conflictLoginPolicy = `
identity {
  account = ["json:username", "form:username", "json:email", "form:email"]
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

// TestSeveralValuesAllocateNothingMore: a login whose username and email
// differ, decided and settled once the Scratch is warm (its matches and
// ops for both values, the accounts' memo), allocates no more than one
// naming a single account but for the second body field's read (the one
// allocation fields.BodyField makes a field found, its string).
func TestSeveralValuesAllocateNothingMore(t *testing.T) {
	p := load(t, conflictLoginPolicy)
	e := newEngine(t, nil)
	s := rules.NewScratch(len(p.Rules))
	ctx := context.Background()
	allocs := func(body string, matches int) float64 {
		t.Helper()
		rq := &rules.Request{Method: []byte("POST"), Path: []byte("/login"), Client: netip.MustParseAddr("203.0.113.7"),
			Fields: &benchFields{ct: []byte("application/json"), body: []byte(body)}}
		run := func() {
			if d := e.Check(ctx, t0, p, rq, s); d.Settle {
				_, _ = e.Settle(ctx, t0, s, 200, nil)
			}
		}
		run() // size the Scratch
		if n := len(s.Matches); n != matches {
			t.Fatalf("%s: %d matches, want %d", body, n, matches)
		}
		return testing.AllocsPerRun(100, run)
	}
	one := allocs(`{"username":"Alice@Example.com","password":"x"}`, 3)
	two := allocs(`{"username":"mallory","email":"Alice@Example.com","password":"x"}`, 5) // two rules of two values each
	if two > one+1 {
		t.Errorf("two values: %v allocations per decision and settle, one: %v; want at most one more", two, one)
	}
}

// BenchmarkLoginDecisionTwoValues is BenchmarkLoginDecision's
// check+settle for a login whose username and email differ: the two rules
// keyed on the account count both values (five ops instead of three).
func BenchmarkLoginDecisionTwoValues(b *testing.B) {
	p, diags := builtin.Load("login.hcl", []byte(conflictLoginPolicy))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
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
		Fields: &benchFields{ct: []byte("application/json"), body: []byte(`{"username":"mallory","email":"Alice@Example.com","password":"hunter2"}`)}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d := e.Check(ctx, t0, p, rq, s); d.Settle {
			if _, err := e.Settle(ctx, t0, s, 200, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}
