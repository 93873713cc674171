package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/cases"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"

	"github.com/edge-gateway/edge/login"
	"github.com/edge-gateway/edge/rules"
)

// ruleRole returns the model's role of the named rule in m's policy.
func ruleRole(t *testing.T, m *policyModel, name string) int {
	t.Helper()
	for _, r := range m.p.Rules {
		if r.Name == name {
			return roleOf(rules.Match{Rule: r}, false)
		}
	}
	t.Fatalf("no rule %q", name)
	return 0
}

// TestAttackMayRefuse: a bystander's request may be refused by a counter
// it meets that the requests before it on that counter could have filled
// (reached its allowance over no time); a fresh one counts it against its
// bound, a known one never does, and a known one that meets a filled
// counter the policy does not exempt known callers from makes the case
// unable to measure.
func TestAttackMayRefuse(t *testing.T) {
	t.Parallel()
	m := loadTestModel(t, attacksPolicyPath)
	a := &attackRun{m: m}
	network := ruleRole(t, m, "login-per-network")      // sliding_window 100 per 1h, ip at /24 and /48
	visitor := ruleRole(t, m, "login-per-visitor")      // gcra 5, burst 5, per visitor
	rng := ruleRole(t, m, "otp-send-per-range")         // phone_range
	account := ruleRole(t, m, "login-failures-account") // known_visitors
	op := func(limit int64, alg rules.Algorithm) rules.Op {
		return rules.Op{Algorithm: alg, Limit: limit, Burst: limit, PeriodUS: time.Hour.Microseconds(), Cost: 1}
	}
	con := func(role int, key byte, o rules.Op) constraint {
		return constraint{role: role, name: m.p.Rules[roleRule(role)].Name, key: rules.Key{key}, op: o}
	}
	on := func(n int, c constraint) []canonVerdict {
		vs := make([]canonVerdict, n)
		for i := range vs {
			vs[i] = canonVerdict{cons: []constraint{c}}
		}
		return vs
	}
	net100 := con(network, 1, op(100, rules.SlidingWindow))
	vis5 := con(visitor, 2, op(5, rules.GCRA))
	tests := []struct {
		name     string
		kind     bystanderKind
		attack   []canonVerdict
		req      canonVerdict
		wantMay  bool
		wantWhy  string
		misbuilt bool
	}{
		{"a filled network counter may refuse a fresh user", freshBehind, on(150, net100), canonVerdict{cons: []constraint{net100}}, true, "login-per-network", false},
		{"one short of its allowance cannot", neighbour, on(99, net100), canonVerdict{cons: []constraint{net100}}, false, "", false},
		{"another key of the rule cannot", freshBehind, on(150, net100), canonVerdict{cons: []constraint{con(network, 9, op(100, rules.SlidingWindow))}}, false, "", false},
		{"refused requests took nothing", freshBehind, append(on(99, net100), canonVerdict{refused: true}), canonVerdict{cons: []constraint{net100}}, false, "", false},
		{"a known user is exempt from a network rule", knownBehind, on(150, net100), canonVerdict{cons: []constraint{net100}}, false, "", false},
		{"and from a range rule", phoneOwner, on(5, con(rng, 3, op(5, rules.SlidingWindow))), canonVerdict{cons: []constraint{con(rng, 3, op(5, rules.SlidingWindow))}}, false, "", false},
		{"and from known_visitors", accountOwner, on(60, con(account, 4, op(50, rules.SlidingWindow))), canonVerdict{cons: []constraint{con(account, 4, op(50, rules.SlidingWindow))}}, false, "", false},
		{"a known user on a filled per-visitor counter: the case is mis-built", knownBehind, on(5, vis5), canonVerdict{cons: []constraint{vis5}}, false, "", true},
		{"a fresh one there may be refused", freshBehind, on(5, vis5), canonVerdict{cons: []constraint{vis5}}, true, "login-per-visitor", false},
		{"the policy refuses it outright", freshBehind, nil, canonVerdict{refused: true, why: "refused outright by deny-internal (deny)"}, true, "refused outright", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cs := &cast{a: a}
			may, why := cs.mayRefuse(tt.req, tt.attack, &bystander{kind: tt.kind})
			if may != tt.wantMay || !strings.Contains(why, tt.wantWhy) || (len(cs.misbuilt) > 0) != tt.misbuilt {
				t.Errorf("got may %v (%q), misbuilt %q; want %v (%q), misbuilt %v", may, why, cs.misbuilt, tt.wantMay, tt.wantWhy, tt.misbuilt)
			}
		})
	}
	// A count_distinct counter full of the attack's values refuses a new
	// value, never one it holds; a known user is exempt from the banning
	// rule's.
	stuffing := ruleRole(t, m, "login-accounts-per-ip") // 10 distinct failing accounts per IP, a ban
	value := func(member uint64) canonVerdict {
		return canonVerdict{distinct: []constraint{{role: stuffing, name: "login-accounts-per-ip", key: rules.Key{5},
			op: rules.Op{Algorithm: rules.Distinct, Limit: 10, PeriodUS: time.Hour.Microseconds(), Member: member}}}}
	}
	var ten []canonVerdict
	for i := range 10 {
		ten = append(ten, value(uint64(100+i)))
	}
	for _, tt := range []struct {
		name    string
		kind    bystanderKind
		attack  []canonVerdict
		member  uint64
		wantMay bool
	}{
		{"a new value once the limit is counted", freshBehind, ten, 1, true},
		{"a value already counted", freshBehind, ten, 100, false},
		{"under the limit", freshBehind, ten[:9], 1, false},
		{"a known user", knownBehind, ten, 1, false},
	} {
		cs := &cast{a: a}
		if may, _ := cs.mayRefuse(value(tt.member), tt.attack, &bystander{kind: tt.kind}); may != tt.wantMay || len(cs.misbuilt) > 0 {
			t.Errorf("distinct, %s: got may %v, misbuilt %q; want %v", tt.name, may, cs.misbuilt, tt.wantMay)
		}
	}

	// The bystanders' own earlier requests count on the counter too.
	cs := &cast{a: a, vs: on(4, vis5)}
	if may, _ := cs.mayRefuse(canonVerdict{cons: []constraint{vis5}}, on(1, vis5), &bystander{kind: freshBehind}); !may {
		t.Errorf("4 bystander requests and 1 of the attack's on a counter of 5: want may be refused")
	}
}

