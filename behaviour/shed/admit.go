package shed

import (
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// Admission (docs/policy.md, "Load shedding"): when the origin is
// saturated, the edge answers 503 rather than forwarding, and sheds the
// lower priorities first so that the routes that matter keep working. The
// signal is what is in flight, never what arrives: the node's own count of
// requests at the origin (max_in_flight) and each matching node-local
// limit's Slots (rules.LocalLimit: an adaptive rule's limiter,
// behaviour/adaptive). A request of priority p is admitted while each
// count is under its capacity × p's share (shed_at); critical's share is
// always 100%. Admission is the gate's last step, before the store call
// (rules.Admitter), so a shed request is counted by no rule; the slots it
// takes are given back by rules' in-flight lifecycle (rules/inflight.go).
// The counts live in the Engine, across reloads (rules.Engine.LocalSlots).

// Shedding is what admission reads of load shedding: load_shedding { } as
// compiled (Settings), with the share of PriorityUnset (normal's) and
// PriorityCritical (always 100%); a policy without the block has
// DefaultShedding's.
type Shedding struct {
	// MaxInFlight is the node's ceiling on the requests it has at the
	// origin (Settings.MaxInFlight); 0: none.
	MaxInFlight int64
	// Share is each priority's share of a capacity, per mille: a request
	// of priority p is admitted while fewer than capacity × Share[p] ÷
	// 1000 (at least 1) are in flight.
	Share [NumPriorities]int64
	// RetryAfter is the Retry-After of a request shed on an ordinary route
	// (Settings.RetryAfter); a sensitive route's 503 is bare.
	RetryAfter time.Duration
}

// DefaultShedding is the Shedding of a policy without load_shedding { }:
// no node ceiling, every share 100%, Retry-After DefaultRetryAfter. It
// sheds only at an adaptive rule's limit itself, whatever the priority.
func DefaultShedding() Shedding {
	return Shedding{
		Share:      [NumPriorities]int64{perMille, perMille, perMille, perMille, perMille},
		RetryAfter: DefaultRetryAfter,
	}
}

// AdmissionOf returns what p's admission reads.
func AdmissionOf(p *rules.Policy) Shedding {
	if a := Of(p).adm; a != nil {
		return a.Shedding
	}
	return DefaultShedding()
}

// admission is the policy's admission: its rules.Admitter, registered
// when the policy sheds (a node ceiling, or a node-local limit), and the
// rules.LocalLimit of the node's own count (ceiling).
type admission struct {
	Shedding
	// local is set when a rule is a node-local limit (LocalLimit:
	// adaptive { }).
	local bool
	// prio is each rule's priority, by Rule.Index (PriorityUnset where it
	// sets none).
	prio []Priority
	// slot is the memo slot of the request's priority (RequestPriority),
	// -1 when the policy sheds nothing (no Admitter is registered).
	slot int
}

// newAdmission returns the admission of sh, whose shares of
// PriorityUnset and PriorityCritical are admission's own.
func newAdmission(c *rules.Compiler, sh Shedding, prio map[*rules.Rule]Priority) *admission {
	sh.Share[PriorityUnset] = sh.Share[PriorityNormal]
	sh.Share[PriorityCritical] = perMille
	p := c.Policy()
	a := &admission{Shedding: sh, prio: make([]Priority, len(p.Rules)), slot: -1}
	for i, r := range p.Rules {
		a.prio[i] = prio[r]
		a.local = a.local || r.LocalLimit() != nil
	}
	if a.MaxInFlight > 0 || a.local {
		a.slot = c.Slot("shed.priority")
		c.AddRequestHook(a)
	}
	return a
}

// Behaviour names the admission's node-local limit.
func (*admission) Behaviour() string { return "shed" }

// BeforeStore does nothing: admission's part is the gate's (Admit).
func (*admission) BeforeStore(*rules.Request, *rules.Scratch) {}

// priority returns the priority of s's request: the highest its matching
// rules set, PriorityNormal when none sets one.
func (a *admission) priority(s *rules.Scratch) Priority {
	p := PriorityUnset
	for i := range s.Matches {
		p = max(p, a.prio[s.Matches[i].Rule.Index])
	}
	if p == PriorityUnset {
		return PriorityNormal
	}
	return p
}

// decided records p as the priority admission decided s's request at.
func (a *admission) decided(s *rules.Scratch, p Priority) {
	m := s.Memo(a.slot)
	m.Done, m.Value = true, append(m.Value[:0], byte(p))
}

// RequestPriority returns the priority admission decided s's request at
// (its log line's), PriorityUnset when its policy sheds nothing or
// admission did not run (a request refused whatever the counters say; an
// explained one it does not shed).
func RequestPriority(s *rules.Scratch) Priority {
	if p := s.Policy(); p != nil {
		if a := Of(p).adm; a != nil && a.slot >= 0 {
			if m := s.Memo(a.slot); m.Done && len(m.Value) == 1 {
				return Priority(m.Value[0])
			}
		}
	}
	return PriorityUnset
}

// Admit decides whether the request may go to the origin now, given its
// priority and the node's and the matching node-local limits' (adaptive
// rules') in-flight counts; when it may, the local slots it takes are the
// request's (Scratch.HoldSlot: given back by Settle or Release). Shed: by
// the adaptive rule whose limit is reached (nil: the node's ceiling),
// with retry_after (rules gives back what it took).
//
// A dry-run adaptive rule (and, under node-wide dry-run, the node's
// ceiling) is decided as if it enforced but never sheds: its would-shed is
// the match's OutcomeDryRunDeny (the ceiling's is counted in Stats), and
// the request goes on holding no slot of it, as a shed request would not
// have been in flight.
func (a *admission) Admit(s *rules.Scratch) (shed bool, refusing *rules.Rule, retryAfter time.Duration) {
	prio := a.priority(s)
	a.decided(s, prio)
	share := a.Share[prio]
	n := s.LocalSlots(nodeID, a).(*ceiling)
	would := false
	if a.MaxInFlight > 0 {
		switch {
		case n.TryAcquire(share):
			s.HoldSlot(n)
		case s.NodeDryRun():
			would = true
		default:
			shed = true
		}
	}
	for i := range s.Matches {
		m := &s.Matches[i]
		if shed {
			break
		}
		if m.Rule.LocalLimit() == nil || m.Op >= 0 || m.Outcome != rules.OutcomeSkip {
			continue
		}
		switch l := s.LocalSlots(m.Rule.ID, m.Rule.LocalLimit()); {
		case l == nil:
			m.Outcome = rules.OutcomeAllow // a LocalLimit with no limiter
		case l.TryAcquire(share):
			m.Outcome = rules.OutcomeAllow
			s.HoldSlot(l)
		case m.Enforce:
			m.Outcome = rules.OutcomeDeny
			refusing, shed = m.Rule, true
		default:
			m.Outcome = rules.OutcomeDryRunDeny
			would = true
		}
	}
	switch {
	case shed:
		n.shed[prio].Add(1)
		return true, refusing, a.RetryAfter
	case would:
		n.dry[prio].Add(1)
	}
	return false, nil, 0
}

// ExplainAdmit decides, for Explain (which runs no admission and takes no
// slot), each matching node-local limit as Admit would now: a request of
// its priority would be shed while the rule has its limit × the
// priority's share in flight (Slots.Admits). A shed wins over what the
// store said, as it comes before the store call in Check; a request a deny
// rule or an identity rejected never reaches admission, and is left as it
// is.
func (a *admission) ExplainAdmit(s *rules.Scratch, d rules.Decision) rules.Decision {
	if !a.local {
		return d
	}
	switch d.Verdict {
	case rules.Forward, rules.RefuseLimit, rules.Unavailable:
	default:
		return d
	}
	prio := a.priority(s)
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Rule.LocalLimit() == nil || m.Op >= 0 || m.Outcome != rules.OutcomeSkip {
			continue
		}
		switch l := s.LocalSlots(m.Rule.ID, m.Rule.LocalLimit()); {
		case l == nil || l.Admits(a.Share[prio]):
			m.Outcome = rules.OutcomeAllow
		case m.Enforce:
			m.Outcome = rules.OutcomeDeny
			if d.Verdict != rules.Shed {
				d.Verdict, d.Refusing, d.RetryAfter = rules.Shed, m.Rule, a.RetryAfter
				a.decided(s, prio)
			}
		default:
			m.Outcome = rules.OutcomeDryRunDeny
		}
	}
	return d
}

