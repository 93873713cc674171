package rules

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Adaptive concurrency: adaptive { } (docs/policy.md, "Adaptive
// concurrency"). An adaptive rule's in-flight limit for its route on this
// node is not written in the policy but found from the origin's latency,
// the way TCP finds a congestion window: Little's law says that when the
// origin slows, the same arrivals need more requests in flight, so the
// limit must shrink with rising latency for the origin to keep finishing
// what it takes. Two methods:
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
// store op and nothing is shared by the fleet. See inflight.go for the
// lifecycle (a slot taken by tryAcquire is given back once by release) and
// shed.go for admission (a request the limit refuses is shed: 503).

// AdaptiveMethod is how an adaptive rule moves its limit.
type AdaptiveMethod uint8

const (
	// AdaptiveGradient: limit × RTT_noload ÷ RTT_actual + queue.
	AdaptiveGradient AdaptiveMethod = iota
	// AdaptiveAIMD: additive increase, multiplicative decrease.
	AdaptiveAIMD
)

// String returns the method's policy name.
func (m AdaptiveMethod) String() string {
	if m == AdaptiveAIMD {
		return "aimd"
	}
	return "gradient"
}

// The adaptive { } defaults (docs/policy.md, "Adaptive concurrency").
const (
	DefaultAdaptiveMin          = 1
	DefaultAdaptiveMax          = 1000
	DefaultAdaptiveInitial      = 20
	DefaultAdaptiveWindow       = time.Second
	DefaultAdaptiveMinSamples   = 10
	DefaultAdaptiveNoLoadWindow = time.Minute
	DefaultAdaptiveSmoothing    = 0.5
	DefaultAdaptiveBackoff      = 0.9
	// MaxAdaptiveLimit bounds max.
	MaxAdaptiveLimit = 1 << 24
	// minGradient is the floor of the gradient: one window at most halves
	// the target, so one slow window cannot empty the route.
	minGradient = 0.5
)

// AdaptiveConfig is a rule's adaptive { } block: the in-flight limit of the
// rule's route on this node is found from the origin's latency rather than
// written. Compile fills every field (defaults included).
type AdaptiveConfig struct {
	// Method is gradient or aimd.
	Method AdaptiveMethod
	// Min and Max bound the limit (requests in flight, 1 ≤ Min ≤ Max);
	// Initial is where it starts.
	Min, Max, Initial int64
	// Backoff is the multiplicative cut, 0 < Backoff < 1: aimd's on a drop
	// or a slow answer, gradient's on a window with a drop.
	Backoff float64

	// Window is the gradient's sample window: it closes on the first
	// sample at least Window after it opened and once it holds MinSamples.
	Window     time.Duration
	MinSamples int
	// NoLoadWindow is how long RTT_noload remembers a minimum (each is
	// forgotten between NoLoadWindow ÷ 2 and NoLoadWindow after it).
	NoLoadWindow time.Duration
	// Smoothing is the share of the way to the target the limit moves
	// each window, 0 < Smoothing ≤ 1.
	Smoothing float64
	// Queue is the queue allowance added to limit × gradient; 0: √limit.
	Queue int64

	// LatencyThreshold is aimd's: an answer slower than it cuts the limit
	// as a drop does; 0: only drops cut.
	LatencyThreshold time.Duration
}

// AdaptiveLimiter is one adaptive rule's limiter on this node: its current
// limit and its requests in flight. It is safe for concurrent use and
// allocates nothing per request: tryAcquire is a compare-and-swap, release
// one uncontended lock. It lives in the Engine by rule ID, so a reload
// keeps what it has learnt.
type AdaptiveLimiter struct {
	inFlight atomic.Int64
	limit    atomic.Int64 // ⌊lim⌋, what tryAcquire reads
	cfg      atomic.Pointer[AdaptiveConfig]

	mu  sync.Mutex
	c   AdaptiveConfig // *cfg, under mu
	lim float64        // the limit, fractional between moves

	// gradient: the open window (samples answered, their RTT sum, drops,
	// the most in flight seen) and RTT_noload's two half-window minima.
	winStart     time.Time
	winN, winDrp int
	winSum       time.Duration
	winPeak      int64
	nlStart      time.Time
	nlCur, nlOld time.Duration // 0: none

	// aimd: the smoothed RTT and the last cut.
	srtt    time.Duration
	lastCut time.Time
}

// newAdaptiveLimiter returns a limiter at cfg.Initial.
func newAdaptiveLimiter(cfg *AdaptiveConfig) *AdaptiveLimiter {
	l := &AdaptiveLimiter{}
	l.c = *cfg
	l.cfg.Store(cfg)
	l.set(float64(cfg.Initial))
	return l
}

// set stores lim within [Min, Max]; under mu.
func (l *AdaptiveLimiter) set(lim float64) {
	lim = math.Min(math.Max(lim, float64(l.c.Min)), float64(l.c.Max))
	l.lim = lim
	l.limit.Store(int64(lim))
}

// rebind applies a reloaded rule's adaptive { } to the limiter: the limit
// learnt so far is kept within the new bounds; a new method starts afresh
// from what it has learnt. It does nothing when the block is unchanged.
func (l *AdaptiveLimiter) rebind(cfg *AdaptiveConfig) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.Load() == cfg {
		return
	}
	old := l.c
	l.c = *cfg
	l.cfg.Store(cfg)
	if old.Method != cfg.Method || old.NoLoadWindow != cfg.NoLoadWindow || old.Window != cfg.Window {
		l.winStart, l.winN, l.winDrp, l.winSum, l.winPeak = time.Time{}, 0, 0, 0, 0
		l.nlStart, l.nlCur, l.nlOld = time.Time{}, 0, 0
		l.srtt, l.lastCut = 0, time.Time{}
	}
	l.set(l.lim)
}

