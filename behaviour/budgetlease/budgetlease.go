// Package budgetlease is the budget_lease { } block of rule { }
// (docs/policy.md, "Budget leases"): a rule on one hot counter (key =
// ["global"] or ["route"]) whose nodes share a Redis may have each node
// take up to units of its budget in one call and spend them on its own
// requests, rather than send every request of the fleet to one key on one
// Redis slot. The leasing itself is rules/leasestore's, a store in front
// of the shared one; this package compiles the block and marks the rule's
// ops with it (Op.LeaseUnits), in the shape phase
// (docs/architecture.md, "The decision pipeline"). On the memory store
// the mark is ignored: every decision is local already.
//
// It is a rules.Feature (builtin.Features lists it) whose block compiles
// to a Stage with a Shape phase.
package budgetlease

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// MaxUnits is the most units one lease may take: the width of
// Op.LeaseUnits. A lease that large is spent by 65,535 requests between
// two calls; a hot key needs tens.
const MaxUnits = 1<<16 - 1

// Feature returns budget leases: the budget_lease { } block of rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name:       "budgetlease",
		RuleBlocks: []rules.RuleBlockType{{Type: "budget_lease", Compile: compileBlock}},
	}
}

// Stage is a rule's budget_lease { }.
type Stage struct {
	units uint16
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "budget_lease" }

// Units returns the most units a node takes of the rule's budget in one
// call.
func (st *Stage) Units() int64 { return int64(st.units) }

// Of returns r's budget_lease { }, nil when r has none.
func Of(r *rules.Rule) *Stage {
	st, _ := rules.StageOf[*Stage](r)
	return st
}

// Shape marks m's op as leased, up to the block's units. It does not
// allocate.
func (st *Stage) Shape(_ *rules.Request, s *rules.Scratch, m *rules.Match) {
	s.Ops[m.Op].LeaseUnits = st.units
}

// block is budget_lease { } as written.
type block struct {
	// units is the most units a node takes in one call, 2 to the rule's
	// burst (its limit for the windows) and MaxUnits.
	Units      int64     `hcl:"units"`
	UnitsRange hcl.Range `hcl:"units,attr_value_range"`
}

// compileBlock compiles b, rule r's budget_lease { }: a counting rule on
// one counter (key ["global"] or ["route"]), of an algorithm whose cost a
// lease can take in one op, counting requests, and units within its burst.
func compileBlock(c *rules.Compiler, r *rules.Rule, b *hcl.Block) {
	bb := &block{}
	if !c.DecodeInRule(b, bb) {
		return
	}
	if reason := unleasable(r); reason != "" {
		c.Errorf(b.DefRange, "budget_lease not used", "rule %q: %s; remove budget_lease (docs/policy.md, \"Budget leases\")", r.Name, reason)
		return
	}
	burst, what := r.Burst, "burst"
	if !r.Algorithm.Spec().Burst {
		burst, what = r.Limit, "limit"
	}
	top := min(burst, MaxUnits)
	if bb.Units < 2 || bb.Units > top {
		c.Errorf(bb.UnitsRange, "Invalid units", "units must be between 2 and %d (the rule's %s, at most %d), got %d: a lease of one unit is a call a request, and a lease the counter cannot hold is never allowed", top, what, MaxUnits, bb.Units)
		return
	}
	r.AddStage(&Stage{units: uint16(bb.Units)})
}

// unleasable says why r's ops cannot be leased, "" when they can.
func unleasable(r *rules.Rule) string {
	switch {
	case !r.Counts():
		return "it counts nothing (action deny or skip)"
	case r.InFlight():
		return "a concurrency rule's leases are requests in flight, each given back"
	case r.Distinct != nil:
		return "count_distinct counts values, which no node can spend ahead"
	case r.Algorithm == rules.SlidingLog:
		return "a sliding log keeps the instant of every unit, which a lease would move"
	case r.Count != rules.CountRequests:
		return "only count = \"requests\" is leased: an attempt or a failure is charged whatever the outcome, which a node cannot take back"
	case len(r.KeyNames) != 1 || (r.KeyNames[0] != "global" && r.KeyNames[0] != "route"):
		return "a lease is for one hot counter, key = [\"global\"] or [\"route\"]: a client's key is spread over the store's slots already"
	}
	return ""
}

var _ rules.Shaper = (*Stage)(nil)
