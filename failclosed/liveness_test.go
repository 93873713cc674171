package failclosed

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// liveStore is a fakeStore that is a Liveness: replies is the count of
// answers its backend sent, which the test moves by hand (a late reply to
// a call that had already failed by its budget is one that moves it while
// Take fails).
type liveStore struct {
	fakeStore
	replies atomic.Uint64
}

func (l *liveStore) Replies() uint64 { return l.replies.Load() }

// liveBreakerStore is breakerStore over a liveStore.
func liveBreakerStore(t *testing.T, opts Options) (*Store, *liveStore, *fakeClock) {
	t.Helper()
	l := &liveStore{fakeStore: fakeStore{err: errTimeout}}
	c := newFakeClock()
	opts.Clock, opts.NoBackgroundProbe = c, true
	return newStore(t, l, opts), l, c
}

// errTimeout is a budget miss, as redisstore reports one.
var errTimeout = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string {
	return "redisstore: no reply within the time budget (i/o timeout)"
}
func (timeoutError) Timeout() bool { return true }

// TestBreakerLateIsNotLost: calls that miss their budget while the store
// goes on answering (its replies come, late) never open the breaker: every
// call still reaches the store, and each one that failed is answered by
// its own on_store_error (here deny: refused, StoreError). When the
// replies stop, the same failures open it after FailureSpan.
func TestBreakerLateIsNotLost(t *testing.T) {
	t.Parallel()
	const span = 10 * time.Millisecond
	s, l, c := liveBreakerStore(t, Options{FailureSpan: span})
	o := op(1, rules.FailClosed, 10, time.Minute)
	const calls = 400
	for i := range calls {
		if res := take(t, s, storetest.Base, o); res[0].Allowed || !res[0].StoreError {
			t.Fatalf("call %d: got %+v, want refused by on_store_error", i, res[0])
		}
		l.replies.Add(1) // its reply, after its budget
		c.Advance(span / 4)
	}
	if s.State() != BreakerClosed {
		t.Fatalf("failures over %v with replies arriving: got %v, want closed", calls*span/4, s.State())
	}
	st := s.Stats()
	if got := l.calls.Load(); got != calls || st.ShortCircuits != 0 {
		t.Errorf("got %d inner calls and %d short circuits, want %d and 0: a store that answers must keep being asked", got, st.ShortCircuits, calls)
	}
	if st.OpensWithheld == 0 || st.BreakerOpens != 0 {
		t.Errorf("got %d opens withheld and %d opens, want some and none", st.OpensWithheld, st.BreakerOpens)
	}
	if st.StoreErrors != calls || st.FallbackDeny != calls {
		t.Errorf("got %d store errors and %d fallback denials, want %d each", st.StoreErrors, st.FallbackDeny, calls)
	}

	// Silence: the store sends nothing more. The run that began at the
	// last reply opens the breaker once it has lasted the span.
	for range DefaultFailureThreshold {
		take(t, s, storetest.Base, o)
	}
	c.Advance(span - time.Nanosecond)
	take(t, s, storetest.Base, o)
	if s.State() != BreakerClosed {
		t.Fatalf("silent for less than %v: got %v, want closed", span, s.State())
	}
	c.Advance(time.Nanosecond)
	take(t, s, storetest.Base, o)
	if s.State() != BreakerOpen {
		t.Fatalf("silent for %v: got %v, want open", span, s.State())
	}
	if got := s.Stats().BreakerOpens; got != 1 {
		t.Errorf("breaker opens: got %d, want 1", got)
	}
}

// TestBreakerLateProbe: an open breaker whose store answers (a call in
// flight when it opened, answered late) probes at once instead of
// answering every call by on_store_error for the rest of its Cooldown; a
// silent store waits the whole Cooldown as before.
func TestBreakerLateProbe(t *testing.T) {
	t.Parallel()
	s, l, c := liveBreakerStore(t, Options{})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range DefaultFailureThreshold {
		take(t, s, storetest.Base, o)
	}
	if s.State() != BreakerOpen {
		t.Fatalf("after %d silent failures: got %v, want open", DefaultFailureThreshold, s.State())
	}
	c.Advance(DefaultCooldown / 2)
	for range 10 {
		take(t, s, storetest.Base, o)
	}
	if got := l.calls.Load(); got != DefaultFailureThreshold {
		t.Fatalf("open, silent: got %d inner calls, want %d", got, DefaultFailureThreshold)
	}
	l.setErr(nil)
	l.replies.Add(1)
	if res := take(t, s, storetest.Base, o); !res[0].Allowed || res[0].StoreError {
		t.Errorf("after a reply, within the cooldown: got %+v, want the store's answer (a probe)", res[0])
	}
	if s.State() != BreakerClosed {
		t.Errorf("after a good probe: got %v, want closed", s.State())
	}
	if st := s.Stats(); st.Probes != 1 || st.ShortCircuits != 10 {
		t.Errorf("got %+v, want 1 probe and 10 short circuits", st)
	}
}

// TestBreakerLateProbeFails: a probe set off by a reply that then fails
// reopens the breaker with the reply count of that moment, so the next
// call waits out the Cooldown again unless another reply comes.
func TestBreakerLateProbeFails(t *testing.T) {
	t.Parallel()
	s, l, c := liveBreakerStore(t, Options{})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range DefaultFailureThreshold {
		take(t, s, storetest.Base, o)
	}
	l.replies.Add(1)
	take(t, s, storetest.Base, o) // the probe, which fails
	if got := l.calls.Load(); got != DefaultFailureThreshold+1 || s.State() != BreakerOpen {
		t.Fatalf("got %d inner calls and %v, want %d and open", got, s.State(), DefaultFailureThreshold+1)
	}
	c.Advance(DefaultCooldown - time.Nanosecond)
	for range 5 {
		take(t, s, storetest.Base, o)
	}
	if got := l.calls.Load(); got != DefaultFailureThreshold+1 {
		t.Errorf("no reply since the failed probe: got %d inner calls, want %d", got, DefaultFailureThreshold+1)
	}
	c.Advance(time.Nanosecond)
	take(t, s, storetest.Base, o)
	if got := l.calls.Load(); got != DefaultFailureThreshold+2 {
		t.Errorf("after the cooldown: got %d inner calls, want %d (a probe)", got, DefaultFailureThreshold+2)
	}
}
