package rules

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The known "NAME" { } block and a rule's exempt_known (known.go;
// docs/policy.md, "known").

// knownNamePrefix keeps a known block's counters apart from every rule's
// and budget's: its ID is BudgetID of this prefix and its name.
const knownNamePrefix = "\x00known\x00"

// knowns compiles the known blocks, in file order, before any rule: a
// rule's exempt_known names them. A name seen twice is an error that
// points at the first.
func (c *Compiler) knowns(blocks []knownBlock) {
	c.knownNames = map[string]hcl.Range{}
	var requiring []knownRequires
	for i := range blocks {
		kb := &blocks[i]
		if prev, dup := c.knownNames[kb.Name]; dup {
			c.Errorf(kb.NameRange, "Duplicate known block", "a known block named %q is already defined at %s", kb.Name, prev)
			continue
		}
		c.knownNames[kb.Name] = kb.DefRange
		if k := c.known(kb); k != nil {
			k.index = len(c.p.knowns)
			c.p.knowns = append(c.p.knowns, k)
			if !IsNull(kb.Requires) {
				requiring = append(requiring, knownRequires{k: k, expr: kb.Requires})
			}
		}
	}
	for _, kr := range requiring {
		c.knownRequires(kr.k, kr.expr)
	}
	c.requiresCycles(requiring)
}

// knownRequires is a known block and its requires, compiled once every
// block is: it may name a block defined after it.
type knownRequires struct {
	k    *Known
	expr hcl.Expression
}

// knownRequires compiles k's requires: known blocks, each once, other
// than k, whose marker for the request's own values must be live for a
// success to record k's (known.go).
func (c *Compiler) knownRequires(k *Known, expr hcl.Expression) {
	names, rngs := c.StringList(expr, "requires")
	k.requires = c.knownList(names, rngs, "requires", k.Name)
}

// knownList returns the compiled known blocks names lists (attr: the
// attribute they are written in), each once, marking them used; a name
// that is no block, one named twice, or self (a block's own name, "" for
// none) is an error.
func (c *Compiler) knownList(names []string, rngs []hcl.Range, attr, self string) []*Known {
	var out []*Known
	for i, n := range names {
		switch _, declared := c.knownNames[n]; {
		case !declared:
			c.Errorf(rngs[i], "Unknown known block", "%q is not a known block; %s", n, c.knownWant(n))
			continue
		case self != "" && n == self:
			c.Errorf(rngs[i], "Invalid "+attr, "known %q cannot require itself: its marker would be needed to record it", n)
			continue
		}
		k := c.knownNamed(n)
		if k == nil {
			continue // its own errors are reported
		}
		if slices.Contains(out, k) {
			c.Errorf(rngs[i], "Duplicate known block", "%q appears twice in %s", n, attr)
			continue
		}
		k.used = true
		out = append(out, k)
	}
	return out
}

// requiresCycles refuses known blocks that require each other, through
// any chain: none of them could ever be recorded first.
func (c *Compiler) requiresCycles(requiring []knownRequires) {
	for _, kr := range requiring {
		if path := requiresPath(kr.k, kr.k, nil); path != nil {
			c.Errorf(kr.expr.Range(), "Circular requires", "known %q requires %s again: none of them could ever be recorded first", kr.k.Name, strings.Join(path, ", which requires "))
		}
	}
}

// requiresPath returns the names of a chain of requires from k that leads
// back to start, or nil.
func requiresPath(start, k *Known, seen []*Known) []string {
	for _, r := range k.requires {
		if r == start {
			return []string{fmt.Sprintf("%q", r.Name)}
		}
		if slices.Contains(seen, r) {
			continue
		}
		if path := requiresPath(start, r, append(seen, r)); path != nil {
			return append([]string{fmt.Sprintf("%q", r.Name)}, path...)
		}
	}
	return nil
}

// knownWant lists the known blocks for a diagnostic naming n, which is not
// one, with a suggestion.
func (c *Compiler) knownWant(n string) string {
	all := make([]string, 0, len(c.knownNames))
	for name := range c.knownNames {
		all = append(all, name)
	}
	sort.Strings(all)
	if len(all) == 0 {
		return "no known block is defined"
	}
	return "want one of " + strings.Join(all, ", ") + "." + suggest(n, all)
}

