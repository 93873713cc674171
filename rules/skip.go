package rules

import (
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Exemptions: action = "skip" (docs/policy.md, "action"). A skip rule
// counts nothing and refuses nothing; when it matches a request (its
// methods, paths and hosts, and every when { } condition), the rules it
// lists do not apply to that request at all, as if they had not matched:
// no count, no refusal, no bare answer, recorded as OutcomeExempt. The
// office network that must never meet the login limits, the monitoring
// probe, the partner with its own contract:
//
//	rule "office" {
//	  action = "skip"
//	  skip   = ["login-per-ip", "login-per-account"]
//	  when { ip_in = ["10.0.0.0/8", "2001:db8::/32"] }
//	}
//
// Skip rules are decided before every other rule, so one applies wherever it
// is written. skip = ["*"] skips every rule that is not a skip rule, the
// sensitive ones too; a skip rule is never skipped itself, so no order or
// cycle among them can matter.

// skipSpec is a skip rule's skip = [...], compiled.
type skipSpec struct {
	// all is skip = ["*"]; allAt is where the "*" is written.
	all   bool
	allAt hcl.Range
	// targets are the indexes in Policy.Rules of the rules skipped.
	targets []int
}

// skipState is a request's exemptions, in its Scratch: which rules a
// matching skip rule exempts it from.
type skipState struct {
	// on is true when a skip rule matched this request.
	on bool
	// rule[i] is true when Policy.Rules[i] is skipped. Sized to the policy
	// once per pooled Scratch and policy size, so deciding allocates
	// nothing.
	rule []bool
}

// counts reports whether the rule counts requests: not action = "deny"
// (which refuses every match) nor "skip" (which exempts from other rules).
func (r *Rule) counts() bool { return r.Action != ActionDeny && r.Action != ActionSkip }

// uncounted says why a rule that counts nothing takes no limit.
func uncounted(a Action) string {
	if a == ActionSkip {
		return `action = "skip" counts nothing`
	}
	return `action = "deny" refuses every match`
}

// skipAttr compiles rb's skip = [...] into r. The rule names are checked
// once every rule is known (resolveSkips), since a skip rule may come
// before the rules it skips.
func (c *Compiler) skipAttr(rb *ruleBlock, r *Rule) {
	given := rb.Skip != nil && !IsNull(rb.Skip)
	switch {
	case r.Action == ActionSkip && !given:
		c.Errorf(rb.ActionRange, "Missing skip", "rule %q has action = \"skip\" but no skip: list the rules its requests are exempt from, such as skip = [\"login-per-ip\"], or skip = [\"*\"] for every other rule", rb.Name)
		return
	case r.Action == ActionLimit && rb.Action != nil && *rb.Action != "limit":
		return // an invalid action, reported already
	case r.Action != ActionSkip && given:
		c.Errorf(rb.SkipRange, "Skip not used", "skip lists the rules an action = \"skip\" rule exempts its requests from; add action = \"skip\" or remove skip")
		return
	case !given:
		return
	}
	if rb.DryRun != nil && *rb.DryRun {
		c.Errorf(rb.DryRunRange, "Dry run not used", "action = \"skip\" refuses nothing, so dry_run has nothing to hold back; a skip rule always skips (remove dry_run, or the skip rule)")
	}
	errs := c.errorCount()
	names, rngs := c.StringList(rb.Skip, "skip")
	if c.errorsSince(errs) {
		return
	}
	if len(names) == 0 {
		c.Errorf(rb.Skip.Range(), "Empty skip", "skip needs at least one rule name, or [\"*\"] for every other rule")
		return
	}
	sp := &skipSpec{}
	seen := map[string]hcl.Range{}
	for i, n := range names {
		switch prev, dup := seen[n]; {
		case n == "*" && len(names) > 1:
			c.Errorf(rngs[i], "Invalid skip", "\"*\" already skips every other rule; list either \"*\" or rule names")
			continue
		case n == "*":
			sp.all, sp.allAt = true, rngs[i]
			continue
		case dup:
			c.Errorf(rngs[i], "Duplicate rule in skip", "%q is already listed at %s", n, prev)
			continue
		case n == rb.Name:
			c.Errorf(rngs[i], "Invalid skip", "rule %q cannot skip itself", n)
			continue
		}
		seen[n] = rngs[i]
	}
	r.skip = sp
}

// resolveSkips checks every skip rule's names now that every rule is
// known, turns them into rule indexes, and records the skip rules in p.
// blocks are all the rule blocks, compiled or not: a skip rule with an
// error of its own still has its names checked, and a name whose rule has
// an error of its own is not unknown. skipAttr reported the rest (the list's
// shape, "*" with names, a rule skipping itself, a name twice).
func (c *Compiler) resolveSkips(blocks []ruleBlock, p *Policy) {
	var all []string
	isSkip := map[string]bool{}
	for i := range blocks {
		all = append(all, blocks[i].Name)
		isSkip[blocks[i].Name] = blocks[i].Action != nil && *blocks[i].Action == "skip"
	}
	for i := range blocks {
		rb := &blocks[i]
		if !isSkip[rb.Name] || rb.Skip == nil || IsNull(rb.Skip) {
			continue
		}
		r := p.Rule(rb.Name)
		if r != nil && r.skip == nil {
			r = nil // a rule of this name compiled, but not this block (a duplicate)
		}
		items, _ := hcl.ExprList(rb.Skip)
		seen := map[string]bool{}
		for _, it := range items {
			v, d := it.Value(nil)
			if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
				continue
			}
			n := v.AsString()
			if n == "*" || n == rb.Name || seen[n] {
				continue
			}
			seen[n] = true
			target := p.Rule(n)
			switch _, known := isSkip[n]; {
			case !known:
				c.Errorf(it.Range(), "Unknown rule", "no rule is named %q.%s", n, suggest(n, all))
			case isSkip[n]:
				c.Errorf(it.Range(), "Invalid skip", "%q is a skip rule itself, and skip rules are never skipped (each applies on its own)", n)
			case target != nil && r != nil:
				r.skip.targets = append(r.skip.targets, target.Index)
			}
		}
		if r == nil {
			continue
		}
		p.skipRules = append(p.skipRules, r)
		if r.skip.all {
			var sensitive []string
			for _, o := range p.Rules {
				if o.Sensitive && o.Action != ActionSkip {
					sensitive = append(sensitive, strconv.Quote(o.Name))
				}
			}
			if len(sensitive) > 0 {
				c.Warnf(r.skip.allAt, "Skips sensitive rules", "skip = [\"*\"] exempts the requests rule %q matches from every rule, the sensitive %s too; name the rules to skip if that is not meant", r.Name, strings.Join(sensitive, ", "))
			}
		}
		if len(r.Conditions) == 0 && len(r.methods) == 0 && r.anyPath && len(r.hosts) == 0 {
			c.Warnf(r.DefRange, "Skips every request", "rule %q matches every request, so the rules it skips never apply; say who is exempt with when { ip_in = [...] } or narrow it with paths, methods or hosts", r.Name)
		}
	}
}

