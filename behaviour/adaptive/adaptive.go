// Package adaptive is adaptive concurrency, the adaptive { } block of a
// concurrency rule (docs/policy.md, "Adaptive concurrency"). An adaptive
// rule's in-flight limit for its route on this node is not written in the
// policy but found from the origin's latency, the way TCP finds a
// congestion window: Little's law says that when the origin slows, the
// same arrivals need more requests in flight, so the limit must shrink
// with rising latency for the origin to keep finishing what it takes. Two
// methods:
//
//   - gradient (the default, Netflix's concurrency-limits): the round-trip
//     times of the requests answered are gathered in windows; at the end of
//     each, gradient = RTT_noload ÷ RTT_actual (clamped to [0.5, 1]), where
//     RTT_actual is the window's mean and RTT_noload the least window mean
//     of the last noload_window (a minimum that is forgotten, so that an
//     origin that became slower for good is learnt as its new normal);
//     target = limit × gradient + queue, queue = √limit unless written; the
//     limit moves by smoothing of the way to the target. A window with a
//     dropped request (sent, not answered: an upstream error or timeout)
//     cuts the limit by backoff instead.
//   - aimd: every answer faster than latency_threshold while the limit is in
//     use (at least half of it in flight) adds one; a drop or a slower
//     answer multiplies the limit by backoff, at most once per smoothed
//     round trip (the requests sent before a cut do not cut again).
//
// Neither method grows the limit while less than half of it is in use:
// an idle route says nothing about what the origin could take. The limit is
// always within [min, max]. Each node measures its own origin: there is no
// store op and nothing is shared by the fleet.
//
// It is a rules.Feature (builtin.Features lists it) whose block compiles
// to a Config, the rule's rules.LocalLimit stage, on a concurrency rule
// (behaviour/concurrency): load shedding's admission (behaviour/shed)
// admits the rule's requests by its Limiter (a request the limit refuses
// is shed: 503), which the Engine keeps by rule ID across reloads, and the
// in-flight lifecycle gives each slot back once with the request's round
// trip, which is what moves the limit (rules/inflight.go).
package adaptive

import (
	"github.com/edge-gateway/edge/rules"
)

// Feature returns adaptive concurrency: the adaptive { } block of rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name:       "adaptive",
		RuleBlocks: []rules.RuleBlockType{{Type: "adaptive", Keyless: true, Compile: compileBlock}},
	}
}

// Behaviour names the stage.
func (*Config) Behaviour() string { return "adaptive" }

// Slots returns the limiter of the rule whose adaptive { } c is, given
// prev, the one the Engine kept for its ID: prev rebound to c when a
// reload changed the block (rebind: what it learnt is kept within c's
// bounds), or a new Limiter at c.Initial.
func (c *Config) Slots(prev rules.Slots) rules.Slots {
	if l, ok := prev.(*Limiter); ok {
		if l.cfg.Load() != c {
			l.rebind(c)
		}
		return l
	}
	return newLimiter(c)
}

// Of returns r's adaptive { }, nil when r has none.
func Of(r *rules.Rule) *Config {
	c, _ := r.LocalLimit().(*Config)
	return c
}

// LimiterOf returns the limiter of r, an adaptive rule, on e, creating it
// at its initial limit when no request has used it yet (metrics and the
// admin API read it); nil when r has no adaptive { }.
func LimiterOf(e *rules.Engine, r *rules.Rule) *Limiter {
	if Of(r) == nil {
		return nil
	}
	l, _ := e.LocalSlots(r.ID, r.LocalLimit()).(*Limiter)
	return l
}

var _ rules.LocalLimit = (*Config)(nil)
