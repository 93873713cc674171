package cost

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/internal/httpsyntax"
	"github.com/edge-gateway/edge/rules"
)

// finish compiles cost, max_cost and settle_from together once the rule's
// attributes are read: it reads the rule's numbers, its count mode and
// reset_on_success.
func finish(c *rules.Compiler, r *rules.Rule) {
	st := Of(r)
	if st == nil || st.src == nil {
		return
	}
	a := st.src
	st.src = nil
	costSet := a.cost != nil && !rules.IsNull(a.cost)
	if !costSet && a.maxCost == nil && a.settleFrom == nil {
		return
	}
	p := report{c: c, def: r.DefRange, broken: a.broken}
	if r.InFlight() {
		st.refuseInFlight(p, a, r, costSet)
		return
	}
	if !counts(r) || r.Distinct != nil {
		rng := a.maxRange
		switch {
		case costSet:
			rng = a.cost.Range()
		case a.settleFrom != nil:
			rng = a.settleRange
		}
		why := "a count_distinct rule counts one value per request, whatever it costs"
		if !counts(r) {
			why = uncounted(r.Action) + ", so it charges no cost"
		}
		p.errorf(rng, "cost not used", "%s; remove cost, max_cost and settle_from", why)
		return
	}
	capacity, what := capacity(r)
	if costSet {
		if !st.value(c, a.cost) {
			return
		}
		if st.header == nil && capacity > 0 && st.n > capacity {
			p.errorf(a.cost.Range(), "cost too high", "cost %d is above the rule's %s of %d: no request could ever be admitted", st.n, what, capacity)
			return
		}
	}
	if a.settleFrom != nil && !st.settle(c, p, a, r) {
		return
	}
	if st.maxCost(p, a, r, capacity, what) && st.settleFrom != nil && c.Policy().DecideListen != "" {
		// The edge never sees the origin's answer there, as under
		// reset_on_success (node/decide.go).
		c.Warnf(r.DefRange, "Rule needs the origin's answer under decide_listen",
			"rule %q has settle_from, which needs the origin's answer; the decision-only listener never sees it, so a request it counts there is charged its cost (the estimate) and never settled (docs/policy.md, \"Weighted costs\")", r.Name)
	}
}

// refuseInFlight reports each cost attribute of a concurrency rule, at the
// attribute: a request is one request in flight.
func (c *Stage) refuseInFlight(p report, a *attrs, r *rules.Rule, costSet bool) {
	refuse := func(rng hcl.Range, attr, why string) {
		p.errorf(rng, attr+" not used", "rule %q is a concurrency rule (algorithm = \"concurrency\"): %s; remove %s", r.Name, why, attr)
	}
	if costSet {
		refuse(a.cost.Range(), "cost", "every request is one request in flight")
	}
	if a.maxCost != nil {
		refuse(a.maxRange, "max_cost", "every request is one request in flight")
	}
	if a.settleFrom != nil {
		refuse(a.settleRange, "settle_from", "what the origin answers gives the slot back, whatever it costs")
	}
}

// settle compiles settle_from: the response header, which the gateway then
// strips, and the Settle phase that reads it. It reports false after an
// error.
func (c *Stage) settle(cc *rules.Compiler, p report, a *attrs, r *rules.Rule) bool {
	name := strings.TrimSpace(*a.settleFrom)
	switch {
	case !httpsyntax.IsToken(name):
		p.errorf(a.settleRange, "Invalid settle_from", "%q is not a header name; write the response header the origin names the real cost in, such as \"X-Actual-Cost\"", *a.settleFrom)
		return false
	case r.Count == rules.CountFailures:
		p.errorf(a.settleRange, "settle_from with count = \"failures\"", "count = \"failures\" already settles each request after the origin answers (a failure keeps its charge, anything else is refunded); remove one of them")
		return false
	case r.ResetOnSuccess:
		p.errorf(a.settleRange, "settle_from with reset_on_success", "reset_on_success clears the counter after a success, which leaves nothing to settle; remove one of them")
		return false
	}
	c.settleFrom = []byte(name)
	c.slot = cc.Slot("cost.settle")
	cc.ReadsResponseHeader(c.settleFrom)
	r.AddStage(settler{c})
	return true
}

