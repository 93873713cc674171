package adaptive

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// Method is how an adaptive rule moves its limit.
type Method uint8

const (
	// Gradient: limit × RTT_noload ÷ RTT_actual + queue.
	Gradient Method = iota
	// AIMD: additive increase, multiplicative decrease.
	AIMD
)

// String returns the method's policy name.
func (m Method) String() string {
	if m == AIMD {
		return "aimd"
	}
	return "gradient"
}

// The adaptive { } defaults (docs/policy.md, "Adaptive concurrency").
const (
	DefaultMin          = 1
	DefaultMax          = 1000
	DefaultInitial      = 20
	DefaultWindow       = time.Second
	DefaultMinSamples   = 10
	DefaultNoLoadWindow = time.Minute
	DefaultSmoothing    = 0.5
	DefaultBackoff      = 0.9
	// MaxLimit bounds max.
	MaxLimit = 1 << 24
	// minGradient is the floor of the gradient: one window at most halves
	// the target, so one slow window cannot empty the route.
	minGradient = 0.5
	// perMille is a share of 100% (rules.Slots' sharePerMille).
	perMille = 1000
)

// Config is a rule's adaptive { } block: the in-flight limit of the
// rule's route on this node is found from the origin's latency rather than
// written. The block's compile fills every field (defaults included). It is
// the rule's rules.LocalLimit stage (adaptive.go).
type Config struct {
	// Method is gradient or aimd.
	Method Method
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

// Limiter is one adaptive rule's limiter on this node: its current
// limit and its requests in flight, the rule's rules.Slots. It is safe for
// concurrent use and allocates nothing per request: TryAcquire is a
// compare-and-swap, Release one uncontended lock. It lives in the Engine
// by rule ID (rules.Engine.LocalSlots), so a reload keeps what it has
// learnt.
type Limiter struct {
	inFlight atomic.Int64
	limit    atomic.Int64 // ⌊lim⌋, what TryAcquire reads
	cfg      atomic.Pointer[Config]

	mu  sync.Mutex
	c   Config  // *cfg, under mu
	lim float64 // the limit, fractional between moves

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

// newLimiter returns a limiter at cfg.Initial.
func newLimiter(cfg *Config) *Limiter {
	l := &Limiter{}
	l.c = *cfg
	l.cfg.Store(cfg)
	l.set(float64(cfg.Initial))
	return l
}

// set stores lim within [Min, Max]; under mu.
func (l *Limiter) set(lim float64) {
	lim = math.Min(math.Max(lim, float64(l.c.Min)), float64(l.c.Max))
	l.lim = lim
	l.limit.Store(int64(lim))
}

// rebind applies a reloaded rule's adaptive { } to the limiter: the limit
// learnt so far is kept within the new bounds; a new method starts afresh
// from what it has learnt. It does nothing when the block is unchanged.
func (l *Limiter) rebind(cfg *Config) {
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

// TryAcquire takes one in-flight slot when fewer than the current limit ×
// sharePerMille ÷ 1000 (at least 1) are in flight, and reports whether it
// did. share is the request's priority's share of the limit (load
// shedding's shed_at).
func (l *Limiter) TryAcquire(sharePerMille int64) bool {
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

// Admits reports whether TryAcquire would take a slot now (fewer than the
// limit × sharePerMille ÷ 1000, at least 1, in flight), and takes none:
// Engine.Explain's answer.
func (l *Limiter) Admits(sharePerMille int64) bool {
	return l.InFlight() < max(l.Limit()*sharePerMille/perMille, 1)
}

// Release gives one slot back, feeding the round-trip sample (answered, or
// dropped: sent but not answered) to the limit's method. A slot never sent
// (neither) is a sample of nothing; an answered one without a round-trip
// time (rtt ≤ 0: Forwarding was not called) only frees its slot.
func (l *Limiter) Release(now time.Time, rtt time.Duration, answered, dropped bool) {
	n := l.inFlight.Add(-1) + 1 // in flight when it finished, itself included
	if !dropped && (!answered || rtt <= 0) {
		return
	}
	l.mu.Lock()
	if l.c.Method == AIMD {
		l.aimd(now, rtt, dropped, n)
	} else {
		l.gradient(now, rtt, dropped, n)
	}
	l.mu.Unlock()
}

// aimd applies one sample; under mu.
func (l *Limiter) aimd(now time.Time, rtt time.Duration, dropped bool, n int64) {
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
func (l *Limiter) gradient(now time.Time, rtt time.Duration, dropped bool, n int64) {
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
func (l *Limiter) noload(now time.Time, rtt time.Duration) time.Duration {
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
func (l *Limiter) NoLoadRTT() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nlOld > 0 && l.nlOld < l.nlCur {
		return l.nlOld
	}
	return l.nlCur
}

// Limit returns the current limit (the edge_adaptive_limit metric).
func (l *Limiter) Limit() int64 { return l.limit.Load() }

// InFlight returns the requests in flight under the limiter (the
// edge_adaptive_in_flight metric).
func (l *Limiter) InFlight() int64 { return l.inFlight.Load() }

var _ rules.Slots = (*Limiter)(nil)
