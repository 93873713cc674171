package failclosed

import "sync/atomic"

// BreakerState is the circuit breaker's state.
type BreakerState uint8

const (
	// BreakerClosed: the store is healthy and every call reaches it.
	BreakerClosed BreakerState = iota
	// BreakerOpen: the store failed FailureThreshold times in a row (over
	// FailureSpan at least); calls
	// are answered by on_store_error without reaching it until Cooldown has
	// passed.
	BreakerOpen
	// BreakerHalfOpen: one probe is in flight; other calls fail fast.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// breaker is a lock-free circuit breaker. Its state and the time of its last
// transition share one atomic word, so a transition is one compare-and-swap
// and no caller ever sees a state with another state's time. Times are
// nanoseconds since the Store's epoch (its clock at New), never negative.
//
// With live set (the inner store is a Liveness), the breaker opens on
// silence, not on failures: a run of failures during which the store sent
// replies (late ones, to calls that had already failed by their budget)
// does not open it, and an open breaker that sees a reply probes at once
// instead of waiting out its Cooldown.
type breaker struct {
	word   atomic.Uint64 // pack(state, t)
	fails  atomic.Int64  // consecutive failures; reset by a success
	first  atomic.Int64  // when the run of consecutive failures began
	outage atomic.Int64  // when the breaker last left closed

	live      Liveness      // nil: the inner store cannot tell late from lost
	runHeard  atomic.Uint64 // live.Replies() when the run of failures began
	openHeard atomic.Uint64 // live.Replies() when the breaker last opened

	threshold    int64
	span         int64 // ns the run must last before it opens the breaker (Options.FailureSpan)
	cooldown     int64 // ns an open breaker waits before a probe
	probeTimeout int64 // ns after which a silent probe is given up on
}

func pack(st BreakerState, t int64) uint64 { return uint64(max(t, 0))<<2 | uint64(st) }

func unpack(w uint64) (BreakerState, int64) { return BreakerState(w & 3), int64(w >> 2) }

// closed reports whether w is the closed state; the hot path's only check.
func closed(w uint64) bool { return BreakerState(w&3) == BreakerClosed }

// acquire decides, for a call at t that loaded w, whether it may call the
// store. probe is non-zero when the call is the half-open probe: the word
// the probe installed, which its outcome must compare against.
func (b *breaker) acquire(w uint64, t int64) (call bool, probe uint64) {
	st, at := unpack(w)
	switch st {
	case BreakerClosed:
		return true, 0
	case BreakerOpen:
		// A reply since the breaker opened (a call in flight then, answered
		// late) says the store is up: probe now rather than answer every
		// call by on_store_error for the rest of the cooldown.
		if t-at < b.cooldown && !b.heardSince(&b.openHeard) {
			return false, 0
		}
	case BreakerHalfOpen:
		// One probe at a time, unless the one in flight has been silent
		// for ProbeTimeout: an inner store that ignores its budget must
		// not hold the breaker half-open forever.
		if t-at < b.probeTimeout {
			return false, 0
		}
	}
	p := pack(BreakerHalfOpen, t)
	if b.word.CompareAndSwap(w, p) {
		return true, p
	}
	return false, 0
}

// success records a call the store answered. It closes the breaker, from
// any state: a store that answers is up, whichever call noticed. It
// reports whether the breaker was not closed before.
func (b *breaker) success() (recovered bool) {
	if b.fails.Load() != 0 { // no write, hence no cache-line traffic, when healthy
		b.fails.Store(0)
	}
	for {
		w := b.word.Load()
		if closed(w) {
			return false
		}
		if b.word.CompareAndSwap(w, pack(BreakerClosed, 0)) {
			return true
		}
	}
}

// failure records a failed call at t; probe is the word acquire returned
// for it. A failed probe reopens the breaker for another cooldown; a run of
// threshold failures lasting span opens a closed one, unless the store sent
// a reply during the run (live): then the run starts again at t, and
// withheld reports it. opened reports a transition from closed to open.
func (b *breaker) failure(t int64, probe uint64) (opened, withheld bool) {
	n := b.fails.Add(1)
	if n == 1 {
		b.startRun(t)
	}
	if probe != 0 {
		// Fails when another call closed the breaker meanwhile (the store
		// is back) or took over a silent probe: either way not ours.
		b.markOpen()
		b.word.CompareAndSwap(probe, pack(BreakerOpen, t))
		return false, false
	}
	w := b.word.Load()
	if !closed(w) || n < b.threshold || t-b.first.Load() < b.span {
		return false, false
	}
	if b.heardSince(&b.runHeard) {
		// Late, not lost: the store is answering, only after the calls'
		// budgets. Each of those calls has had its on_store_error; the
		// others keep reaching the store.
		b.startRun(t)
		return false, true
	}
	b.markOpen()
	if !b.word.CompareAndSwap(w, pack(BreakerOpen, t)) {
		return false, false
	}
	b.outage.Store(t)
	return true, false
}

// startRun records t, and the store's reply count, as the beginning of a
// run of failures.
func (b *breaker) startRun(t int64) {
	b.first.Store(t)
	if b.live != nil {
		b.runHeard.Store(b.live.Replies())
	}
}

// markOpen records the store's reply count as the breaker opens (or is
// about to): a reply after it is one acquire probes on.
func (b *breaker) markOpen() {
	if b.live != nil {
		b.openHeard.Store(b.live.Replies())
	}
}

// heardSince reports whether the store has sent a reply since mark was
// recorded; false when the store cannot tell (live nil).
func (b *breaker) heardSince(mark *atomic.Uint64) bool {
	return b.live != nil && b.live.Replies() != mark.Load()
}

// state returns the current state.
func (b *breaker) state() BreakerState {
	st, _ := unpack(b.word.Load())
	return st
}
