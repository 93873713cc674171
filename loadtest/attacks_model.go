package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/edge-gateway/edge/behaviour/values"
	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
)

// The attacks scenario's bounds come from the policy, never from numbers
// written here: the policy file the node serves (-policy) is loaded with the
// edge's own compiler (rules.Load), and each attack request's canonical
// form, the request the attacker means (POST /login at the protected host,
// from the client the policy says it is, for the phone the origin texts),
// is shown to the edge's own Engine, in process, over a store that admits
// everything. The Engine answers which rules match that request and with
// which counter keys and parameters (limit, burst, period, algorithm); the
// bound is then arithmetic over those (caseBound).
//
// The canonical form is computed by this package, never by the edge: the
// attack's spelling (a path written /%6Cogin, a client hidden in a 6to4
// address, a phone in a form field behind a JSON decoy) is exactly what the
// edge might misread, so the model is only ever told what the spelling
// means. What the model shares with the edge is the policy's arithmetic:
// which rule matches a clean request, what its key groups, how much its
// algorithm allows.

// canonReq is an attack request as the attacker means it.
type canonReq struct {
	method string     // "POST"
	path   string     // "/login", canonical already
	host   string     // lower case, no port; "" for none
	client netip.Addr // the client the policy counts: masked at the edge's prefixes, embedded IPv4 already extracted
	// visitor is a visitor cookie the edge minted ("" for none, or a
	// cookie the edge never minted: the IP's cookieless bucket).
	visitor string
	// fields is the JSON body the origin reads (phone, challenge_id,
	// code), nil for none.
	fields map[string]string
}

// constraint is one counter that holds a canonical request: a rule's op
// (or a visitor rule's IP-ceiling op, or the mint budget's op) on one key.
type constraint struct {
	role int    // roleOf; -1 for the mint budget
	name string // "login-per-visitor", "login-per-visitor (IP ceiling)", "visitor mint budget"
	key  rules.Key
	op   rules.Op
}

// canonVerdict is what the policy does with a canonical request.
type canonVerdict struct {
	// refused is true when the policy never forwards the request,
	// whatever the counters say: an enforcing action = "deny" rule
	// matches, or an identity is missing or invalid (400).
	refused bool
	why     string // the rule that refuses, when refused
	cons    []constraint
	// mint is the visitor mint budget that a cookieless request draws a
	// new visitor ID from; nil without a visitor block or with a valid
	// cookie.
	mint *constraint
	// inflight are the enforcing concurrency rules' ops (and a visitor
	// concurrency rule's IP ceiling): what holds the request's slots at
	// the origin, not its count (attacks_inflight.go).
	inflight []constraint
	// rules are the indices of every enforcing rule that counts the
	// request, those that bound nothing here (count_distinct) included.
	rules []int
	// distinct are the enforcing count_distinct rules' ops, each with the
	// value it brings (Op.Member): they bound no gain, but a counter full
	// of the attack's values refuses a bystander's new one.
	distinct []constraint
}

// policyModel decides canonical requests against a policy, in process.
// It is used by one goroutine at a time.
type policyModel struct {
	path string
	p    *rules.Policy
	e    *rules.Engine
	s    *rules.Scratch
}

// loadPolicyModel loads the policy at path with the edge's compiler.
func loadPolicyModel(path string, src []byte) (*policyModel, error) {
	p, diags := builtin.Load(path, src)
	if diags.HasErrors() {
		return nil, fmt.Errorf("loading the policy %s: %s", path, diags.Error())
	}
	e, err := rules.NewEngine(rules.EngineOptions{Store: admitAll{}})
	if err != nil {
		return nil, fmt.Errorf("loading the policy %s: %w", path, err)
	}
	return &policyModel{path: path, p: p, e: e, s: rules.NewScratch(len(p.Rules))}, nil
}

// admitAll is a store that admits every op and keeps nothing: the model
// asks the Engine which ops a request makes, never what they decide.
type admitAll struct{}

func (admitAll) Take(_ context.Context, _ time.Time, ops []rules.Op, res []rules.Result) error {
	for i := range ops {
		res[i] = rules.Result{Allowed: true}
	}
	return nil
}

func (admitAll) Close() error { return nil }

var _ rules.Store = admitAll{}

