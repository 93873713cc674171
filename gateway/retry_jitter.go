package gateway

import (
	"math/bits"
	randv2 "math/rand/v2"
	"time"

	"github.com/edge-gateway/edge/behaviour/refusal"
	"github.com/edge-gateway/edge/rules"
)

// Storm-proof Retry-After (docs/headers.md, "Retry-After jitter"): a rule's
// retry_after_jitter spreads the clients one instant refused over a window
// after their true retry time, so they do not all return in the same
// second (the lesson's 429 storm). The extra is whole seconds, as
// Retry-After and RateLimit's t are: a wait t with jitter j becomes
// ⌈t⌉ + k seconds, k uniform in 0 … ⌊j × t⌋, never earlier than t. A
// jitter whose window is under a second (j × t < 1 s) spreads nothing.

// jitterDraw returns one uniform 64-bit draw for a refusal: the injected
// source (Options.RetryJitterRand, tests) or math/rand/v2's runtime
// source, per-thread ChaCha8 state that takes no lock and allocates
// nothing.
func (s *Server) jitterDraw() uint64 {
	if s.jitterRand != nil {
		return s.jitterRand()
	}
	return randv2.Uint64()
}

// jitteredSeconds returns a wait of t with jitter frac (0 to 1) and the
// draw u, in whole seconds: ⌈t⌉ (at least 1) plus k, uniform in
// 0 … ⌊frac × t⌋ seconds.
func jitteredSeconds(t time.Duration, frac float64, u uint64) int64 {
	base := ceilSeconds(t)
	if frac <= 0 || t <= 0 {
		return base
	}
	span := int64(frac * t.Seconds()) // whole seconds of extra, rounded down
	if span <= 0 {
		return base
	}
	k, _ := bits.Mul64(u, uint64(span)+1) // ⌊u × (span+1) ÷ 2⁶⁴⌋: uniform in 0 … span
	return base + int64(k)
}

// refusalWait returns a refusal's Retry-After in whole seconds with each
// rule's jitter applied (retryAfter's waits, each jittered by its own
// rule's retry_after_jitter; the Engine's RetryAfter by the largest jitter
// among the refusing rules), and the refusing rule whose answer the client
// gets (refusalRule).
func refusalWait(rs *reqState, d *rules.Decision, u uint64) int64 {
	maxJitter := 0.0
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if j := refusal.Jitter(m.Rule); m.Outcome == rules.OutcomeDeny && j > maxJitter {
			maxJitter = j
		}
	}
	wait := jitteredSeconds(d.RetryAfter, maxJitter, u)
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if !shownLimit(m) {
			continue
		}
		if r, t, ok := serviceLimit(rs, m); ok && r == 0 && t > 0 {
			wait = max(wait, jitteredSeconds(t, refusal.Jitter(m.Rule), u))
		}
	}
	return wait
}

// refusalRule returns the rule whose refusal_status and refusal_body
// answer a refused request: of the enforcing limit rules that refused it,
// the one with the longest true wait (the wait Retry-After is made of,
// before jitter), the first in the file on a tie; nil when none is a limit
// rule. Its settings, or the defaults when it has none, are the answer's:
// another refusing rule's status or body is not used (docs/policy.md,
// "Refusals").
func refusalRule(rs *reqState) *rules.Rule {
	var best *rules.Rule
	var bestWait time.Duration
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if m.Outcome != rules.OutcomeDeny || !m.Enforce || m.Rule.Action != rules.ActionLimit {
			continue
		}
		var t time.Duration
		if m.Op >= 0 {
			if _, w, ok := serviceLimit(rs, m); ok {
				t = w
			}
		}
		if best == nil || t > bestWait {
			best, bestWait = m.Rule, t
		}
	}
	return best
}
