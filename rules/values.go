package rules

import (
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules/hclattr"
)

// Identities with several values (docs/policy.md, "identity { }"). An
// identity is a list of sources, and a request may carry several of them
// with values that disagree: a login body with a username and an email, an
// origin that logs people in by either. Counting the first alone let an
// attacker guess at one email under a fresh username each time. So a rule
// keyed on such an identity counts every value: the Engine expands its
// match into one Match per combination of values (each its own key and its
// own op in the request's one store call), the request is refused if any
// is over its limit (all-or-nothing, as ever), and each match is charged,
// refunded, reset, known, banned and explained as a rule's only match is.
// Metrics, logs and RateLimit fields count the rule once per request, by
// its worst match (Worst).
//
// With on_conflict = "reject" an identity whose sources disagree is
// Invalid instead, and the rule's invalid_identity decides.

// MaxCombinations bounds the value combinations one rule's key and
// count_distinct can take in a request: the product of their
// characteristics' MaxValues. A rule over it is refused at compile, so a
// request costs at most this many ops per rule.
const MaxCombinations = 16

// maxMulti is the most characteristics with several values one rule can
// have: each has at least two, and their product is at most
// MaxCombinations.
const maxMulti = 4

// MultiCharacteristic is a characteristic whose request can carry several
// values: an identity whose listed sources are present and normalise to
// different values. AppendValue appends the first of them.
type MultiCharacteristic interface {
	Characteristic
	// MaxValues is the most distinct values a request can carry, fixed at
	// compile (the identity's sources that can be present together).
	// Below 2 the characteristic counts as single-valued.
	MaxValues() int
	// Values returns how many distinct values the request carries, from 1
	// to MaxValues. The Engine calls it only after AppendValue answered
	// Present for the request.
	Values(req *Request, s *Scratch) int
	// AppendValueAt appends the i-th distinct value (0 ≤ i < Values),
	// encoded as AppendValue encodes the first (AppendValueAt(buf, 0) is
	// AppendValue's answer).
	AppendValueAt(buf []byte, i int, req *Request, s *Scratch) ([]byte, Status)
}

// EveryCondition is a Condition over an identity that can carry several
// values (MultiCharacteristic): Eval reports whether it holds for some
// value, EvalEvery whether it holds for every value. A rule that limits,
// denies or logs applies when its conditions hold for some value (the
// origin may act on any, and the rule then counts every value of its
// key); an exemption (action = "skip") applies only when they hold for
// every value, so no value the origin may act on escapes a rule through
// another one written beside it.
type EveryCondition interface {
	Condition
	EvalEvery(req *Request, s *Scratch) Status
}

// Conflict is what a request gets whose present sources of one identity
// normalise to different values (on_conflict, docs/policy.md).
type Conflict uint8

const (
	// ConflictCount: a rule keyed on the identity counts every value (the
	// default).
	ConflictCount Conflict = iota
	// ConflictReject: the identity is Invalid, and the rule's
	// invalid_identity decides (400 by default).
	ConflictReject
)

// OnConflict returns the on_conflict of identity (an attribute a block
// type lists in BlockType.Identities, such as "account") as the policy's
// block says it: ConflictCount unless the block sets it. Features read it
// when they decode their part of the block or compile a characteristic.
func (c *Compiler) OnConflict(identity string) Conflict {
	return c.p.conflicts[identity]
}

// identityNames lists the identities of a block's owners, sorted.
func identityNames(owners []*BlockType) []string {
	var out []string
	for _, o := range owners {
		out = append(out, o.Identities...)
	}
	sort.Strings(out)
	return out
}

// conflictModes is on_conflict: a Conflict for every identity of the
// block, or an object of them by identity. A Conflict is its word's
// index: Words are in Conflict's order.
var conflictModes = hclattr.ByName{Words: []string{"count", "reject"}, Kind: "identity", AKind: "an identity", Example: "account",
	Meaning: `the mode is "count" (a rule counts every value the sources give) or "reject" (the identity is invalid)`}

