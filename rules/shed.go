package rules

import "time"

// Load shedding (docs/policy.md, "Load shedding"). Owned by the shedding
// slice; see inflight.go for the lifecycle.

// sheds reports whether Check must run admission (admit) for p: it has a
// node in-flight ceiling or an adaptive rule.
func (p *Policy) sheds() bool { return false }

// admit decides whether the request may go to the origin now, given its
// priority (the highest of its matching rules') and the node's and the
// matching adaptive rules' in-flight counts; when it may, the local slots
// it takes are recorded in s (released by Settle or Release). false: shed
// it (Verdict Shed, d.RetryAfter set for an ordinary route).
func (e *Engine) admit(now time.Time, p *Policy, s *Scratch, d *Decision) bool {
	_ = now
	return true
}
