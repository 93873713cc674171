package rules

import (
	"sync"
	"sync/atomic"
	"time"
)

// Admission (docs/policy.md, "Load shedding"): when the origin is
// saturated, the edge answers 503 rather than forwarding, and sheds the
// lower priorities first so that the routes that matter keep working. The
// signal is what is in flight, never what arrives: the node's own count of
// requests at the origin (load_shedding max_in_flight) and each matching
// node-local limit's Slots (LocalLimit: an adaptive rule's limiter,
// behaviour/adaptive). A request of priority p is admitted while each
// count is under its capacity × p's share (shed_at); critical's share is
// always 100%. Admission is the gate's last step, before the store call,
// so a shed request is counted by no rule; see inflight.go for how the
// slots taken here are given back. The policy language (a rule's
// priority, the edge block's load_shedding { }) is behaviour/shed's,
// which hands admission its numbers (Compiler.SetShedding); the counts
// live in the Engine, across reloads.

// DefaultShedRetryAfter is load_shedding's default retry_after: the
// Retry-After of a request shed on an ordinary route.
const DefaultShedRetryAfter = time.Second

// perMille is a share of 100%.
const perMille = 1000

// Shedding is what admission reads of load shedding. Its zero value, and
// DefaultShedding's, sheds only at an adaptive rule's limit itself,
// whatever the priority.
type Shedding struct {
	// MaxInFlight is the node's ceiling on the requests it has at the
	// origin (forwarded and not yet answered, or held by a queue); 0: none.
	MaxInFlight int64
	// Share is each priority's share of a capacity, per mille (shed_at):
	// a request of priority p is admitted while fewer than capacity ×
	// Share[p] ÷ 1000 (at least 1) are in flight. Share[PriorityCritical]
	// is always 1000, Share[PriorityUnset] Share[PriorityNormal]; without
	// load_shedding every share is 1000.
	Share [NumPriorities]int64
	// RetryAfter is the Retry-After of a request shed on an ordinary route
	// (default DefaultShedRetryAfter); a sensitive route's 503 is bare.
	RetryAfter time.Duration

	// ceiling is MaxInFlight × Share[p] ÷ 1000, at least 1, by priority.
	ceiling [NumPriorities]int64
	// local is set when a rule is a node-local limit (LocalLimit:
	// adaptive { }).
	local bool
}

// DefaultShedding is the Shedding of a policy without load_shedding { }:
// no node ceiling, every share 100%, Retry-After DefaultShedRetryAfter.
func DefaultShedding() Shedding {
	return Shedding{
		Share:      [NumPriorities]int64{perMille, perMille, perMille, perMille, perMille},
		RetryAfter: DefaultShedRetryAfter,
	}
}

// SetShedding sets what admission reads of load shedding: the feature that
// compiles the edge block's load_shedding { } (behaviour/shed) calls it
// from its PolicyDone. The shares of PriorityUnset and PriorityCritical
// are admission's own (Share).
func (c *Compiler) SetShedding(sh Shedding) {
	c.p.Shedding = Shedding{MaxInFlight: sh.MaxInFlight, Share: sh.Share, RetryAfter: sh.RetryAfter}
}

// shareOf returns p's share of a capacity, per mille.
func (ls *Shedding) shareOf(p Priority) int64 { return ls.Share[p] }

// finish fills what Check reads from the compiled settings.
func (ls *Shedding) finish(p *Policy) {
	ls.Share[PriorityUnset] = ls.Share[PriorityNormal]
	ls.Share[PriorityCritical] = perMille
	for i := range ls.ceiling {
		ls.ceiling[i] = max(ls.MaxInFlight*ls.Share[i]/perMille, 1)
	}
	ls.local = false
	for _, r := range p.Rules {
		if r.local != nil {
			ls.local = true
		}
	}
}

// sheds reports whether Check must run admission (admit) for p: it has a
// node in-flight ceiling or a node-local limit (an adaptive rule).
func (p *Policy) sheds() bool { return p.Shedding.MaxInFlight > 0 || p.Shedding.local }

// RequestPriority returns the priority of a request whose matching rules
// are matches: the highest any of them sets, PriorityNormal when none sets
// one.
func RequestPriority(matches []Match) Priority {
	p := PriorityUnset
	for i := range matches {
		p = max(p, matches[i].Rule.Priority)
	}
	if p == PriorityUnset {
		return PriorityNormal
	}
	return p
}

// admit decides whether the request may go to the origin now, given its
// priority (the highest of its matching rules') and the node's and the
// matching node-local limits' (adaptive rules') in-flight counts; when it
// may, the local slots it takes are recorded in s (released by Settle or
// Release). false: shed it (Verdict Shed, d.RetryAfter set for an
// ordinary route); nothing is held then.
//
// A dry-run adaptive rule (and, under node-wide dry-run, the node's
// ceiling) is decided as if it enforced but never sheds: its would-shed is
// the match's OutcomeDryRunDeny (the ceiling's is counted in ShedStats),
// and the request goes on holding no slot of it, as a shed request would
// not have been in flight.
func (e *Engine) admit(now time.Time, p *Policy, s *Scratch, d *Decision) bool {
	ls := &p.Shedding
	prio := RequestPriority(s.Matches)
	d.Priority = prio
	nodeDry := p.DryRun || e.dryRun.Load() || e.dry.Load().nodeDry(now)
	shed, would := false, false
	if ls.MaxInFlight > 0 {
		switch {
		case e.shed.node.tryAcquire(ls.ceiling[prio]):
			s.fl.local = append(s.fl.local, &e.shed.node)
		case nodeDry:
			would = true
		default:
			shed = true
		}
	}
	share := ls.shareOf(prio)
	for i := range s.Matches {
		m := &s.Matches[i]
		if shed {
			break
		}
		if m.Rule.local == nil || m.Op >= 0 || m.Outcome != OutcomeSkip {
			continue
		}
		l := e.localSlots(m.Rule)
		switch {
		case l == nil:
			m.Outcome = OutcomeAllow // no limiter in this build yet
		case l.TryAcquire(share):
			m.Outcome = OutcomeAllow
			s.fl.local = append(s.fl.local, l)
		case m.Enforce:
			m.Outcome = OutcomeDeny
			if d.Refusing == nil {
				d.Refusing = m.Rule
			}
			shed = true
		default:
			m.Outcome = OutcomeDryRunDeny
			would = true
		}
	}
	if shed {
		for i := range s.Matches {
			if m := &s.Matches[i]; m.Op >= 0 {
				m.Outcome = OutcomeSkip // never decided: shed before the store call
			}
		}
		s.releaseLocal(now, 0, false, false) // never sent: no sample
		d.RetryAfter = ls.RetryAfter
		e.shed.shed[prio].Add(1)
		return false
	}
	if would {
		e.shed.dry[prio].Add(1)
	}
	return true
}