// exemptions decides p's skip rules for req before any other rule, so a
// skip rule applies wherever it is written. A skip rule that matches (its
// matcher, and every condition Present: one that cannot be decided exempts
// nobody) is recorded as an allowing match, marks the rules it skips in s,
// and makes the answer bare when it is sensitive. It does not allocate once
// s has been sized for p.
func (s *Scratch) exemptions(p *Policy, req *Request, d *Decision) {
	s.skips.on = false
	if len(p.skipRules) == 0 {
		return
	}
	if cap(s.skips.rule) < len(p.Rules) {
		s.skips.rule = make([]bool, len(p.Rules)) // once per pooled Scratch and policy size
	}
	s.skips.rule = s.skips.rule[:len(p.Rules)]
	clear(s.skips.rule)
	for _, r := range p.skipRules {
		if !r.matches(req) || r.conditionsEvery(req, s) != Present {
			continue
		}
		s.skips.on = true
		if r.Sensitive {
			d.Sensitive = true
		}
		s.Matches = append(s.Matches, Match{Rule: r, Op: -1, CeilingOp: -1, Outcome: OutcomeAllow, Enforce: true})
		if r.skip.all {
			for i := range s.skips.rule {
				s.skips.rule[i] = true
			}
			continue
		}
		for _, i := range r.skip.targets {
			s.skips.rule[i] = true
		}
	}
}

// exempt reports whether Check passes over r, a rule that matched req: a
// skip rule (exemptions decided it), or a rule a matching skip rule exempts
// the request from, which is recorded as OutcomeExempt (no op, no count,
// no refusal) without evaluating its conditions or its key.
func (s *Scratch) exempt(r *Rule) bool {
	if r.Action == ActionSkip {
		return true
	}
	if !s.skips.on || !s.skips.rule[r.Index] {
		return false
	}
	s.Matches = append(s.Matches, Match{Rule: r, Op: -1, CeilingOp: -1, Outcome: OutcomeExempt})
	return true
}
