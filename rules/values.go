package rules

import (
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules/hclattr"
)

// Identities with several values (docs/policy.md, "identity { }";
// docs/architecture.md, "Extension points"): a characteristic over an
// identity whose sources disagree is a MultiCharacteristic, and its rule's
// Expander stage (behaviour/values) counts every value, one match per
// combination of them, each its own key and op. Metrics, logs and
// RateLimit fields count the rule once per request, by its worst match
// (Worst). With on_conflict = "reject" such an identity is Invalid
// instead, and the rule's invalid_identity decides.

// MultiCharacteristic is a characteristic whose request can carry several
// values: an identity whose listed sources are present and normalise to
// different values. AppendValue appends the first of them; the rule's
// Expander (behaviour/values) reads the others.
type MultiCharacteristic interface {
	Characteristic
	// MaxValues is the most distinct values a request can carry, fixed at
	// compile (the identity's sources that can be present together).
	// Below 2 the characteristic counts as single-valued.
	MaxValues() int
	// Values returns how many distinct values the request carries, from 1
	// to MaxValues. It is called only after AppendValue answered Present
	// for the request.
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

// RequestKey returns r's counter key for req, with Present, as Check
// makes it for r's match (Missing, Invalid or Absent as a key's value
// is): for the combination of values the rule's Expander picks
// (Expander.AppendKeyValue), its first otherwise. Only an Expander may
// call it.
func (s *Scratch) RequestKey(r *Rule, req *Request) (Key, Status) {
	return s.owner.key(r, req, s, false)
}

// RequestMember returns the Op.Member of r's count_distinct value for req
// (Engine.member), as RequestKey returns its key. Only an Expander may
// call it.
func (s *Scratch) RequestMember(r *Rule, req *Request) (uint64, Status) {
	return s.owner.member(r, req, s)
}

// CountMatch appends m, a further match of r for req counting key (and
// member) at cost, with its op as for r's first match (the stages'
// Shape, its IP ceiling's op) and returns the ceiling's status: unless
// Present, nothing is added. Only an Expander's Expand may call it.
func (s *Scratch) CountMatch(r *Rule, req *Request, m Match, key Key, member uint64, cost int64) Status {
	return s.owner.countMatch(s.now, r, req, s, m, key, member, cost)
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