// TestAttackCollateral: the case's collateral sums its bystanders, and
// breaches when one was refused a request its bound does not allow, even
// when the sums alone would not say so.
func TestAttackCollateral(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		bs            []*bystander
		refused, bnd  int64
		breach        bool
		wantInDetails string
	}{
		{"within bounds", []*bystander{{kind: knownBehind, sent: 1}, {kind: freshBehind, sent: 2, refused: 1, bound: 1, why: []string{"login-per-network"}}},
			1, 1, false, "fresh: 1 of 2 refused, bound 1 (login-per-network)"},
		{"a known user refused", []*bystander{{kind: knownBehind, sent: 1, refused: 1, over: []string{"POST /login: 429"}}, {kind: freshBehind, sent: 2, bound: 1}},
			1, 1, true, "refused beyond its bound: POST /login: 429"},
		{"none", nil, 0, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := (&cast{bs: tt.bs, note: "none"}).collateral()
			if r.refused != tt.refused || r.bound != tt.bnd || r.breach != tt.breach || !strings.Contains(strings.Join(r.lines, "\n"), tt.wantInDetails) {
				t.Errorf("got %d/%d breach %v %q; want %d/%d breach %v, details with %q", r.refused, r.bound, r.breach, r.lines, tt.refused, tt.bnd, tt.breach, tt.wantInDetails)
			}
		})
	}
	var nilCast *cast
	if r := nilCast.collateral(); r.breach || r.refused != 0 || len(r.lines) != 1 {
		t.Errorf("no cast: got %+v", r)
	}
	cr := caseResult{gain: 1, bound: caseBoundResult{bound: 1}, coll: collateralResult{breach: true}}
	if !cr.breach() || cr.verdict() != "BREACH" {
		t.Errorf("a collateral breach within the gain's bound: got %s, want BREACH", cr.verdict())
	}
}

// TestAttackCaseBoundPrior: what the bystanders' setup took from a
// counter before the case lowers that key's allowance, from the time it
// was taken.
func TestAttackCaseBoundPrior(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 12, 30, 0, 0, time.UTC) // mid-hour: one window of the hour-long one
	window := rules.Op{Algorithm: rules.SlidingWindow, Limit: 100, PeriodUS: time.Hour.Microseconds()}
	gcra := rules.Op{Algorithm: rules.GCRA, Limit: 5, Burst: 5, PeriodUS: time.Minute.Microseconds()}
	net := constraint{role: 2, name: "per-network", key: rules.Key{1}, op: window}
	vs := make([]canonVerdict, 150)
	for i := range vs {
		vs[i] = canonVerdict{cons: []constraint{net}}
	}
	end := t0.Add(20 * time.Millisecond)
	if got := caseBoundPrior(vs, t0, end, map[consKey]priorUse{{2, rules.Key{1}}: {n: 1, at: t0.Add(-time.Second)}}); got.bound != 99 || !strings.Contains(got.why, "less 1 the bystanders' setup took") {
		t.Errorf("one taken before: got %d (%s), want 99", got.bound, got.why)
	}
	if got := caseBoundPrior(vs, t0, end, map[consKey]priorUse{{2, rules.Key{9}}: {n: 1, at: t0}}); got.bound != 100 {
		t.Errorf("taken on another key: got %d, want 100", got.bound)
	}
	// Taken in the window before: the case may meet that window's and its
	// own, less the one.
	if got := caseBoundPrior(vs, t0, end, map[consKey]priorUse{{2, rules.Key{1}}: {n: 1, at: t0.Add(-time.Hour)}}); got.bound != 150 {
		t.Errorf("one taken an hour before: got %d (%s), want min(150, 2 windows × 100 - 1)", got.bound, got.why)
	}
	// A GCRA key refills from the prior's time: 1 taken 24 s before the
	// case is back twice over (one per 12 s).
	v := constraint{role: 0, name: "per-visitor", key: rules.Key{2}, op: gcra}
	gs := []canonVerdict{{cons: []constraint{v}}, {cons: []constraint{v}}, {cons: []constraint{v}}, {cons: []constraint{v}}, {cons: []constraint{v}}, {cons: []constraint{v}}, {cons: []constraint{v}}}
	if got := caseBoundPrior(gs, t0, end, map[consKey]priorUse{{0, rules.Key{2}}: {n: 1, at: t0.Add(-24 * time.Second)}}); got.bound != 6 {
		t.Errorf("gcra, one taken 24 s before: got %d (%s), want 5 + 2 - 1 = 6", got.bound, got.why)
	}
}