// modelFields gives the Engine a canonical request's values: its JSON body
// and nothing else.
type modelFields struct{ body []byte }

func (f *modelFields) Header([]byte) []byte { return nil }
func (f *modelFields) Cookie([]byte) []byte { return nil }
func (f *modelFields) Query([]byte) []byte  { return nil }
func (f *modelFields) RawQuery() []byte     { return nil }
func (f *modelFields) Cookies() []byte      { return nil }
func (f *modelFields) Body() (contentType, body []byte) {
	if f.body == nil {
		return nil, nil
	}
	return []byte("application/json"), f.body
}

// counted returns the address the policy counts for a, masked at the
// policy's own prefixes (edge { ipv4_prefix ipv6_prefix }): the client the
// model is told about. The embedded IPv4 of a 6to4, NAT64 or Teredo
// address is the caller's business (embeddedIPv4), so that the model never
// relies on the edge's reading of one.
func (m *policyModel) counted(a netip.Addr) netip.Addr {
	return ipv6.Prefix(a.Unmap(), m.p.IPv4Prefix, m.p.IPv6Prefix).Addr()
}

// decide returns what the policy does with r.
func (m *policyModel) decide(r canonReq) (canonVerdict, error) {
	var body []byte
	if r.fields != nil {
		b, err := json.Marshal(r.fields)
		if err != nil {
			return canonVerdict{}, err
		}
		body = b
	}
	canon, ok := route.AppendCanonicalPath(nil, []byte(r.path))
	if !ok {
		return canonVerdict{}, fmt.Errorf("the canonical path %q does not parse", r.path)
	}
	req := rules.Request{
		Method: []byte(strings.ToUpper(r.method)),
		Host:   []byte(r.host),
		Path:   route.AppendMatchPath(nil, canon, m.p.PathCaseInsensitive),
		Client: r.client,
		Fields: &modelFields{body: body},
	}
	m.s.Begin(m.p)
	vc := nat.ConfigOf(m.p)
	if r.visitor != "" && vc != nil {
		var id nat.ID
		sum := sha256.Sum256([]byte(r.visitor))
		copy(id[:], sum[:])
		vc.SetVisitor(m.s, id, true)
	}
	d := m.e.Check(context.Background(), time.Now(), m.p, &req, m.s)
	// The model forwards nothing: what the decision took in flight (a
	// concurrency lease, a load-shedding slot) is given back at once.
	_ = m.e.Release(context.Background(), time.Now(), m.s)
	v := canonVerdict{refused: d.Verdict != rules.Forward}
	if v.refused {
		v.why = "refused outright"
		for _, mt := range m.s.Matches {
			if mt.Enforce && (mt.Outcome == rules.OutcomeDeny || mt.Outcome == rules.OutcomeInvalid || mt.Outcome == rules.OutcomeMissing) {
				v.why = fmt.Sprintf("refused outright by %s (%s)", mt.Rule.Name, mt.Outcome)
				break
			}
		}
		return v, nil
	}
	for _, mt := range m.s.Matches {
		if !mt.Enforce || mt.Op < 0 {
			continue
		}
		v.rules = append(v.rules, mt.Rule.Index)
		op := m.s.Ops[mt.Op]
		if mt.Rule.InFlight() {
			// A concurrency lease bounds requests at once, not in all.
			v.inflight = append(v.inflight, constraint{role: roleOf(mt, false), name: mt.Rule.Name, key: op.Key, op: op})
			if mt.CeilingOp >= 0 {
				cop := m.s.Ops[mt.CeilingOp]
				v.inflight = append(v.inflight, constraint{role: roleOf(mt, true), name: mt.Rule.Name + " (IP ceiling)", key: cop.Key, op: cop})
			}
			continue
		}
		if op.Algorithm == rules.Distinct {
			// count_distinct bounds distinct values, not requests.
			v.distinct = append(v.distinct, constraint{role: 2 * mt.Rule.Index, name: mt.Rule.Name, key: op.Key, op: op})
			continue
		}
		v.cons = append(v.cons, constraint{role: roleOf(mt, false), name: mt.Rule.Name, key: op.Key, op: op})
		if mt.CeilingOp >= 0 {
			cop := m.s.Ops[mt.CeilingOp]
			v.cons = append(v.cons, constraint{role: roleOf(mt, true), name: mt.Rule.Name + " (IP ceiling)", key: cop.Key, op: cop})
		}
	}
	if i := mintOp(vc, m.s); i >= 0 {
		op := m.s.Ops[i]
		v.mint = &constraint{role: -1, name: "visitor mint budget", key: op.Key, op: op}
	}
	return v, nil
}

