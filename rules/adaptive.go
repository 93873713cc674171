package rules

import "time"

// Adaptive concurrency: adaptive { } (docs/policy.md, "Adaptive
// concurrency"). Owned by the adaptive slice; see inflight.go for the
// lifecycle and shed.go for admission.

// AdaptiveConfig is a rule's adaptive { } block: the in-flight limit of the
// rule's route on this node is found from the origin's latency rather than
// written (the adaptive slice fills in its fields).
type AdaptiveConfig struct {
	// Min and Max bound the limit; Initial is where it starts.
	Min, Max, Initial int64
}

// AdaptiveLimiter is one adaptive rule's limiter on this node: its current
// limit and its requests in flight. It is safe for concurrent use and
// allocates nothing per request. It lives in the Engine by rule ID, so a
// reload keeps what it has learnt.
type AdaptiveLimiter struct{}

// adaptiveLimiter returns r's limiter (r.Adaptive != nil), creating it on
// first use.
func (e *Engine) adaptiveLimiter(r *Rule) *AdaptiveLimiter { return nil }

// tryAcquire takes one in-flight slot when fewer than the current limit ×
// sharePerMille ÷ 1000 (at least 1) are in flight, and reports whether it
// did. share is the request's priority's share of the limit (shed.go).
func (l *AdaptiveLimiter) tryAcquire(sharePerMille int64) bool { return true }

// release gives one slot back, feeding the round-trip sample (answered, or
// dropped: sent but not answered) to the limit's method.
func (l *AdaptiveLimiter) release(now time.Time, rtt time.Duration, answered, dropped bool) {}

// Limit returns the current limit (the edge_adaptive_limit metric).
func (l *AdaptiveLimiter) Limit() int64 { return 0 }

// InFlight returns the requests in flight under the limiter.
func (l *AdaptiveLimiter) InFlight() int64 { return 0 }
