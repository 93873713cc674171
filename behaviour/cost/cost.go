// Package cost is the weighted cost of rule { } blocks (docs/policy.md,
// "Weighted costs"): a rule's request takes cost units instead of one, a
// constant or a request header's value clamped to 1..max_cost, and
// settle_from names a response header in which the origin says what the
// request really cost; the difference is charged (OpAdd, into debt) or
// refunded (OpRefund) on the rule's key once the origin has answered, in
// the one call Engine.Settle already makes for reset_on_success and
// count = "failures".
//
// It is a rules.Feature (builtin.Features lists it) whose three attributes
// compile, once all are read (Feature.RuleDone), to a Stage with a Shape
// phase (the op's Cost, before the main call) and, with settle_from, a
// Settle phase (docs/architecture.md, "The decision pipeline").
package cost

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/rules"
)

// Feature returns the weighted cost: cost, max_cost and settle_from on
// rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name: "cost",
		RuleAttrs: []rules.RuleAttrType{
			{Name: "cost", Compile: compileCost},
			{Name: "max_cost", Compile: compileMaxCost},
			{Name: "settle_from", Compile: compileSettleFrom},
		},
		RuleDone: finish,
	}
}

// Stage is a rule's cost, max_cost and settle_from. A rule without any of
// them has none (Of returns nil), and costs 1 with nothing settled.
type Stage struct {
	n          int64  // the constant cost (0: 1)
	header     []byte // the request header the cost is read from, nil: constant
	headerName string // the same, as written (MultiHeader)
	max        int64  // max_cost; 0 when no cost comes from outside the policy
	settleFrom []byte // the response header naming the real cost, nil: none
	slot       int    // the memo slot of the request's settle (settle.go)

	src *attrs // the attributes as written, until finish compiles them
}

// attrs are a rule's cost attributes as written, nil when absent.
type attrs struct {
	cost        hcl.Expression
	maxCost     *int64
	maxRange    hcl.Range
	settleFrom  *string
	settleRange hcl.Range
	broken      []string // attributes whose value did not decode
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "cost" }

// Of returns r's cost, or nil when r has none of cost, max_cost and
// settle_from. Its methods answer for a nil Stage too: a cost of 1, no
// header, no max_cost, nothing settled.
func Of(r *rules.Rule) *Stage {
	st, _ := rules.StageOf[*Stage](r)
	return st
}

// Cost returns the rule's constant cost (1 unless cost = N), or 0 when the
// cost is read from a request header (CostHeader).
func (c *Stage) Cost() int64 {
	switch {
	case c == nil:
		return 1
	case c.header != nil:
		return 0
	case c.n > 0:
		return c.n
	}
	return 1
}

// CostHeader returns the request header a rule's cost is read from, "" for
// a constant cost.
func (c *Stage) CostHeader() string {
	if c == nil {
		return ""
	}
	return c.headerName
}

// MaxCost returns the rule's max_cost, 0 when unset.
func (c *Stage) MaxCost() int64 {
	if c == nil {
		return 0
	}
	return c.max
}

// SettleFrom returns the response header the rule's real cost is read from
// after the origin answers, "" when none.
func (c *Stage) SettleFrom() string {
	if c == nil {
		return ""
	}
	return string(c.settleFrom)
}

// Shape sets the cost of m's op: its rule's for req (of). Its IP
// ceiling's op copies it.
func (c *Stage) Shape(req *rules.Request, s *rules.Scratch, m *rules.Match) {
	s.Ops[m.Op].Cost = c.of(req)
}

// stage returns r's cost stage, adding one the first time.
func stage(r *rules.Rule) *Stage {
	if c := Of(r); c != nil {
		return c
	}
	c := &Stage{src: &attrs{}}
	r.AddStage(c)
	return c
}

func compileCost(_ *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	stage(r).src.cost = attr.Expr
}

func compileMaxCost(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	a := stage(r).src
	decode(c, a, attr, &a.maxCost, &a.maxRange)
}

func compileSettleFrom(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	a := stage(r).src
	decode(c, a, attr, &a.settleFrom, &a.settleRange)
}

// decode decodes attr's value into *v as rules' own attributes are
// (gohcl's diagnostics), and its range into *rng; one that does not
// decode is left out (*v nil, attr named in a.broken), as
// rules.Compiler.Decode leaves out a rule's own.
func decode[T any](c *rules.Compiler, a *attrs, attr *hcl.Attribute, v **T, rng *hcl.Range) {
	if !c.Append(gohcl.DecodeExpression(attr.Expr, nil, v)) {
		*v = nil
		a.broken = append(a.broken, attr.Name)
	}
	*rng = attr.Expr.Range()
}
