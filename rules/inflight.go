package rules

import (
	"context"
	"time"
)

// The in-flight lifecycle of a forwarded request (docs/policy.md,
// "Concurrency limits", "Adaptive concurrency", "Load shedding"). What a
// request holds while it is at the origin is given back exactly once,
// whatever becomes of it:
//
//   - store leases: an algorithm = "concurrency" rule's op is a Distinct op
//     whose Member is a lease ID unique to the request and whose period is
//     the rule's lease, so a lease a node never gives back (it died) expires
//     by itself in every store (concurrency.go);
//   - local slots: the node's in-flight ceiling (load_shedding
//     max_in_flight) and the node-local limits' Slots (LocalLimit: the
//     adaptive limiters of adaptive { } rules, behaviour/adaptive),
//     counted in this process (shed.go).
//
// Check acquires them (the leases in its one store call); the gateway
// marks the moment it sends the request (Scratch.Forwarding), then calls
// Settle once the origin answered (the leases' refunds ride in Settle's one
// store call, and the adaptive limiters get the round-trip time), or Release
// on every other path (an upstream error or timeout, a client gone while
// held, a panic). Both are no-ops for a request that holds nothing, and
// whichever runs first releases: the second does nothing.

// Priority is a rule's priority for load shedding (priority): when the
// origin is saturated the edge sheds the lowest first. A request's priority
// is the highest of its matching rules' priorities, PriorityNormal when none
// sets one.
type Priority uint8

const (
	// PriorityUnset: the rule sets no priority.
	PriorityUnset Priority = iota
	// PriorityLow is shed first (API reads, exports).
	PriorityLow
	// PriorityNormal is the default.
	PriorityNormal
	// PriorityHigh (logins, signups).
	PriorityHigh
	// PriorityCritical is shed last (OTP verifies): only at the ceiling
	// itself.
	PriorityCritical
	// NumPriorities bounds per-priority tables.
	NumPriorities = int(PriorityCritical) + 1
)

var priorityNames = [NumPriorities]string{"", "low", "normal", "high", "critical"}

// String returns the priority's policy name, such as "high" ("" when unset).
func (p Priority) String() string {
	if int(p) < NumPriorities {
		return priorityNames[p]
	}
	return "unknown"
}

// ParsePriority parses a priority's policy name.
func ParsePriority(s string) (Priority, bool) {
	for i := PriorityLow; int(i) < NumPriorities; i++ {
		if priorityNames[i] == s {
			return i, true
		}
	}
	return PriorityUnset, false
}

// inflight is what a request holds while in flight, in its Scratch.
type inflight struct {
	// leases: some concurrency op of Ops consumed (its lease is in the
	// store); Release and Settle refund them.
	leases bool
	// local are the local slots held (the node ceiling, adaptive
	// limiters), each released once with the request's sample.
	local []localSlot
	// forwardedAt is when the gateway sent the request (Forwarding); zero
	// while it has not.
	forwardedAt time.Time
	// released: Settle or Release ran.
	released bool
	// keepLeases: the origin did not answer in time (TimedOut): Release
	// leaves the leases to expire, since the origin may still be working
	// on the request.
	keepLeases bool
	// rel, relRes are the lease refunds' ops and results of Release.
	rel    []Op
	relRes []Result
}

// localSlot is one local slot a request holds: Release gives it back, with
// the request's round-trip time to the origin when it was answered, or
// dropped when it was sent but not answered (an upstream error or
// timeout); neither when it was never sent.
type localSlot interface {
	Release(now time.Time, rtt time.Duration, answered, dropped bool)
}

// Holds reports whether the request holds anything Settle or Release must
// give back: the gateway then guarantees one of them runs.
func (s *Scratch) Holds() bool {
	return (s.fl.leases || len(s.fl.local) > 0) && !s.fl.released
}

// Forwarding records that the gateway is sending the request to the origin
// now: the start of its round-trip time, and the difference between a
// request dropped at the origin and one never sent.
func (s *Scratch) Forwarding(now time.Time) { s.fl.forwardedAt = now }

// TimedOut records that the origin did not answer the request within the
// upstream timeout. The edge has given up on it, but the origin may still
// be working on it (a password hash under load): Release then leaves its
// leases in the store until their lease ends, so a client whose requests
// time out cannot put another limit's worth at the busy origin each
// timeout. Its local slots are given back as a drop (an adaptive limit cuts
// for it).
func (s *Scratch) TimedOut() { s.fl.keepLeases = true }

// Release gives back what the request holds when the origin did not answer
// it (or the gateway never sent it): its leases, in one store call with its
// own budget (ctx should not be the request's, which a shutdown cancels),
// and its local slots. It does nothing when Settle or Release already ran or
// the request holds nothing. A store error leaves the leases to expire at
// their lease's end; it is returned for the caller's metrics.
func (e *Engine) Release(ctx context.Context, now time.Time, s *Scratch) error {
	if s.fl.released {
		return nil
	}
	s.fl.released = true
	dropped := !s.fl.forwardedAt.IsZero()
	s.releaseLocal(now, 0, false, dropped)
	if !s.fl.leases || s.fl.keepLeases {
		return nil
	}
	s.fl.rel = s.appendLeaseRefunds(s.fl.rel[:0])
	if len(s.fl.rel) == 0 {
		return nil
	}
	if cap(s.fl.relRes) < len(s.fl.rel) {
		s.fl.relRes = make([]Result, len(s.fl.rel))
	}
	s.fl.relRes = s.fl.relRes[:len(s.fl.rel)]
	return e.take(ctx, now, s, s.fl.rel, s.fl.relRes)
}

// releaseLocal releases the local slots held, once.
func (s *Scratch) releaseLocal(now time.Time, rtt time.Duration, answered, dropped bool) {
	for i, l := range s.fl.local {
		l.Release(now, rtt, answered, dropped)
		s.fl.local[i] = nil
	}
	s.fl.local = s.fl.local[:0]
}

// resetInflight clears the lifecycle state for a new request.
func (s *Scratch) resetInflight() {
	for i := range s.fl.local {
		s.fl.local[i] = nil
	}
	s.fl.local = s.fl.local[:0]
	s.fl.leases, s.fl.released, s.fl.keepLeases, s.fl.forwardedAt = false, false, false, time.Time{}
}
