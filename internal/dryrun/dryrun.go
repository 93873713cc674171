// Package dryrun is a node's run-time dry-run toggles (docs/operations.md,
// "Dry-run toggles"): an operator's time-boxed "dry-run this rule now"
// (POST /admin/dry-run, edge dry-run), for a rule or the whole node
// (Node), under which rules' Engine decides the rule as if it enforced but
// refuses nothing until the toggle's expiry, as a policy's dry_run = true
// would (envoy's ShadowMode, at run time).
//
// A toggle only ever turns dry-run on. Turning it "off" removes the toggle
// and never overrides dry-run that the policy (dry_run = true, on a rule or
// the edge block) or the -dry-run flag asks for: a file under review says
// what a rule does, and a reload is how that changes.
//
// Toggles are keyed by the rule's name, so they survive a reload that
// keeps the name, and a renamed rule is a new rule without the old one's
// toggle. A toggle for a name the policy lacks simply matches nothing (a
// fleet's nodes may briefly serve different policies during a rollout).
//
// Toggles is safe for concurrent use: a change copies the set under a
// lock, and the request path reads it with one atomic load (Load) and no
// lock.
package dryrun

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Node is the rule name of a node-wide toggle.
const Node = "*"

// Toggle is one time-boxed dry-run toggle.
type Toggle struct {
	// Rule is the rule's name, or Node for every rule.
	Rule string
	// Until is when the toggle expires, by the request clock (the now
	// rules' Engine decides a request at): at and after Until it no
	// longer applies.
	Until time.Time
	// Reason and Actor say why and who, for the admin API and the logs.
	Reason, Actor string
}

// Toggles is a node's set of toggles. The zero value holds none.
type Toggles struct {
	mu  sync.Mutex // orders the writers
	cur atomic.Pointer[Set]
}

// Set is an immutable set of toggles, as Toggles.Load returns it; nil
// holds none.
type Set struct {
	node    Toggle // Rule is "" without a node-wide toggle
	hasNode bool
	rules   map[string]Toggle
}

// Set sets (on) or removes (off) the toggle of the rule named name, or of
// the whole node for Node, expiring at until (by the request clock). Off
// removes the toggle only: the policy's dry_run and the -dry-run flag stay
// as they are.
func (t *Toggles) Set(name string, on bool, until time.Time, reason, actor string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := slices.DeleteFunc(t.Load().all(), func(x Toggle) bool { return x.Rule == name })
	if on {
		ts = append(ts, Toggle{Rule: name, Until: until, Reason: reason, Actor: actor})
	}
	t.cur.Store(build(ts))
}

// Replace replaces every toggle with ts (a fleet's shared set, read from
// Redis). A later entry for a name wins.
func (t *Toggles) Replace(ts []Toggle) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur.Store(build(ts))
}

// List returns the toggles set, expired ones included (they no longer
// apply), sorted by rule name.
func (t *Toggles) List() []Toggle {
	ts := t.Load().all()
	slices.SortFunc(ts, func(a, b Toggle) int { return strings.Compare(a.Rule, b.Rule) })
	return ts
}

// Rule returns the toggle that puts the rule named name in dry-run at now,
// if any (the node-wide toggle does not count here: Node).
func (t *Toggles) Rule(name string, now time.Time) (Toggle, bool) {
	d := t.Load()
	if !d.RuleOn(name, now) {
		return Toggle{}, false
	}
	return d.rules[name], true
}

// Node returns the node-wide toggle when it is on at now.
func (t *Toggles) Node(now time.Time) (Toggle, bool) {
	d := t.Load()
	if !d.NodeOn(now) {
		return Toggle{}, false
	}
	return d.node, true
}

// Load returns the toggles set now, for the request path: one atomic load,
// nil when none is set.
func (t *Toggles) Load() *Set { return t.cur.Load() }

// RuleOn reports whether a toggle puts the rule named name in dry-run at
// now. It allocates nothing.
func (d *Set) RuleOn(name string, now time.Time) bool {
	if d == nil || len(d.rules) == 0 {
		return false
	}
	t, ok := d.rules[name]
	return ok && now.Before(t.Until)
}

// NodeOn reports whether the node-wide toggle is on at now.
func (d *Set) NodeOn(now time.Time) bool {
	return d != nil && d.hasNode && now.Before(d.node.Until)
}

// all returns a new slice of d's toggles, in no order.
func (d *Set) all() []Toggle {
	if d == nil {
		return nil
	}
	ts := make([]Toggle, 0, len(d.rules)+1)
	if d.hasNode {
		ts = append(ts, d.node)
	}
	for _, t := range d.rules {
		ts = append(ts, t)
	}
	return ts
}

func build(ts []Toggle) *Set {
	if len(ts) == 0 {
		return nil
	}
	d := &Set{rules: make(map[string]Toggle, len(ts))}
	for _, t := range ts {
		if t.Rule == Node {
			d.node, d.hasNode = t, true
			continue
		}
		d.rules[t.Rule] = t
	}
	return d
}