// onConflict decodes a block's on_conflict, whose owners' identities are
// names (conflictModes). written holds the attributes the block sets:
// naming an identity it does not list is a warning (the mode then has
// nothing to apply to).
func (c *Compiler) onConflict(a *hcl.Attribute, names []string, written hcl.Attributes) {
	if c.p.conflicts == nil {
		c.p.conflicts = map[string]Conflict{}
	}
	c.Append(conflictModes.Decode(a, names, func(name string, mode int, key *hcl.Range) hcl.Diagnostics {
		c.p.conflicts[name] = Conflict(mode)
		if _, set := written[name]; key != nil && !set {
			return hcl.Diagnostics{hclattr.Warnf(*key, "on_conflict not used", "this identity block lists no %s sources, so its on_conflict applies to nothing", name)}
		}
		return nil
	}))
}

// multiPart is one characteristic of a rule that can carry several values.
type multiPart struct {
	ch MultiCharacteristic
	// at is the characteristic's index in Rule.Key, or -1 for the rule's
	// count_distinct characteristic.
	at int
}

// valueCombo is the combination of values a Scratch is keying a rule on:
// digit[k] is the value of the rule's k-th multiPart (0: the first, which
// is every single-valued characteristic's), n[k] how many the request
// carries.
type valueCombo struct {
	digit, n [maxMulti]uint8
}

// multiValues records which of r's key characteristics and its
// count_distinct can carry several values, and refuses a rule whose
// combinations could exceed MaxCombinations.
func (c *Compiler) multiValues(rb *ruleBlock, r *Rule) {
	total := 1
	add := func(ch Characteristic, at int) {
		mc, ok := ch.(MultiCharacteristic)
		if !ok || mc.MaxValues() < 2 {
			return
		}
		total *= mc.MaxValues()
		r.multi = append(r.multi, multiPart{ch: mc, at: at})
	}
	for i, ch := range r.Key {
		add(ch, i)
	}
	if r.Distinct != nil {
		add(r.Distinct, -1)
	}
	if len(r.multi) == 0 {
		return
	}
	if total > MaxCombinations || len(r.multi) > maxMulti {
		rng := rb.DefRange
		if rb.Key != nil {
			rng = rb.Key.Range()
		}
		c.Errorf(rng, "Too many identity values", "rule %q's key and count_distinct can carry %d combinations of values in one request (each identity as many as its sources that can be present together), more than %d; list fewer sources, or set on_conflict = \"reject\" in identity { }", r.Name, total, MaxCombinations)
		r.multi = nil
		return
	}
	r.multiOf = make([]int8, len(r.Key))
	for i := range r.multiOf {
		r.multiOf[i] = -1
	}
	r.distinctMulti = -1
	for k, mp := range r.multi {
		if mp.at >= 0 {
			r.multiOf[mp.at] = int8(k)
		} else {
			r.distinctMulti = int8(k)
		}
	}
}

// appendAt appends the value of r's multiPart k in the Scratch's current
// combination: its first value (AppendValue) unless the combination names
// another.
func (s *Scratch) appendAt(r *Rule, k int8, buf []byte, req *Request) ([]byte, Status) {
	mp := &r.multi[k]
	if d := s.combo.digit[k]; d > 0 {
		return mp.ch.AppendValueAt(buf, int(d), req, s)
	}
	return mp.ch.AppendValue(buf, req, s)
}

// combinations returns how many value combinations r's key and
// count_distinct take for req (1 for a single-valued rule, at most
// MaxCombinations), recording each part's count in s.combo. Call it after
// r's first combination resolved Present.
func (s *Scratch) combinations(r *Rule, req *Request) int {
	total := 1
	for k := range r.multi {
		n := min(max(r.multi[k].ch.Values(req, s), 1), r.multi[k].ch.MaxValues(), 255)
		s.combo.n[k] = uint8(n)
		total *= n
	}
	return total
}