// TestAttackAccentSpellings: a database comparing accounts at the
// Unicode collation's primary strength (golang.org/x/text/collate, accents
// and case ignored, as MySQL 8's utf8mb4_0900_ai_ci) reads every spelling
// as the victim, while NFKC and case folding alone keep 8 of them apart:
// the class tests accent folding, not what account-spelling already does.
func TestAttackAccentSpellings(t *testing.T) {
	t.Parallel()
	const victim = accentVictimLocal + "0a1b2c3d@example.com"
	primary := collate.New(language.Und, collate.IgnoreDiacritics, collate.IgnoreCase, collate.IgnoreWidth)
	fold := func(s string) string { return norm.NFKC.String(cases.Fold().String(norm.NFKC.String(s))) }
	apart := map[string]bool{}
	seen := map[string]bool{}
	for _, s := range accentSpellings(victim) {
		if primary.CompareString(s.value, victim) != 0 {
			t.Errorf("%s: %q is not %q at primary strength", s.name, s.value, victim)
		}
		if seen[s.value] {
			t.Errorf("%s: %q twice", s.name, s.value)
		}
		seen[s.value] = true
		apart[fold(s.value)] = true
	}
	if s := accentSpellings(victim); s[0].value != victim || len(apart) != 8 {
		t.Errorf("first spelling %q, %d folded forms %v; want the victim first and 8 forms apart", s[0].value, len(apart), apart)
	}
}

// TestAttackIdentityConflictCanon: the canonical login of an
// identity-conflict case names the email alone, and the model keys it on
// the victim's account, the key a login naming the same value as its
// username has: the bound is the victim's, whatever username the attack
// sent beside it.
func TestAttackIdentityConflictCanon(t *testing.T) {
	t.Parallel()
	m := loadTestModel(t, attacksPolicyPath)
	a := &attackRun{m: m, p: attackParams{host: attackHost}}
	client := netip.MustParseAddr("2001:db8:7::1")
	if why, err := a.conflictSkip(client, "victim@example.com"); why != "" || err != nil {
		t.Fatalf("the attacks policy reads username and email: got skip %q, %v", why, err)
	}
	var keys []rules.Key
	for _, f := range []string{"email", "username"} {
		v, err := m.decide(a.loginCanon(client, map[string]string{f: "victim@example.com", "password": "wrong"}))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.cons {
			if c.name == "login-failures-account-client" {
				keys = append(keys, c.key)
			}
		}
	}
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Errorf("login-failures-account-client keys of the victim's email, and of it as a username: %x, want two equal", keys)
	}
}

// TestAttackCollationSpellings: a database comparing accounts at the
// Unicode collation's primary strength reads every collation-folding
// spelling as the victim, and so does the edge's normal form
// (login.Normalizer), while NFKC and case folding keep 14 of them apart (two fold alike).
func TestAttackCollationSpellings(t *testing.T) {
	t.Parallel()
	const victim = accentVictimLocal + "0a1b2c3d@example.com"
	primary := collate.New(language.Und, collate.IgnoreDiacritics, collate.IgnoreCase, collate.IgnoreWidth)
	fold := func(s string) string { return norm.NFKC.String(cases.Fold().String(norm.NFKC.String(s))) }
	var n login.Normalizer
	apart, seen := map[string]bool{}, map[string]bool{}
	for _, s := range collationSpellings(victim) {
		if primary.CompareString(s.value, victim) != 0 {
			t.Errorf("%s: %+q is not %q at primary strength", s.name, s.value, victim)
		}
		if got, err := n.Normalize(nil, s.value, false); err != nil || string(got) != victim {
			t.Errorf("%s: %+q normalises to %+q, %v; want %q", s.name, s.value, got, err, victim)
		}
		if seen[s.value] {
			t.Errorf("%s: %+q twice", s.name, s.value)
		}
		seen[s.value] = true
		if f := fold(s.value); f != victim {
			apart[f] = true
		}
	}
	if s := collationSpellings(victim); s[0].value != victim || len(s) != 16 || len(apart) != 14 {
		t.Errorf("first spelling %q, %d spellings, %d kept apart by NFKC and case folding; want the victim first, 16, and 14", s[0].value, len(s), len(apart))
	}
}