// nodeID is the ID the Engine keeps the node's count under: no rule's,
// since it starts with a NUL (rules.BudgetID).
var nodeID = rules.BudgetID("\x00load_shedding")

// Slots returns the node's count, given prev, the one the Engine kept (nil
// the first time), bound to a's max_in_flight: a reload that changes it
// keeps the requests in flight, and a request admitted under one policy
// gives its slot back under the next.
func (a *admission) Slots(prev rules.Slots) rules.Slots {
	n, ok := prev.(*ceiling)
	if !ok {
		n = &ceiling{}
	}
	if n.limit.Load() != a.MaxInFlight {
		n.limit.Store(a.MaxInFlight)
	}
	return n
}

// ceiling is the node's count of requests in flight under load_shedding
// max_in_flight (forwarded and not yet answered, or held by a queue), a
// node-local limit of no rule whose limit is max_in_flight, and the
// requests shed and would-be shed since the Engine started, by priority.
type ceiling struct {
	limit     atomic.Int64 // the admitting policy's max_in_flight
	n         atomic.Int64
	shed, dry [NumPriorities]atomic.Uint64
}

// TryAcquire takes one slot when fewer than max_in_flight × share ÷ 1000
// (at least 1) are taken, exactly (a compare-and-swap, so a request that
// backs out never makes another see a count it did not reach).
func (c *ceiling) TryAcquire(share int64) bool {
	for {
		n := c.n.Load()
		if n >= max(c.limit.Load()*share/perMille, 1) {
			return false
		}
		if c.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Admits reports whether TryAcquire would take a slot now.
func (c *ceiling) Admits(share int64) bool {
	return c.n.Load() < max(c.limit.Load()*share/perMille, 1)
}

// Release gives a slot back.
func (c *ceiling) Release(time.Time, time.Duration, bool, bool) { c.n.Add(-1) }

// InFlight returns the requests e's node has in flight under
// load_shedding max_in_flight (the edge_in_flight gauge): forwarded and
// not yet answered, or held by a queue. Only a policy with max_in_flight
// counts them; a reload that sets it starts from the requests admitted
// after it.
func InFlight(e *rules.Engine) int64 {
	if n, ok := e.LocalSlots(nodeID, nil).(*ceiling); ok {
		return n.n.Load()
	}
	return 0
}

// Stats returns, by priority, the requests e shed (answered 503) and those
// a dry-run ceiling or adaptive rule would have shed, since the Engine
// started (edge_shed_total, edge_shed_dry_run_total).
func Stats(e *rules.Engine) (shed, dryRun [NumPriorities]uint64) {
	if n, ok := e.LocalSlots(nodeID, nil).(*ceiling); ok {
		for i := range shed {
			shed[i], dryRun[i] = n.shed[i].Load(), n.dry[i].Load()
		}
	}
	return shed, dryRun
}

var (
	_ rules.Admitter   = (*admission)(nil)
	_ rules.LocalLimit = (*admission)(nil)
	_ rules.Slots      = (*ceiling)(nil)
)