// known compiles one known block; nil after an error.
func (c *Compiler) known(kb *knownBlock) *Known {
	errs := c.errorCount()
	k := &Known{Name: kb.Name, ID: BudgetID(knownNamePrefix + kb.Name), DefRange: kb.DefRange}
	// The block matches and groups addresses as a rule of the edge's
	// defaults does; it is never one of the policy's rules.
	k.match = &Rule{Name: kb.Name, ID: k.ID, DefRange: kb.DefRange, ceilingChar: -1, IPv4Prefix: c.p.IPv4Prefix, IPv6Prefix: c.p.IPv6Prefix}
	if kb.Name == "" {
		c.Errorf(kb.NameRange, "Invalid known name", "a known block needs a non-empty name")
	}
	c.matcher(kb.Methods, kb.Paths, kb.Hosts, k.match)

	names, rngs := c.StringList(kb.By, "by")
	if len(names) == 0 && (kb.By == nil || IsNull(kb.By) || !c.errorsSince(errs)) {
		c.Errorf(kb.DefRange, "Missing by", "known %q needs by = [...], the characteristics that together recognise a caller, such as [\"visitor\", \"account\"] (a browser that logged in to that account) or [\"phone\"] (a phone whose code was verified)", kb.Name)
	}
	seen := map[string]bool{}
	for i, n := range names {
		ch, tag, shared := c.characteristic(n, rngs[i], k.match)
		switch {
		case ch == nil:
			continue
		case seen[n]:
			c.Errorf(rngs[i], "Duplicate characteristic", "%q appears twice in by", n)
			continue
		case shared:
			c.Errorf(rngs[i], "Invalid by", "%q is the same for every request: it would make everyone known", n)
			continue
		}
		seen[n] = true
		k.by, k.tags = append(k.by, ch), append(k.tags, tag)
	}

	if kb.For == nil {
		c.Errorf(kb.DefRange, "Missing for", "known %q needs for, how long after its last success a caller is known, such as \"30d\"", kb.Name)
	} else if d, err := ParseDuration(*kb.For); err != nil || d <= 0 || d%time.Microsecond != 0 {
		c.Errorf(kb.ForRange, "Invalid for", "%q is not a positive duration such as \"30d\"", *kb.For)
	} else if d > MaxKnownVisitors {
		c.Errorf(kb.ForRange, "for too long", "%q: a caller is known for at most %s after its last success", *kb.For, "366d")
	} else {
		k.forUS = d.Microseconds()
	}
	k.success = c.IntList(kb.SuccessStatus, "success_status")
	if k.success == nil {
		k.success = []int{200, 201, 204}
	}
	budget := "(known " + kb.Name + ")"
	switch {
	case kb.MaxKeys == nil:
		k.budget = c.KeyBudget(k.ID, budget)
	case *kb.MaxKeys < 1 || *kb.MaxKeys > MaxKeysLimit:
		c.Errorf(kb.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", MaxKeysLimit, *kb.MaxKeys)
	default:
		k.budget = &Budget{ID: k.ID, Name: budget, MaxKeys: *kb.MaxKeys, fixed: true}
		c.p.budgets = append(c.p.budgets, k.budget)
	}
	if c.errorsSince(errs) {
		return nil
	}
	return k
}

// exemptKnown compiles a rule's exempt_known: the known blocks whose
// callers the rule does not hold to what they share with others.
func (c *Compiler) exemptKnown(rb *ruleBlock, r *Rule) {
	names, rngs := c.StringList(rb.ExemptKnown, "exempt_known")
	if len(names) == 0 {
		return
	}
	switch {
	case !r.counts():
		c.Errorf(rb.ExemptKnown.Range(), "exempt_known not used", "%s; remove exempt_known", uncounted(r.Action))
		return
	case r.Concurrency:
		c.Errorf(rb.ExemptKnown.Range(), "exempt_known not used", "a known caller's requests are at the origin all the same: a concurrency limit holds everyone; remove exempt_known")
		return
	}
	r.exemptKnown = c.knownList(names, rngs, "exempt_known", "")
}

// knownNamed returns the compiled known block named n, or nil.
func (c *Compiler) knownNamed(n string) *Known {
	for _, k := range c.p.knowns {
		if k.Name == n {
			return k
		}
	}
	return nil
}

// unusedKnowns warns about known blocks no rule's exempt_known names:
// each still records its markers (a store op per success) for nothing.
func (c *Compiler) unusedKnowns() {
	for _, k := range c.p.knowns {
		if !k.used {
			c.Warnf(k.DefRange, "Unused known block", "no rule names %q in exempt_known, so the callers it recognises are exempt from nothing; its markers are written all the same", k.Name)
		}
	}
}