// adaptiveState holds an Engine's limiters by rule ID: a map replaced
// whole on each insertion (copy on write), so a lookup is one atomic load
// and a map read. Limiters of rules a reload removed are kept (a few
// hundred bytes each) so that a rule put back resumes where it was.
type adaptiveState struct {
	m  atomic.Pointer[map[[8]byte]*AdaptiveLimiter]
	mu sync.Mutex
}

// adaptiveLimiter returns r's limiter (r.Adaptive != nil), creating it on
// first use, and rebinding it when r's adaptive { } is not the one it runs
// (a reload); nil when r has no adaptive { }.
func (e *Engine) adaptiveLimiter(r *Rule) *AdaptiveLimiter {
	if r.Adaptive == nil {
		return nil
	}
	if m := e.adaptive.m.Load(); m != nil {
		if l := (*m)[r.ID]; l != nil {
			if l.cfg.Load() != r.Adaptive {
				l.rebind(r.Adaptive)
			}
			return l
		}
	}
	return e.adaptive.add(r)
}

// add creates r's limiter unless another request just did.
func (a *adaptiveState) add(r *Rule) *AdaptiveLimiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.m.Load()
	if old != nil {
		if l := (*old)[r.ID]; l != nil {
			if l.cfg.Load() != r.Adaptive {
				l.rebind(r.Adaptive)
			}
			return l
		}
	}
	m := make(map[[8]byte]*AdaptiveLimiter, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	l := newAdaptiveLimiter(r.Adaptive)
	m[r.ID] = l
	a.m.Store(&m)
	return l
}

// AdaptiveLimiter returns the limiter of r, an adaptive rule, creating it
// at its initial limit when no request has used it yet (metrics read it);
// nil when r has no adaptive { }.
func (e *Engine) AdaptiveLimiter(r *Rule) *AdaptiveLimiter { return e.adaptiveLimiter(r) }

