package counter

import (
	"regexp"
	"slices"
	"testing"
)

// TestTable checks each entry of the table against what its readers rely
// on: names and Lua names unique, a policy name parsed back to its id, the
// fast path only for algorithms of the string key alone, and Periods set.
func TestTable(t *testing.T) {
	t.Parallel()
	if got := len(Algorithms()); got != int(NumAlgorithms) {
		t.Fatalf("Algorithms() has %d, want NumAlgorithms = %d", got, NumAlgorithms)
	}
	lua := regexp.MustCompile(`^[A-Z][A-Z_]*$`)
	names, luas := map[string]bool{}, map[string]bool{}
	var policy []string
	for _, a := range Algorithms() {
		s := a.Spec()
		switch {
		case s.Name == "" || names[s.Name]:
			t.Errorf("algorithm %d: name %q empty or taken", a, s.Name)
		case !lua.MatchString(s.Lua) || luas[s.Lua]:
			t.Errorf("%s: Lua name %q not an upper-case identifier, or taken", s.Name, s.Lua)
		case s.Periods < 1:
			t.Errorf("%s: Periods %d, want at least 1", s.Name, s.Periods)
		case s.FastPath && (s.Set || s.Members):
			t.Errorf("%s: take.lua's fast path reads the string key alone: no sorted set, no member", s.Name)
		case s.Members && !s.Set:
			t.Errorf("%s: counts members but keeps no set", s.Name)
		}
		names[s.Name], luas[s.Lua] = true, true
		if a.String() != s.Name {
			t.Errorf("algorithm %d: String() %q, want %q", a, a.String(), s.Name)
		}
		got, ok := Parse(s.Name)
		if ok != s.Policy || (ok && got != a) {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", s.Name, got, ok, a, s.Policy)
		}
		if s.Policy {
			policy = append(policy, s.Name)
		}
	}
	if got := PolicyNames(); !slices.Equal(got, policy) {
		t.Errorf("PolicyNames() = %q, want %q", got, policy)
	}
	if s := NumAlgorithms.Spec(); s != (Spec{Name: "unknown"}) || NumAlgorithms.String() != "unknown" {
		t.Errorf("an id past the table: Spec() %+v, want Name \"unknown\" alone", s)
	}
	if _, ok := Parse("unknown"); ok {
		t.Error(`Parse("unknown") is ok`)
	}
}

// TestEveryAlgorithmIsDispatched holds steps.go's switches to the table:
// each entry's take of one unit, on a fresh state, is checked (waitUS),
// consumed (Consume), reported (reportState) and given its window
// (windowUS), none of which an algorithm without its case in a switch
// passes (the default answers never, nothing, 0 and 0).
func TestEveryAlgorithmIsDispatched(t *testing.T) {
	t.Parallel()
	for _, a := range Algorithms() {
		op := Op{Kind: OpTake, Algorithm: a, Limit: 5, Burst: 5, PeriodUS: 1_000_000, Cost: 1, Member: 7, Enforce: true}
		if err := ValidateOp(&op); err != nil {
			t.Errorf("%s: ValidateOp: %v", a, err)
			continue
		}
		var st State
		r := Check(&st, algBase, &op)
		if !r.Allowed {
			t.Errorf("%s: a fresh take of 1 refused: %+v (no case in waitUS?)", a, r)
		}
		ttl := Settle(&st, algBase, &op, false, &r)
		switch {
		case st.Alg != a:
			t.Errorf("%s: the state after a take is algorithm %d's (no case in Consume?)", a, st.Alg)
		case ttl <= 0 || r.Remaining != 4:
			t.Errorf("%s: after a take of 1 of 5: TTL %dµs, %d left; want a TTL, 4 left (no case in reportState?)", a, ttl, r.Remaining)
		case r.ResetAfter <= 0:
			t.Errorf("%s: ResetAfter %v, want > 0 (no case in windowUS?)", a, r.ResetAfter)
		}
	}
}

// TestBurstNames: the policy algorithms that read burst, as the "Burst
// not used" diagnostic lists them.
func TestBurstNames(t *testing.T) {
	if got, want := BurstNames(), "gcra, token_bucket and leaky_bucket"; got != want {
		t.Errorf("BurstNames: got %q, want %q", got, want)
	}
}
