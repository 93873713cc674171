package rules

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// The in-flight lifecycle of a forwarded request (docs/architecture.md,
// "The decision pipeline"): what a request holds while at the origin, its
// Holders' charges in the store (a concurrency lease) and the local Slots
// an Admitter took (max_in_flight, an adaptive limiter: Scratch.HoldSlot),
// is given back exactly once. Check acquires them; the gateway marks the
// send (Scratch.Forwarding), then calls Settle once the origin answered
// (the give-backs ride in its one store call, the slots get the round
// trip), or Release on every other path (an upstream error or timeout, a
// client gone, a panic); whichever runs first releases, and either is a
// no-op for a request that holds nothing.

// inflight is what a request holds while in flight, in its Scratch.
type inflight struct {
	// held: a Holder's match holds something in the store; Release and
	// Settle give it back (Holder.GiveBack).
	held bool
	// local are the local slots held, each released once with the
	// request's sample.
	local []Slots
	// forwardedAt is when the gateway sent the request (Forwarding); zero
	// while it has not.
	forwardedAt time.Time
	// released: Settle or Release ran.
	released bool
	// keepHeld: the origin did not answer in time (TimedOut): Release
	// leaves what the store holds to expire, since the origin may still be
	// working on the request.
	keepHeld bool
}

// Holds reports whether the request holds anything Settle or Release must
// give back: the gateway then guarantees one of them runs.
func (s *Scratch) Holds() bool {
	return (s.fl.held || len(s.fl.local) > 0) && !s.fl.released
}

// Forwarding records that the gateway is sending the request to the origin
// now: the start of its round-trip time, and the difference between a
// request dropped at the origin and one never sent.
func (s *Scratch) Forwarding(now time.Time) { s.fl.forwardedAt = now }

// TimedOut records that the origin did not answer the request within the
// upstream timeout. The edge has given up on it, but the origin may still
// be working on it (a password hash under load): Release then leaves what
// the store holds for it until it expires (a lease's end), so a client
// whose requests time out cannot put another limit's worth at the busy
// origin each timeout. Its local slots are given back as a drop (an
// adaptive limit cuts for it).
func (s *Scratch) TimedOut() { s.fl.keepHeld = true }

// HoldSlot records that the request holds one slot of l, which an
// Admitter took (Slots.TryAcquire): Settle or Release gives it back once.
func (s *Scratch) HoldSlot(l Slots) { s.fl.local = append(s.fl.local, l) }

// Release gives back what the request holds when the origin did not answer
// it (or the gateway never sent it): what the store holds, in one store
// call with its own budget (ctx should not be the request's, which a
// shutdown cancels), and its local slots. It does nothing when Settle or
// Release already ran or the request holds nothing. A store error leaves
// what the store holds to expire (a lease's end); it is returned for the
// caller's metrics. Its call uses Settle's buffers, which it excludes.
func (e *Engine) Release(ctx context.Context, now time.Time, s *Scratch) error {
	s.settle = s.release(now, false, s.settle[:0])
	if len(s.settle) == 0 {
		return nil
	}
	if cap(s.settleRes) < len(s.settle) {
		s.settleRes = make([]Result, len(s.settle))
	}
	s.settleRes = s.settleRes[:len(s.settle)]
	return e.take(ctx, now, s, s.settle, s.settleRes)
}

// release gives back, once (Settle's or Release's, whichever runs first),
// what the request holds: its local slots, with the round trip since
// Forwarding when the origin answered, and, appended to ops, what the
// store holds, unless the origin never answered in time (TimedOut).
func (s *Scratch) release(now time.Time, answered bool, ops []Op) []Op {
	if s.fl.released {
		return ops
	}
	s.fl.released = true
	sent := !s.fl.forwardedAt.IsZero()
	rtt := time.Duration(0)
	if answered && sent {
		rtt = now.Sub(s.fl.forwardedAt)
	}
	s.releaseLocal(now, rtt, answered, sent && !answered)
	if s.fl.held && (answered || !s.fl.keepHeld) {
		ops = s.giveBack(ops)
	}
	return ops
}

