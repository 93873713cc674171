package rules

import (
	"slices"
	"strings"
	"time"
)

// Dry-run toggles are an operator's time-boxed "dry-run this rule now"
// (POST /admin/dry-run, edge dry-run): a rule, or the whole node ("*"),
// decided as if it enforced but refusing nothing until the toggle's expiry,
// as a policy's dry_run = true would (envoy's ShadowMode, at run time).
//
// A toggle only ever turns dry-run on. Turning it "off" removes the toggle
// and never overrides dry-run that the policy (dry_run = true, on a rule or
// the edge block) or the -dry-run flag asks for: a file under review says
// what a rule does, and a reload is how that changes.
//
// Toggles are keyed by the hash of the rule's name (Rule.ID), so they
// survive a reload that keeps the name, and a renamed rule is a new rule
// without the old one's toggle. A toggle for a name the policy lacks
// simply matches nothing (a fleet's nodes may briefly serve different
// policies during a rollout).

// NodeDryRun is the rule name of a node-wide toggle.
const NodeDryRun = "*"

// DryRunToggle is one time-boxed dry-run toggle.
type DryRunToggle struct {
	// Rule is the rule's name, or NodeDryRun for every rule.
	Rule string
	// Until is when the toggle expires, by the request clock (the now
	// passed to Check): at and after Until it no longer applies.
	Until time.Time
	// Reason and Actor say why and who, for the admin API and the logs.
	Reason, Actor string
}

// dryRuns is an immutable set of toggles; a change copies it (the hot path
// reads it through one atomic load and takes no lock).
type dryRuns struct {
	node    DryRunToggle // Rule is "" without a node-wide toggle
	hasNode bool
	rules   map[[8]byte]DryRunToggle
}

// ruleDry reports whether a toggle puts rule id in dry-run at now. It
// allocates nothing (an [8]byte map key).
func (d *dryRuns) ruleDry(id [8]byte, now time.Time) bool {
	if d == nil || len(d.rules) == 0 {
		return false
	}
	t, ok := d.rules[id]
	return ok && now.Before(t.Until)
}

// nodeDry reports whether the node-wide toggle is on at now.
func (d *dryRuns) nodeDry(now time.Time) bool {
	return d != nil && d.hasNode && now.Before(d.node.Until)
}

// SetRuleDryRun sets (on) or removes (off) the dry-run toggle of the rule
// named name, or of the whole node for NodeDryRun, expiring at until (by the
// request clock). Off removes the toggle only: the policy's dry_run and the
// -dry-run flag stay as they are. Safe for concurrent use; changes are
// copy-on-write.
func (e *Engine) SetRuleDryRun(name string, on bool, until time.Time, reason, actor string) {
	e.dryMu.Lock()
	defer e.dryMu.Unlock()
	ts := e.dryRunToggles()
	ts = slices.DeleteFunc(ts, func(t DryRunToggle) bool { return t.Rule == name })
	if on {
		ts = append(ts, DryRunToggle{Rule: name, Until: until, Reason: reason, Actor: actor})
	}
	e.dry.Store(buildDryRuns(ts))
}

// ReplaceDryRuns replaces every toggle with ts (a fleet's shared set, read
// from Redis). A later entry for a name wins.
func (e *Engine) ReplaceDryRuns(ts []DryRunToggle) {
	e.dryMu.Lock()
	defer e.dryMu.Unlock()
	e.dry.Store(buildDryRuns(ts))
}

// DryRunToggles returns the toggles set, expired ones included (they no
// longer apply), sorted by rule name.
func (e *Engine) DryRunToggles() []DryRunToggle {
	ts := e.dryRunToggles()
	slices.SortFunc(ts, func(a, b DryRunToggle) int { return strings.Compare(a.Rule, b.Rule) })
	return ts
}

func (e *Engine) dryRunToggles() []DryRunToggle {
	d := e.dry.Load()
	if d == nil {
		return nil
	}
	ts := make([]DryRunToggle, 0, len(d.rules)+1)
	if d.hasNode {
		ts = append(ts, d.node)
	}
	for _, t := range d.rules {
		ts = append(ts, t)
	}
	return ts
}

// RuleDryRun returns the toggle that puts r in dry-run at now, if any (the
// node-wide toggle does not count here: see NodeDryRunToggle).
func (e *Engine) RuleDryRun(r *Rule, now time.Time) (DryRunToggle, bool) {
	d := e.dry.Load()
	if !d.ruleDry(r.ID, now) {
		return DryRunToggle{}, false
	}
	return d.rules[r.ID], true
}

// NodeDryRunToggle returns the node-wide toggle when it is on at now.
func (e *Engine) NodeDryRunToggle(now time.Time) (DryRunToggle, bool) {
	d := e.dry.Load()
	if !d.nodeDry(now) {
		return DryRunToggle{}, false
	}
	return d.node, true
}

// DryRunAt reports whether the whole node is in dry-run at now, by the
// -dry-run flag (SetDryRun) or the node-wide toggle; the policy's own
// dry_run is the caller's to add (Policy.DryRun).
func (e *Engine) DryRunAt(now time.Time) bool {
	return e.dryRun.Load() || e.dry.Load().nodeDry(now)
}

// RuleEnforces reports whether r refuses at now under p: false when the
// rule, the policy, the flag or a toggle puts it in dry-run, or its action
// is "log". It is the Enforce of r's match in Check.
func (e *Engine) RuleEnforces(p *Policy, r *Rule, now time.Time) bool {
	return !(p.DryRun || e.DryRunAt(now) || r.DryRun || r.Action == ActionLog || e.dry.Load().ruleDry(r.ID, now))
}

func buildDryRuns(ts []DryRunToggle) *dryRuns {
	if len(ts) == 0 {
		return nil
	}
	d := &dryRuns{rules: make(map[[8]byte]DryRunToggle, len(ts))}
	for _, t := range ts {
		if t.Rule == NodeDryRun {
			d.node, d.hasNode = t, true
			continue
		}
		d.rules[ruleID(t.Rule)] = t
	}
	return d
}