// setCombination makes j (0 ≤ j < combinations) the combination s keys r
// on: a mixed-radix number, the first part varying fastest.
func (s *Scratch) setCombination(r *Rule, j int) {
	for k := range r.multi {
		n := int(s.combo.n[k])
		s.combo.digit[k] = uint8(j % n)
		j /= n
	}
}

// countValues adds, after the last of s.Matches (r's match of req for its
// first combination of values, counted), a match for each further
// combination whose key (and count_distinct value) no earlier one has:
// equal values count once. A count_distinct value on a key an earlier
// combination of the request also counts on takes one more place: the
// store judges every op against the state before the call, so a request
// bringing two new values to a set one short of its limit is refused
// rather than let in with one of them uncounted (a Distinct op's Cost,
// counter.Check).
func (e *Engine) countValues(now time.Time, r *Rule, req *Request, s *Scratch) {
	total := s.combinations(r, req)
	first := len(s.Matches) - 1
	m := s.Matches[first]
	lease := s.Ops[m.Op].Member // a concurrency rule's, the same for every value
	m.Op, m.CeilingOp = -1, -1
	for j := 1; j < total; j++ {
		s.setCombination(r, j)
		key, st := e.key(r, req, s, false)
		member := lease
		if st == Present && r.Distinct != nil {
			member, st = e.member(r, req, s)
		}
		if st != Present {
			continue // every value resolved with the first combination: not expected
		}
		cost, dup := int64(1), false
		for i := first; i < len(s.Matches); i++ {
			op := &s.Ops[s.Matches[i].Op]
			if op.Key != key {
				continue
			}
			if op.Member == member || r.Distinct == nil {
				dup = true
				break
			}
			cost++
		}
		if dup {
			continue
		}
		// A rule's own cost is its stages' (Shaper: behaviour/cost).
		m.Value = uint8(min(len(s.Matches)-first, 255))
		e.countMatch(now, r, req, s, m, key, member, cost)
	}
	if len(s.Matches)-first > 1 {
		for i := first; i < len(s.Matches); i++ {
			s.Matches[i].Several = true
		}
	}
	s.combo = valueCombo{}
}

// conditionsEvery is conditions for an exemption (skip.go): a condition
// over an identity with several values (EveryCondition) must hold for
// every one of them, so that no value the origin may act on is exempt
// through another written beside it.
func (r *Rule) conditionsEvery(req *Request, s *Scratch) Status {
	return r.evalConditions(req, s, true)
}

// evalConditions is conditions, and with every conditionsEvery.
func (r *Rule) evalConditions(req *Request, s *Scratch, every bool) Status {
	status := Present
	for _, c := range r.Conditions {
		st := Missing
		if ec, ok := c.(EveryCondition); !every || !ok {
			st = c.Eval(req, s)
		} else {
			st = ec.EvalEvery(req, s)
		}
		switch st {
		case Present:
		case Missing, Absent:
			return Missing // a condition's absent identity: the rule does not apply either way
		default:
			status = Invalid // Invalid, or a status no feature may return
		}
	}
	return status
}

// outcomeRank orders outcomes from the one metrics and logs count a rule
// by first (a refusal) to the last (a rule that did not apply).
var outcomeRank = [NumOutcomes]uint8{
	OutcomeDeny:            8,
	OutcomeStoreErrorDeny:  7,
	OutcomeInvalid:         6,
	OutcomeMissing:         5,
	OutcomeDryRunDeny:      4,
	OutcomeStoreErrorAllow: 3,
	OutcomeAllow:           2,
	OutcomeExempt:          1,
	OutcomeSkip:            0,
}

// Worst returns the index of the match with the worst outcome (a refusal
// first, the first in order on a tie) among ms[i] and the further values
// of its rule that follow it (Match.Value > 0): the match metrics, logs
// and RateLimit fields count the rule by, once per request. Callers walk
// the matches with Value 0 and ask Worst for each.
func Worst(ms []Match, i int) int {
	w := i
	for j := i + 1; j < len(ms) && ms[j].Value > 0; j++ {
		if outcomeRank[ms[j].Outcome] > outcomeRank[ms[w].Outcome] {
			w = j
		}
	}
	return w
}