// answered runs the Holders' Answered once the main call returned
// (failed: with an error).
func (s *Scratch) answered(failed bool) {
	if !s.pol.holds {
		return // no rule holds anything: every request's path skips the loop
	}
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		for _, h := range m.Rule.holders {
			if h.Answered(s, m, failed) {
				s.fl.held = true
			}
		}
	}
}

// giveBack appends to ops the Holders' give-back of what the request
// holds in the store.
func (s *Scratch) giveBack(ops []Op) []Op {
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		for _, h := range m.Rule.holders {
			ops = h.GiveBack(s, m, ops)
		}
	}
	return ops
}

// giveBackRefused queues what the store holds for a request Check refuses
// after its store call (max_delay, a rejected identity that another
// rule's answer outranks, ...) in the after call, so that a refused
// request holds nothing.
func (s *Scratch) giveBackRefused() {
	if s.fl.held {
		s.qops = s.giveBack(s.qops)
		s.fl.held = false
	}
}

// shed ends a request an Admitter shed, by r after retryAfter: no
// counting match is decided (none counts it), and the local slots taken
// go back unsent.
func (s *Scratch) shed(now time.Time, d *Decision, r *Rule, retryAfter time.Duration) {
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Op >= 0 {
			m.Outcome = OutcomeSkip
		}
	}
	s.releaseLocal(now, 0, false, false)
	d.Verdict, d.RetryAfter = Shed, retryAfter
	if d.Refusing == nil {
		d.Refusing = r
	}
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
	clear(s.fl.local)
	s.fl.local = s.fl.local[:0]
	s.fl.held, s.fl.released, s.fl.keepHeld, s.fl.forwardedAt = false, false, false, time.Time{}
}

// localLimits holds an Engine's node-local limits' Slots by ID: a map
// replaced whole on each insertion (copy on write, under mu), so a lookup
// is one atomic load and a map read. The Slots of rules a reload removed
// are kept (a few hundred bytes each) so that a rule put back resumes
// where it was.
type localLimits struct {
	m  atomic.Pointer[map[[8]byte]Slots]
	mu sync.Mutex
}

// LocalSlots returns the Slots the Engine keeps under id across reloads:
// a node-local limit's, by its rule's ID (a LocalLimit: adaptive { }'s
// limiter) or by a feature's own (BudgetID: load shedding's
// max_in_flight). l makes them the first time and rebinds them to its
// settings (LocalLimit.Slots); with a nil l, LocalSlots returns those
// kept, nil when none. Metrics and the admin API read them.
func (e *Engine) LocalSlots(id [8]byte, l LocalLimit) Slots {
	if m := e.local.m.Load(); m != nil {
		if k := (*m)[id]; k != nil && (l == nil || l.Slots(k) == k) {
			return k
		}
	}
	if l == nil {
		return nil
	}
	e.local.mu.Lock()
	defer e.local.mu.Unlock()
	m := map[[8]byte]Slots{}
	if old := e.local.m.Load(); old != nil {
		m = maps.Clone(*old)
	}
	if k := l.Slots(m[id]); k != m[id] {
		m[id] = k // new, or replaced; else another request just did
		e.local.m.Store(&m)
	}
	return m[id]
}

// LocalSlots is Engine.LocalSlots on the request's Engine, for an
// Admitter.
func (s *Scratch) LocalSlots(id [8]byte, l LocalLimit) Slots { return s.owner.LocalSlots(id, l) }

// NodeDryRun reports whether the whole node is in dry-run for the request:
// the policy's dry_run, the -dry-run flag, or a run-time toggle at its
// instant (dryrun.go). An Admitter then decides its own limit as if it
// enforced, but never sheds.
func (s *Scratch) NodeDryRun() bool { return s.pol.DryRun || s.owner.DryRunAt(s.now) }