// roleOf is the role of match mt's op (ceiling: its IP ceiling's): its
// rule's index × 2, +1 for the ceiling, and which value of the rule's
// identity it counts (rules.Match.Value: a request whose sources disagree
// has a match per value, each of which holds it by itself).
func roleOf(mt rules.Match, ceiling bool) int {
	r := 2 * mt.Rule.Index
	if ceiling {
		r++
	}
	return r*values.MaxCombinations + int(mt.Value)
}

// ruleIndex is the index in the policy of the rule of c's role (≥ 0).
func (c constraint) ruleIndex() int { return roleRule(c.role) }

// roleRule is the index in the policy of the rule of a role (≥ 0, roleOf).
func roleRule(role int) int { return role / (2 * values.MaxCombinations) }

// roleCeiling reports whether a role (≥ 0, roleOf) is a rule's IP ceiling.
func roleCeiling(role int) bool { return role/values.MaxCombinations%2 == 1 }

// mintOp is the index of the request's mint budget op, or -1.
func mintOp(vc *nat.Config, s *rules.Scratch) int {
	if vc == nil {
		return -1
	}
	return vc.MintOp(s)
}

// allowance returns the most takes op allows on one key from an empty
// counter, over requests decided between start and end (wall clock, the
// edge's clock allowance already applied by the caller):
//
//   - gcra: burst + ⌊span / T⌋, T = period / limit in whole µs as the edge
//     computes it (see gcraAllowance);
//   - token_bucket, leaky_bucket: burst + ⌊span × limit / period⌋ (the
//     bucket refills limit tokens per period, continuously, in µs);
//   - fixed_window, sliding_window: limit per window touched, windows
//     starting at multiples of the period since the Unix epoch
//     (docs/policy.md, "Algorithms";
//     the two-counter estimate never lets a window's own count pass limit);
//     a calendar period (a day or more) counts one window more, since its
//     boundaries follow a time zone;
//   - sliding_log: limit per period of span, started: no rolling period
//     ever holds more than limit.
func allowance(op rules.Op, start, end time.Time) int64 {
	span := max(end.Sub(start), 0)
	spanUS := span.Microseconds()
	p := max(op.PeriodUS, 1)
	lim := max(op.Limit, 1)
	switch op.Algorithm {
	case rules.GCRA:
		return op.Burst + spanUS/max(p/lim, 1)
	case rules.TokenBucket, rules.LeakyBucket:
		// span × limit cannot overflow: a run is minutes, limits are far
		// below 10^9.
		return op.Burst + spanUS*lim/p
	case rules.FixedWindow, rules.SlidingWindow:
		windows := floorDiv(end.UnixMicro(), p) - floorDiv(start.UnixMicro(), p) + 1
		if op.Algorithm == rules.FixedWindow && p >= (24*time.Hour).Microseconds() {
			windows++
		}
		return lim * windows
	case rules.SlidingLog:
		return lim * (spanUS/p + 1)
	}
	return 1 << 62 // unknown: unbounded
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// caseBound is the most requests of a case that the policy lets reach the
// origin, and which counter gives it.
type caseBoundResult struct {
	bound int64
	why   string
}

// caseBound returns the bound on how many of the requests whose verdicts
// are vs may be forwarded, all decided between start and end. A request
// the policy refuses outright counts 0. For every role (one rule's op, or
// one visitor rule's IP ceiling) that holds some of the requests, no more
// pass than the requests it does not hold plus, over the keys it holds
// them on, the lesser of each key's requests and its allowance; the bound
// is the least of these, and of the number of requests not refused.
func caseBound(vs []canonVerdict, start, end time.Time) caseBoundResult {
	return caseBoundPrior(vs, start, end, nil)
}

// caseBoundPrior is caseBound on counters that requests before the case
// (a known bystander's successful login, attacks_bystanders.go) consumed
// from: a key's allowance then runs from the first of those requests and
// is less what they took.
func caseBoundPrior(vs []canonVerdict, start, end time.Time, prior map[consKey]priorUse) caseBoundResult {
	start, end = start.Add(-clockAllowance), end.Add(clockAllowance)
	var n, refused int64
	refusedWhy := ""
	type keyAgg struct {
		count int64
		op    rules.Op
	}
	type roleAgg struct {
		name    string
		matched int64
		keys    map[rules.Key]*keyAgg
		order   []rules.Key
	}
	roles := make(map[int]*roleAgg)
	var roleOrder []int
	for _, v := range vs {
		if v.refused {
			refused++
			refusedWhy = v.why
			continue
		}
		n++
		seen := make(map[int]bool, len(v.cons))
		for _, c := range v.cons {
			if seen[c.role] {
				continue
			}
			seen[c.role] = true
			ra := roles[c.role]
			if ra == nil {
				ra = &roleAgg{name: c.name, keys: make(map[rules.Key]*keyAgg)}
				roles[c.role] = ra
				roleOrder = append(roleOrder, c.role)
			}
			ra.matched++
			ka := ra.keys[c.key]
			if ka == nil {
				ka = &keyAgg{op: c.op}
				ra.keys[c.key] = ka
				ra.order = append(ra.order, c.key)
			}
			ka.count++
		}
	}
	best := caseBoundResult{bound: n, why: "every one may pass: no rule holds them to fewer"}
	if n == 0 {
		best.why = "the policy refuses every one of them"
		if refusedWhy != "" {
			best.why = "every one is " + refusedWhy
		}
		return best
	}
	slices.Sort(roleOrder)
	for _, role := range roleOrder {
		ra := roles[role]
		b := n - ra.matched
		var perKey int64 = -1
		var took int64
		sameAllowance := true
		for _, k := range ra.order {
			ka := ra.keys[k]
			a := allowance(ka.op, start, end)
			if u, ok := prior[consKey{role, k}]; ok {
				from := start
				if t := u.at.Add(-clockAllowance); t.Before(from) {
					from = t
				}
				a = max(allowance(ka.op, from, end)-u.n, 0)
				took += u.n
			}
			if perKey >= 0 && a != perKey {
				sameAllowance = false
			}
			perKey = a
			b += min(ka.count, a)
		}
		if b < best.bound {
			best.bound = b
			var w strings.Builder
			fmt.Fprintf(&w, "%s: %s", ra.name, describeOp(ra.keys[ra.order[0]].op))
			if sameAllowance {
				fmt.Fprintf(&w, ", %d per key over %s", perKey, end.Sub(start).Round(time.Millisecond))
			}
			fmt.Fprintf(&w, ", %d %s", len(ra.order), plural(len(ra.order), "key", "keys"))
			if took > 0 {
				fmt.Fprintf(&w, ", less %d the bystanders' setup took before the case", took)
			}
			if ra.matched < n {
				fmt.Fprintf(&w, ", and %d requests it does not hold", n-ra.matched)
			}
			best.why = w.String()
		}
	}
	if refused > 0 {
		best.why += fmt.Sprintf("; %d more %s", refused, refusedWhy)
	}
	return best
}

// mintBound returns the most new visitor IDs the mint budget gives the
// cookieless requests whose verdicts are vs, decided between start and
// end: the sum of the budget's allowance over the keys (IPs) they draw on.
// ok is false when the policy has no visitor block.
func mintBound(vs []canonVerdict, start, end time.Time) (bound int64, op rules.Op, ok bool) {
	start, end = start.Add(-clockAllowance), end.Add(clockAllowance)
	keys := make(map[rules.Key]bool)
	for _, v := range vs {
		if v.mint == nil || keys[v.mint.key] {
			continue
		}
		keys[v.mint.key] = true
		op, ok = v.mint.op, true
		bound += allowance(v.mint.op, start, end)
	}
	return bound, op, ok
}

// describeOp renders an op's parameters: "gcra 5 per 1m0s, burst 5".
func describeOp(op rules.Op) string {
	s := fmt.Sprintf("%s %d per %s", op.Algorithm, op.Limit, time.Duration(op.PeriodUS)*time.Microsecond)
	switch op.Algorithm {
	case rules.GCRA, rules.TokenBucket, rules.LeakyBucket:
		s += fmt.Sprintf(", burst %d", op.Burst)
	}
	return s
}
