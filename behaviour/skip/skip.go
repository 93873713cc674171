package skip

import (
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/hclattr"
)

// Feature returns the exemptions: skip = [...] on rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name:       "skip",
		RuleAttrs:  []rules.RuleAttrType{{Name: "skip", Compile: compileSkip}},
		RuleDone:   finish,
		PolicyDone: resolve,
	}
}

// Stage is a skip rule's skip list.
type Stage struct {
	// All is skip = ["*"]: every rule that is not a skip rule.
	All bool
	// Targets are the rules skipped, when not All, in the order listed.
	Targets []*rules.Rule

	allAt hcl.Range // where the "*" is written
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "skip" }

// Of returns r's skip list, or nil when r is not a skip rule.
func Of(r *rules.Rule) *Stage {
	st, _ := rules.StageOf[*Stage](r)
	return st
}

// Exempt exempts the request, which the stage's rule matches, from the
// rules the list names.
func (sp *Stage) Exempt(s *rules.Scratch) {
	if sp.All {
		s.ExemptAll()
		return
	}
	for _, r := range sp.Targets {
		s.Exempt(r)
	}
}

// state is a compile's rules as the skip feature saw them, compiled or not
// (Feature.RuleDone runs for each), for resolve.
type state struct {
	names  []string        // every rule's name, in file order
	isSkip map[string]bool // whether each is a skip rule (action = "skip")
	lists  []list          // the skip rules' lists, in file order
}

// list is a skip rule's skip = [...] as written.
type list struct {
	rule *rules.Rule // the rule compiled for it: in Policy.Rules unless it has errors
	sp   *Stage
	expr hcl.Expression
}

func compileState(c *rules.Compiler) *state {
	return c.State("skip.rules", func() any { return &state{isSkip: map[string]bool{}} }).(*state)
}

// compileSkip compiles skip = [...] into a Stage on r. The rule names are
// checked once every rule is known (resolve), since a skip rule may come
// before the rules it skips.
func compileSkip(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	if rules.IsNull(attr.Expr) {
		return // not given: finish reports a skip rule without one
	}
	switch {
	case r.Action == rules.ActionLimit && invalidAction(c, r):
		return // reported already
	case r.Action != rules.ActionSkip:
		c.Errorf(attr.Range, "Skip not used", "skip lists the rules an action = \"skip\" rule exempts its requests from; add action = \"skip\" or remove skip")
		return
	}
	sp := &Stage{}
	r.AddStage(sp)
	compileState(c).lists = append(compileState(c).lists, list{rule: r, sp: sp, expr: attr.Expr})
	if r.DryRun {
		c.Errorf(c.RuleAttr(r, "dry_run").Expr.Range(), "Dry run not used", "action = \"skip\" refuses nothing, so dry_run has nothing to hold back; a skip rule always skips (remove dry_run, or the skip rule)")
	}
	errs := c.ErrorCount()
	names, rngs := c.StringList(attr.Expr, "skip")
	if c.ErrorCount() > errs {
		return
	}
	if len(names) == 0 {
		c.Errorf(attr.Expr.Range(), "Empty skip", "skip needs at least one rule name, or [\"*\"] for every other rule")
		return
	}
	seen := map[string]hcl.Range{}
	for i, n := range names {
		switch prev, dup := seen[n]; {
		case n == "*" && len(names) > 1:
			c.Errorf(rngs[i], "Invalid skip", "\"*\" already skips every other rule; list either \"*\" or rule names")
			continue
		case n == "*":
			sp.All, sp.allAt = true, rngs[i]
			continue
		case dup:
			c.Errorf(rngs[i], "Duplicate rule in skip", "%q is already listed at %s", n, prev)
			continue
		case n == r.Name:
			c.Errorf(rngs[i], "Invalid skip", "rule %q cannot skip itself", n)
			continue
		}
		seen[n] = rngs[i]
	}
}

// invalidAction reports whether r's block writes an action rules refused
// (r.Action is then ActionLimit): a value that is not "limit".
func invalidAction(c *rules.Compiler, r *rules.Rule) bool {
	a := c.RuleAttr(r, "action")
	if a == nil {
		return false
	}
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || !v.IsKnown() {
		return true
	}
	return !v.IsNull() && (v.Type() != cty.String || v.AsString() != "limit")
}

// finish notes r for resolve, and refuses a skip rule without a skip list.
func finish(c *rules.Compiler, r *rules.Rule) {
	st := compileState(c)
	st.names = append(st.names, r.Name)
	st.isSkip[r.Name] = r.Action == rules.ActionSkip
	if r.Action == rules.ActionSkip && Of(r) == nil {
		c.Errorf(c.RuleAttr(r, "action").Expr.Range(), "Missing skip", "rule %q has action = \"skip\" but no skip: list the rules its requests are exempt from, such as skip = [\"login-per-ip\"], or skip = [\"*\"] for every other rule", r.Name)
	}
}

// resolve checks every skip rule's names now that every rule is known, and
// turns them into its Stage's Targets. A skip rule with an error of its
// own still has its names checked, and a name whose rule has an error of
// its own is not unknown. compileSkip reported the rest (the list's shape,
// "*" with names, a rule skipping itself, a name twice).
func resolve(c *rules.Compiler) {
	st := compileState(c)
	p := c.Policy()
	for _, l := range st.lists {
		compiled := p.Rule(l.rule.Name) == l.rule
		items, _ := hcl.ExprList(l.expr)
		seen := map[string]bool{}
		for _, it := range items {
			v, d := it.Value(nil)
			if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
				continue
			}
			n := v.AsString()
			if n == "*" || n == l.rule.Name || seen[n] {
				continue
			}
			seen[n] = true
			target := p.Rule(n)
			switch isSkip, declared := st.isSkip[n]; {
			case !declared:
				c.Errorf(it.Range(), "Unknown rule", "no rule is named %q.%s", n, hclattr.Suggest(n, st.names))
			case isSkip:
				c.Errorf(it.Range(), "Invalid skip", "%q is a skip rule itself, and skip rules are never skipped (each applies on its own)", n)
			case target != nil && compiled:
				l.sp.Targets = append(l.sp.Targets, target)
			}
		}
		if compiled {
			warn(c, p, l.rule, l.sp)
		}
	}
}

// warn warns about a compiled skip rule whose exemptions may not be meant:
// one that skips sensitive rules by "*", or that matches every request.
func warn(c *rules.Compiler, p *rules.Policy, r *rules.Rule, sp *Stage) {
	if sp.All {
		var sensitive []string
		for _, o := range p.Rules {
			if o.Sensitive && o.Action != rules.ActionSkip {
				sensitive = append(sensitive, strconv.Quote(o.Name))
			}
		}
		if len(sensitive) > 0 {
			c.Warnf(sp.allAt, "Skips sensitive rules", "skip = [\"*\"] exempts the requests rule %q matches from every rule, the sensitive %s too; name the rules to skip if that is not meant", r.Name, strings.Join(sensitive, ", "))
		}
	}
	if len(r.Conditions) == 0 && len(r.Route.Methods()) == 0 && r.Route.Paths() == nil && len(r.Route.Hosts()) == 0 {
		c.Warnf(r.DefRange, "Skips every request", "rule %q matches every request, so the rules it skips never apply; say who is exempt with when { ip_in = [...] } or narrow it with paths, methods or hosts", r.Name)
	}
}