// tryAcquire takes one in-flight slot when fewer than the current limit ×
// sharePerMille ÷ 1000 (at least 1) are in flight, and reports whether it
// did. share is the request's priority's share of the limit (shed.go).
func (l *AdaptiveLimiter) tryAcquire(sharePerMille int64) bool {
	ceiling := max(l.limit.Load()*sharePerMille/perMille, 1)
	for {
		n := l.inFlight.Load()
		if n >= ceiling {
			return false
		}
		if l.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives one slot back, feeding the round-trip sample (answered, or
// dropped: sent but not answered) to the limit's method. A slot never sent
// (neither) is a sample of nothing; an answered one without a round-trip
// time (rtt ≤ 0: Forwarding was not called) only frees its slot.
func (l *AdaptiveLimiter) release(now time.Time, rtt time.Duration, answered, dropped bool) {
	n := l.inFlight.Add(-1) + 1 // in flight when it finished, itself included
	if !dropped && (!answered || rtt <= 0) {
		return
	}
	l.mu.Lock()
	if l.c.Method == AdaptiveAIMD {
		l.aimd(now, rtt, dropped, n)
	} else {
		l.gradient(now, rtt, dropped, n)
	}
	l.mu.Unlock()
}

// aimd applies one sample; under mu.
func (l *AdaptiveLimiter) aimd(now time.Time, rtt time.Duration, dropped bool, n int64) {
	if !dropped {
		if l.srtt == 0 {
			l.srtt = rtt
		} else {
			l.srtt += (rtt - l.srtt) / 8 // RFC 6298's α = 1/8
		}
	}
	if dropped || (l.c.LatencyThreshold > 0 && rtt > l.c.LatencyThreshold) {
		if l.lastCut.IsZero() || now.Sub(l.lastCut) >= l.srtt {
			l.lastCut = now
			l.set(math.Floor(l.lim * l.c.Backoff))
		}
		return
	}
	if 2*n >= int64(l.lim) {
		l.set(l.lim + 1)
	}
}

// gradient adds one sample to the open window and closes it when it is
// due; under mu.
func (l *AdaptiveLimiter) gradient(now time.Time, rtt time.Duration, dropped bool, n int64) {
	if l.winStart.IsZero() {
		l.winStart = now
	}
	if dropped {
		l.winDrp++
	} else {
		l.winN++
		l.winSum += rtt
	}
	l.winPeak = max(l.winPeak, n)
	if now.Sub(l.winStart) < l.c.Window || l.winN+l.winDrp < l.c.MinSamples {
		return
	}
	lim := l.lim
	switch {
	case l.winDrp > 0:
		l.set(lim * l.c.Backoff)
	default:
		actual := l.winSum / time.Duration(l.winN)
		noload := l.noload(now, actual)
		g := math.Min(math.Max(float64(noload)/float64(actual), minGradient), 1)
		q := float64(l.c.Queue)
		if q == 0 {
			q = math.Sqrt(lim)
		}
		target := lim*g + q
		if target > lim && 2*l.winPeak < int64(lim) {
			target = lim // not in use: no growth
		}
		l.set(lim + l.c.Smoothing*(target-lim))
	}
	l.winStart, l.winN, l.winDrp, l.winSum, l.winPeak = now, 0, 0, 0, 0
}

// noload records a window's mean RTT and returns RTT_noload: the least
// window mean of the current and the previous half of NoLoadWindow.
func (l *AdaptiveLimiter) noload(now time.Time, rtt time.Duration) time.Duration {
	if l.nlStart.IsZero() || now.Sub(l.nlStart) >= l.c.NoLoadWindow/2 {
		l.nlOld, l.nlCur, l.nlStart = l.nlCur, rtt, now
	} else if rtt < l.nlCur {
		l.nlCur = rtt
	}
	if l.nlOld > 0 && l.nlOld < l.nlCur {
		return l.nlOld
	}
	return l.nlCur
}

// NoLoadRTT returns the gradient's current RTT_noload (0 before its first
// window, and for aimd).
func (l *AdaptiveLimiter) NoLoadRTT() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nlOld > 0 && l.nlOld < l.nlCur {
		return l.nlOld
	}
	return l.nlCur
}

// Limit returns the current limit (the edge_adaptive_limit metric).
func (l *AdaptiveLimiter) Limit() int64 { return l.limit.Load() }

// InFlight returns the requests in flight under the limiter (the
// edge_adaptive_in_flight metric).
func (l *AdaptiveLimiter) InFlight() int64 { return l.inFlight.Load() }

// explainAdaptive decides, for Explain (which runs no admission and takes
// no slot), each matching adaptive rule as admit would now: a request of
// d's priority would be shed while the rule has its limit × the priority's
// share in flight. A shed wins over what the store said, as it comes before
// the store call in Check; a request a deny rule or an identity rejected
// never reaches admission, and is left as it is.
func (e *Engine) explainAdaptive(p *Policy, s *Scratch, d *Decision) {
	if !p.Shedding.adaptive {
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
		if m.Rule.Adaptive == nil || m.Op >= 0 || m.Outcome != OutcomeSkip {
			continue
		}
		l := e.adaptiveLimiter(m.Rule)
		switch {
		case l.InFlight() < max(l.Limit()*share/perMille, 1):
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

var _ localSlot = (*AdaptiveLimiter)(nil)