// shedState is an Engine's load-shedding state, kept across reloads.
type shedState struct {
	node nodeInFlight
	// shed and dry count, by priority, the requests shed and would-be shed.
	shed, dry [NumPriorities]atomic.Uint64
}

// nodeInFlight is the node's count of requests in flight under
// load_shedding max_in_flight, and the local slot each holds of it.
type nodeInFlight struct{ n atomic.Int64 }

// tryAcquire takes one slot when fewer than ceiling are taken, exactly
// (a compare-and-swap, so a request that backs out never makes another
// see a count it did not reach).
func (c *nodeInFlight) tryAcquire(ceiling int64) bool {
	for {
		n := c.n.Load()
		if n >= ceiling {
			return false
		}
		if c.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release gives a slot back.
func (c *nodeInFlight) Release(time.Time, time.Duration, bool, bool) { c.n.Add(-1) }

var _ localSlot = (*nodeInFlight)(nil)

// InFlight returns the requests this node has in flight under load_shedding
// max_in_flight (the edge_in_flight gauge): forwarded and not yet answered,
// or held by a queue. Only a policy with max_in_flight counts them; a
// reload that sets it starts from the requests admitted after it.
func (e *Engine) InFlight() int64 { return e.shed.node.n.Load() }

// ShedStats returns, by priority, the requests shed (answered 503) and
// those a dry-run ceiling or adaptive rule would have shed, since the
// Engine started (edge_shed_total, edge_shed_dry_run_total).
func (e *Engine) ShedStats() (shed, dryRun [NumPriorities]uint64) {
	for i := range shed {
		shed[i], dryRun[i] = e.shed.shed[i].Load(), e.shed.dry[i].Load()
	}
	return shed, dryRun
}

// localLimits holds an Engine's node-local limits' Slots (LocalLimit) by
// rule ID: a map replaced whole on each insertion (copy on write), so a
// lookup is one atomic load and a map read. The Slots of rules a reload
// removed are kept (a few hundred bytes each) so that a rule put back
// resumes where it was.
type localLimits struct {
	m  atomic.Pointer[map[[8]byte]Slots]
	mu sync.Mutex
}

// localSlots returns r's Slots, creating them on first use and rebinding
// them when r's LocalLimit is not the one they run (a reload: the stage's
// Slots); nil when r is no node-local limit.
func (e *Engine) localSlots(r *Rule) Slots {
	if r.local == nil {
		return nil
	}
	if m := e.local.m.Load(); m != nil {
		if l := (*m)[r.ID]; l != nil {
			if got := r.local.Slots(l); got == l {
				return l
			}
		}
	}
	return e.local.add(r)
}

// add stores r's Slots, new or replaced, unless another request just did.
func (a *localLimits) add(r *Rule) Slots {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.m.Load()
	var prev Slots
	if old != nil {
		prev = (*old)[r.ID]
	}
	l := r.local.Slots(prev)
	if prev != nil && l == prev {
		return l
	}
	m := make(map[[8]byte]Slots, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[r.ID] = l
	a.m.Store(&m)
	return l
}

// LocalSlots returns the Slots of r, a node-local limit (an adaptive
// rule's limiter: behaviour/adaptive), creating them at their initial
// limit when no request has used them yet (metrics read them); nil when r
// has no LocalLimit.
func (e *Engine) LocalSlots(r *Rule) Slots { return e.localSlots(r) }

// explainLocal decides, for Explain (which runs no admission and takes no
// slot), each matching node-local limit as admit would now: a request of
// d's priority would be shed while the rule has its limit × the priority's
// share in flight (Slots.Admits). A shed wins over what the store said, as
// it comes before the store call in Check; a request a deny rule or an
// identity rejected never reaches admission, and is left as it is.
func (e *Engine) explainLocal(p *Policy, s *Scratch, d *Decision) {
	if !p.Shedding.local {
		return
	}
	switch d.Verdict {
	case Forward, RefuseLimit, Unavailable:
	default:
		return
	}
	prio := RequestPriority(s.Matches)
	share := p.Shedding.shareOf(prio)
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Rule.local == nil || m.Op >= 0 || m.Outcome != OutcomeSkip {
			continue
		}
		switch l := e.localSlots(m.Rule); {
		case l == nil || l.Admits(share):
			m.Outcome = OutcomeAllow
		case m.Enforce:
			m.Outcome = OutcomeDeny
			if d.Verdict != Shed {
				d.Verdict, d.Refusing, d.RetryAfter, d.Priority = Shed, m.Rule, p.Shedding.RetryAfter, prio
			}
		default:
			m.Outcome = OutcomeDryRunDeny
		}
	}
}
