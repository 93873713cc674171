package rules_test

import (
	"fmt"
	"testing"

	"github.com/edge-gateway/edge/builtin"
)

// TestKeyBudgets checks each rule's key budget in the memory store
// (Rule.MaxKeys, docs/memory-store.md): its own max_keys, or an equal
// share, rounded up, of the store's among the counting rules that set none
// and the visitor mint budget.
func TestKeyBudgets(t *testing.T) {
	t.Parallel()
	rule := func(name, extra string) string {
		return fmt.Sprintf("rule %q {\n  key = [\"ip\"]\n  limit = 5\n  period = \"1m\"\n  %s\n}\n", name, extra)
	}
	visitor := "visitor {\n  mint_limit = 10\n}\n"
	tests := []struct {
		name     string
		src      string
		want     map[string]int
		wantMint int
	}{
		{"one rule takes the store's", rule("a", ""), map[string]int{"a": 100000}, 0},
		{"shared evenly, rounded up", "store \"memory\" {\n  max_keys = 10\n}\n" + rule("a", "") + rule("b", "") + rule("c", ""),
			map[string]int{"a": 4, "b": 4, "c": 4}, 0},
		{"a rule's own comes on top", "store \"memory\" {\n  max_keys = 10\n}\n" + rule("a", "max_keys = 7") + rule("b", "") + rule("c", ""),
			map[string]int{"a": 7, "b": 5, "c": 5}, 0},
		{"the mint budget takes a share", visitor + rule("a", "") + rule("b", "max_keys = 1"),
			map[string]int{"a": 50000, "b": 1}, 50000},
		{"a deny rule holds no keys", rule("a", "") + "rule \"d\" {\n  action = \"deny\"\n}\n",
			map[string]int{"a": 100000, "d": 0}, 0},
		{"at least one each", "store \"memory\" {\n  max_keys = 1\n}\n" + rule("a", "") + rule("b", ""),
			map[string]int{"a": 1, "b": 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, diags := builtin.Load("test.hcl", []byte(tt.src))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			for name, want := range tt.want {
				if got := p.Rule(name).MaxKeys; got != want {
					t.Errorf("rule %s: got max keys %d, want %d", name, got, want)
				}
			}
			gotMint := 0
			for _, b := range p.Budgets() {
				gotMint = b.MaxKeys
			}
			if gotMint != tt.wantMint {
				t.Errorf("mint budget: got %d, want %d", gotMint, tt.wantMint)
			}
		})
	}
}
