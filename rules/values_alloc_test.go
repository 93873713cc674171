//go:build !race

package rules_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// conflictLoginPolicy is BenchmarkLoginDecision's policy with an account
// read from a username and an email, as the shipped policy's is.
var conflictLoginPolicy = strings.Replace(loginDecisionPolicy,
	`account = ["json:username", "form:username"]`, `account = ["json:username", "form:username", "json:email", "form:email"]`, 1)

// TestSeveralValuesAllocateNothingMore: a login whose username and email
// differ, decided and settled once the Scratch is warm (its matches and
// ops for both values, the accounts' memo), allocates no more than one
// naming a single account but for the second body field's read (the one
// allocation fields.BodyField makes a field found, its string).
func TestSeveralValuesAllocateNothingMore(t *testing.T) {
	p := rulestest.Load(t, conflictLoginPolicy)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(len(p.Rules))
	ctx := context.Background()
	allocs := func(body string, matches int) float64 {
		t.Helper()
		rq := &rules.Request{Method: []byte("POST"), Path: []byte("/login"), Client: netip.MustParseAddr("203.0.113.7"),
			Fields: &benchFields{ct: []byte("application/json"), body: []byte(body)}}
		run := func() {
			if d := e.Check(ctx, rulestest.T0, p, rq, s); d.Settle {
				_, _ = e.Settle(ctx, rulestest.T0, s, 200, nil)
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

// BenchmarkLoginDecisionTwoValues is BenchmarkLoginDecision for a login
// whose username and email differ: the two rules keyed on the account
// count both values (five ops instead of three).
func BenchmarkLoginDecisionTwoValues(b *testing.B) {
	p, diags := builtin.Load("login.hcl", []byte(conflictLoginPolicy))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	benchLoginDecision(b, p, `{"username":"mallory","email":"Alice@Example.com","password":"hunter2"}`)
}