// maxCost compiles max_cost, which a cost read from outside the policy
// (a request header, settle_from) needs: at least 1, at most the rule's
// capacity, and not below a constant cost. It reports false after an
// error.
func (c *Stage) maxCost(p report, a *attrs, r *rules.Rule, capacity int64, what string) bool {
	needMax := c.header != nil || c.settleFrom != nil
	if a.maxCost == nil {
		if needMax {
			p.errorf(r.DefRange, "Missing max_cost", "rule %q reads a cost from outside the policy (%s); set max_cost, the most one request may be charged, at most the rule's %s of %d", r.Name, c.source(), what, capacity)
		}
		return !needMax
	}
	m := *a.maxCost
	switch {
	case !needMax:
		p.errorf(a.maxRange, "max_cost not used", "max_cost caps a cost read from a request header (cost = \"header:NAME\") or from settle_from; a constant cost needs none")
		return false
	case m < 1:
		p.errorf(a.maxRange, "Invalid max_cost", "max_cost must be at least 1, got %d", m)
		return false
	case capacity > 0 && m > capacity:
		p.errorf(a.maxRange, "max_cost too high", "max_cost %d is above the rule's %s of %d: a request that costs it could never be admitted", m, what, capacity)
		return false
	case c.header == nil && m < c.Cost():
		p.errorf(a.maxRange, "max_cost too low", "max_cost %d is below the rule's cost of %d", m, c.Cost())
		return false
	}
	c.max = m
	return true
}

func (c *Stage) source() string {
	if c.header != nil {
		return "cost = \"header:" + c.headerName + "\""
	}
	return "settle_from"
}

// value compiles cost = N or cost = "header:NAME". It reports false after
// an error.
func (c *Stage) value(cc *rules.Compiler, expr hcl.Expression) bool {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		cc.Append(diags)
		return false
	}
	rng := expr.Range()
	switch {
	case v.Type() == cty.Number && v.IsKnown() && !v.IsNull():
		bf := v.AsBigFloat()
		if !bf.IsInt() {
			cc.Errorf(rng, "Invalid cost", "cost must be a whole number of units, got %s", bf.Text('g', -1))
			return false
		}
		n, acc := bf.Int64()
		if acc != big.Exact || n < 1 || n > MaxCostLimit {
			cc.Errorf(rng, "Invalid cost", "cost must be between 1 and %d, got %s", int64(MaxCostLimit), bf.Text('g', -1))
			return false
		}
		c.n = n
		return true
	case v.Type() == cty.String && v.IsKnown() && !v.IsNull():
		s := v.AsString()
		name, found := strings.CutPrefix(s, "header:")
		if !found || !httpsyntax.IsToken(name) || len(name) > 256 {
			cc.Errorf(rng, "Invalid cost", "%q is not a cost; write a number of units (cost = 5) or the request header the client declares it in, as a key names one (cost = \"header:X-Cost\")", s)
			return false
		}
		c.header, c.headerName = []byte(name), name
		cc.ReadsHeader(name)
		return true
	}
	cc.Errorf(rng, "Invalid cost", "cost is a number (cost = 5) or \"header:NAME\" (cost = \"header:X-Cost\")")
	return false
}

// capacity is the most units one take of r can ever fit, and what it is:
// its burst for an algorithm of a burst (counter.Spec.Burst: gcra and the
// buckets), its limit for the windows.
func capacity(r *rules.Rule) (int64, string) {
	if r.Algorithm.Spec().Burst {
		return r.Burst, "burst"
	}
	return r.Limit, "limit"
}

// counts reports whether r counts: its action is not deny or skip.
func counts(r *rules.Rule) bool { return r.Action != rules.ActionDeny && r.Action != rules.ActionSkip }

// uncounted says why a rule that does not count charges nothing.
func uncounted(a rules.Action) string {
	if a == rules.ActionSkip {
		return `action = "skip" counts nothing`
	}
	return `action = "deny" refuses every match`
}

// report is the Compiler's Errorf for a rule some of whose cost attributes
// did not decode (broken): as rules does for its own attributes (its
// Compiler.Decode), what would only be said because they were left out is
// not, neither a diagnostic that names one nor one about the rule as a
// whole (at its def).
type report struct {
	c      *rules.Compiler
	def    hcl.Range
	broken []string
}

func (p report) errorf(rng hcl.Range, summary, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	if len(p.broken) > 0 && rng == p.def {
		return
	}
	for _, b := range p.broken {
		if hasWord(summary, b) || hasWord(detail, b) {
			return
		}
	}
	p.c.Errorf(rng, summary, "%s", detail)
}

// hasWord reports whether w is in s as a word of its own (max_cost, not
// max_cost_x).
func hasWord(s, w string) bool {
	word := func(b byte) bool {
		return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	for i := strings.Index(s, w); i >= 0; {
		if (i == 0 || !word(s[i-1])) && (i+len(w) == len(s) || !word(s[i+len(w)])) {
			return true
		}
		j := strings.Index(s[i+1:], w)
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}
