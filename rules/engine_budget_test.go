package rules_test

import (
	"context"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// opsStore records the ops of its last call and allows them all.
type opsStore struct{ ops []rules.Op }

func (s *opsStore) Take(_ context.Context, _ time.Time, ops []rules.Op, res []rules.Result) error {
	s.ops = append(s.ops[:0], ops...)
	for i := range res {
		res[i] = rules.Result{Allowed: true}
	}
	return nil
}

func (*opsStore) Close() error { return nil }

// TestEngineOpsCarryTheirRulesKeyBudget: every op of a rule, its IP
// ceiling's included, carries the rule's key budget and sensitivity, and
// the mint budget's op its own budget, so that the memory store bounds
// each rule apart (docs/memory-store.md).
func TestEngineOpsCarryTheirRulesKeyBudget(t *testing.T) {
	p := rulestest.Load(t, `
store "memory" {
  max_keys = 90
}
visitor {
  mint_limit = 10
}
rule "login" {
  paths     = ["/login"]
  key       = ["visitor"]
  limit     = 5
  period    = "1m"
  sensitive = true
  max_keys  = 1000
}
rule "api" {
  paths  = ["/login"]
  key    = ["ip"]
  limit  = 5
  period = "1m"
}
`)
	st := &opsStore{}
	e := rulestest.NewEngine(t, st)
	// A Scratch sized for the 2 rules gets 6 ops: its results grow too
	// (Check indexed past their capacity before).
	check(e, p, req{Method: "POST", Path: "/login", Client: "192.0.2.1"}, rules.NewScratch(len(p.Rules)))
	login, api := p.Rule("login"), p.Rule("api")
	want := []struct {
		id        [8]byte
		maxKeys   int32
		sensitive bool
	}{
		{login.ID, 1000, true},         // the visitor's bucket
		{login.ID, 1000, true},         // its IP's ceiling
		{api.ID, 45, false},            // half the store's 90
		{p.Budgets()[0].ID, 45, false}, // the other half: the visitor mint budget,
		{p.Budgets()[1].ID, 45, false}, // its fingerprint's, a budget as large (nat/mint.go)
		{p.Budgets()[0].ID, 45, false}, // and its reserve, in the mint budget
	}
	if len(st.ops) != len(want) {
		t.Fatalf("got %d ops, want %d", len(st.ops), len(want))
	}
	for i, w := range want {
		op := st.ops[i]
		if [8]byte(op.Key[:8]) != w.id || op.MaxKeys != w.maxKeys || op.Sensitive != w.sensitive {
			t.Errorf("op %d: got rule ID %x, max keys %d, sensitive %v; want %x, %d, %v", i, op.Key[:8], op.MaxKeys, op.Sensitive, w.id, w.maxKeys, w.sensitive)
		}
	}
}
