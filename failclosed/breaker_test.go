package failclosed

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// breakerStore returns a Store with a request-driven breaker on a fake
// clock, in front of an inner store that fails.
func breakerStore(t *testing.T, opts Options) (*Store, *fakeStore, *fakeClock) {
	t.Helper()
	f := &fakeStore{err: errDown}
	c := newFakeClock()
	opts.Clock, opts.NoBackgroundProbe = c, true
	return newStore(t, f, opts), f, c
}

func TestBreakerOpens(t *testing.T) {
	t.Parallel()
	s, f, _ := breakerStore(t, Options{})
	o := op(1, rules.FailClosed, 10, time.Minute)
	for i := range DefaultFailureThreshold {
		if s.State() != BreakerClosed {
			t.Fatalf("after %d failures: got %v, want closed", i, s.State())
		}
		take(t, s, storetest.Base, o)
	}
	if s.State() != BreakerOpen {
		t.Fatalf("after %d failures: got %v, want open", DefaultFailureThreshold, s.State())
	}
	for range 100 {
		if res := take(t, s, storetest.Base, o); res[0].Allowed || !res[0].StoreError {
			t.Fatalf("open: got %+v, want a fail-closed answer", res[0])
		}
	}
	if got := f.calls.Load(); got != DefaultFailureThreshold {
		t.Errorf("got %d inner calls, want %d: an open breaker must not call the store", got, DefaultFailureThreshold)
	}
	want := Stats{StoreErrors: 3, ShortCircuits: 100, FallbackDeny: 103, BreakerOpens: 1}
	if got := s.Stats(); got != want {
		t.Errorf("got stats %+v, want %+v", got, want)
	}
}

// TestBreakerFailureSpan: with FailureSpan, a burst of failures (one
// coalesced round trip failing all its calls at once) does not open the
// breaker; failures that go on for the span do, and a success in between
// starts the run again.
func TestBreakerFailureSpan(t *testing.T) {
	t.Parallel()
	const span = 10 * time.Millisecond
	s, f, c := breakerStore(t, Options{FailureSpan: span})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range 50 { // one burst, at one instant
		take(t, s, storetest.Base, o)
	}
	if s.State() != BreakerClosed {
		t.Fatalf("after a burst of 50 failures at one instant: got %v, want closed", s.State())
	}
	c.Advance(span - time.Microsecond)
	take(t, s, storetest.Base, o)
	if s.State() != BreakerClosed {
		t.Fatalf("failures over %v: got %v, want closed until %v", span-time.Microsecond, s.State(), span)
	}
	f.setErr(nil)
	take(t, s, storetest.Base, o) // a success ends the run
	f.setErr(errDown)
	c.Advance(time.Microsecond)
	take(t, s, storetest.Base, o)
	take(t, s, storetest.Base, o)
	take(t, s, storetest.Base, o)
	if s.State() != BreakerClosed {
		t.Fatalf("a new run of 3 failures after a success: got %v, want closed", s.State())
	}
	c.Advance(span)
	take(t, s, storetest.Base, o)
	if s.State() != BreakerOpen {
		t.Fatalf("failures lasting %v: got %v, want open", span, s.State())
	}
	if got := s.Stats().BreakerOpens; got != 1 {
		t.Errorf("breaker opens: got %d, want 1", got)
	}
}

// TestBreakerSuccessResets: failures must be consecutive to open it.
func TestBreakerSuccessResets(t *testing.T) {
	t.Parallel()
	s, f, _ := breakerStore(t, Options{})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range 5 {
		f.setErr(errDown)
		take(t, s, storetest.Base, o)
		take(t, s, storetest.Base, o)
		f.setErr(nil)
		if res := take(t, s, storetest.Base, o); !res[0].Allowed || res[0].StoreError {
			t.Fatalf("healthy: got %+v", res[0])
		}
	}
	if s.State() != BreakerClosed || s.Stats().BreakerOpens != 0 {
		t.Errorf("got %v and %d opens, want closed and none", s.State(), s.Stats().BreakerOpens)
	}
}

// TestBreakerHalfOpen: after the cooldown exactly one call probes; while it
// is in flight every other call fails fast; its success closes the breaker.
func TestBreakerHalfOpen(t *testing.T) {
	t.Parallel()
	s, f, c := breakerStore(t, Options{})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range DefaultFailureThreshold {
		take(t, s, storetest.Base, o)
	}
	c.Advance(DefaultCooldown - time.Nanosecond)
	take(t, s, storetest.Base, o)
	if got := f.calls.Load(); got != DefaultFailureThreshold {
		t.Fatalf("before the cooldown: got %d inner calls, want %d", got, DefaultFailureThreshold)
	}
	c.Advance(time.Nanosecond)

	// The probe blocks in the store, which has come back.
	block, entered := make(chan struct{}), make(chan struct{})
	f.setErr(nil)
	f.setBlock(block, entered)
	probeDone := make(chan []rules.Result)
	go func() {
		res := make([]rules.Result, 1)
		s.Take(context.Background(), storetest.Base, []rules.Op{o}, res)
		probeDone <- res
	}()
	<-entered
	if s.State() != BreakerHalfOpen {
		t.Fatalf("probe in flight: got %v, want half-open", s.State())
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			res := make([]rules.Result, 1)
			s.Take(context.Background(), storetest.Base, []rules.Op{o}, res)
			if !res[0].StoreError {
				t.Errorf("half-open: got %+v, want a fallback answer", res[0])
			}
		})
	}
	wg.Wait()
	if got := f.calls.Load(); got != DefaultFailureThreshold+1 {
		t.Errorf("half-open: got %d inner calls, want %d (one probe)", got, DefaultFailureThreshold+1)
	}
	f.setBlock(nil, nil)
	close(block)
	if res := <-probeDone; !res[0].Allowed || res[0].StoreError {
		t.Errorf("probe: got %+v, want the store's answer", res[0])
	}
	if s.State() != BreakerClosed {
		t.Errorf("after a good probe: got %v, want closed", s.State())
	}
	if res := take(t, s, storetest.Base, o); res[0].StoreError {
		t.Errorf("closed: got %+v, want the store's answer", res[0])
	}
	if st := s.Stats(); st.Probes != 1 || st.ShortCircuits != 51 {
		t.Errorf("got stats %+v, want 1 probe and 51 short circuits", st)
	}
}

// TestBreakerProbeFails: a failed probe reopens the breaker for another
// cooldown.
func TestBreakerProbeFails(t *testing.T) {
	t.Parallel()
	s, f, c := breakerStore(t, Options{})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range DefaultFailureThreshold {
		take(t, s, storetest.Base, o)
	}
	for round := range 3 {
		c.Advance(DefaultCooldown)
		calls := f.calls.Load()
		take(t, s, storetest.Base, o) // the probe, which fails
		take(t, s, storetest.Base, o) // fails fast
		if got := f.calls.Load() - calls; got != 1 {
			t.Errorf("round %d: got %d inner calls, want 1 probe", round, got)
		}
		if s.State() != BreakerOpen {
			t.Errorf("round %d: got %v, want open again", round, s.State())
		}
	}
	if st := s.Stats(); st.BreakerOpens != 1 || st.Probes != 3 || st.StoreErrors != 6 {
		t.Errorf("got stats %+v, want 1 open, 3 probes, 6 store errors", st)
	}
}

// TestBreakerStuckProbe: a probe that never answers (an inner store
// ignoring its budget) is given up on after ProbeTimeout.
func TestBreakerStuckProbe(t *testing.T) {
	t.Parallel()
	s, f, c := breakerStore(t, Options{})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range DefaultFailureThreshold {
		take(t, s, storetest.Base, o)
	}
	c.Advance(DefaultCooldown)
	block, entered := make(chan struct{}), make(chan struct{})
	f.setBlock(block, entered)
	done := make(chan struct{})
	go func() {
		defer close(done)
		take(t, s, storetest.Base, o)
	}()
	<-entered
	f.setBlock(nil, nil)
	f.setErr(nil)
	c.Advance(DefaultProbeTimeout - time.Nanosecond)
	if res := take(t, s, storetest.Base, o); !res[0].StoreError {
		t.Fatalf("probe in flight: got %+v, want a fallback answer", res[0])
	}
	c.Advance(time.Nanosecond)
	if res := take(t, s, storetest.Base, o); res[0].StoreError || s.State() != BreakerClosed {
		t.Errorf("after the probe timeout: got %+v and %v, want a new probe that closes the breaker", res[0], s.State())
	}
	close(block)
	<-done
	// The stuck probe's late failure must not reopen a closed breaker.
	if s.State() != BreakerClosed {
		t.Errorf("after the stuck probe failed: got %v, want closed", s.State())
	}
}

// TestRecoveryByRequests: with the defaults and traffic, a node is healthy
// again within one second of its store returning.
func TestRecoveryByRequests(t *testing.T) {
	t.Parallel()
	s, f, c := breakerStore(t, Options{})
	o := op(1, rules.FailOpen, 10, time.Minute)
	for range 10 {
		take(t, s, storetest.Base, o)
		c.Advance(30 * time.Millisecond)
	}
	if degraded, _ := s.Degraded(); !degraded {
		t.Fatal("got healthy during the outage, want degraded")
	}
	f.setErr(nil)
	var healthyAfter time.Duration
	for step := time.Duration(0); step <= time.Second; step += 10 * time.Millisecond {
		take(t, s, storetest.Base, o) // a request every 10ms
		if degraded, _ := s.Degraded(); !degraded {
			healthyAfter = step
			break
		}
		c.Advance(10 * time.Millisecond)
		healthyAfter = step + 10*time.Millisecond
	}
	if healthyAfter > time.Second || s.State() != BreakerClosed {
		t.Errorf("got healthy %v after the store returned (state %v), want within 1s", healthyAfter, s.State())
	}
}

// TestRecoveryInBackground: with no traffic at all, the background prober
// notices the store coming back, within one second with the defaults.
func TestRecoveryInBackground(t *testing.T) {
	tests := []struct {
		name string
		ping bool
	}{{"take_probe", false}, {"ping", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &pingStore{}
				var inner rules.Store = &p.fakeStore
				if tt.ping {
					inner = p
				}
				p.setErr(errDown)
				s, err := New(inner, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				o := op(1, rules.FailOpen, 10, time.Minute)
				for range DefaultFailureThreshold {
					take(t, s, time.Now(), o)
				}
				// A long outage: the prober keeps probing, and failing.
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if s.State() == BreakerClosed {
					t.Fatal("got closed during the outage")
				}
				probes := s.Stats().Probes
				if probes < 40 || probes > 51 {
					t.Errorf("got %d probes in 10s, want about one per cooldown", probes)
				}
				if tt.ping && p.pings.Load() != int64(probes) {
					t.Errorf("got %d pings for %d probes, want Ping used", p.pings.Load(), probes)
				}
				p.setErr(nil)
				back := time.Now()
				for {
					if degraded, _ := s.Degraded(); !degraded {
						break
					}
					if time.Since(back) > time.Second {
						t.Fatalf("still degraded 1s after the store returned (state %v)", s.State())
					}
					time.Sleep(time.Millisecond)
				}
				if took := time.Since(back); took > 2*DefaultCooldown {
					t.Errorf("healthy %v after the store returned, want within 2 cooldowns", took)
				}
				if res := take(t, s, time.Now(), o); res[0].StoreError {
					t.Errorf("got %+v, want the store's answer", res[0])
				}
			})
		})
	}
}

// TestProberStopsOnClose: Close stops the prober while it waits, and
// while a probe is in flight (the probe's ctx is cancelled).
func TestProberStopsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStore{err: errDown}
		s, err := New(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range DefaultFailureThreshold {
			take(t, s, time.Now(), op(1, rules.FailOpen, 1, time.Minute))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s, err := New(ctxStore{}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range DefaultFailureThreshold {
			take(t, s, time.Now(), op(1, rules.FailOpen, 1, time.Minute))
		}
		time.Sleep(DefaultCooldown + time.Millisecond)
		synctest.Wait() // the prober is blocked in its probe
		if s.State() != BreakerHalfOpen {
			t.Fatalf("got %v, want a probe in flight", s.State())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// ctxStore fails requests at once and blocks probes until their ctx ends.
type ctxStore struct{}

func (ctxStore) Take(ctx context.Context, _ time.Time, ops []rules.Op, _ []rules.Result) error {
	if ops[0].Key == probeKey {
		<-ctx.Done()
		return ctx.Err()
	}
	return errDown
}

func (ctxStore) Close() error { return nil }

// TestDegraded: the reason names the last error, the state and since when.
func TestDegraded(t *testing.T) {
	t.Parallel()
	s, f, c := breakerStore(t, Options{FailureThreshold: 1})
	if degraded, reason := s.Degraded(); degraded || reason != "" {
		t.Fatalf("fresh: got %v %q, want healthy", degraded, reason)
	}
	c.Advance(time.Minute)
	take(t, s, storetest.Base, op(1, rules.FailOpen, 1, time.Minute))
	degraded, reason := s.Degraded()
	if !degraded {
		t.Fatal("got healthy, want degraded")
	}
	for _, want := range []string{"store unreachable: " + errDown.Error(), "breaker open since 2023-11-14T00:01:00Z"} {
		if !strings.Contains(reason, want) {
			t.Errorf("got reason %q, want it to contain %q", reason, want)
		}
	}
	// A failed probe later keeps the outage's start.
	c.Advance(time.Hour)
	f.setErr(errors.New("i/o timeout"))
	take(t, s, storetest.Base, op(1, rules.FailOpen, 1, time.Minute))
	if _, reason := s.Degraded(); !strings.Contains(reason, "i/o timeout; breaker open since 2023-11-14T00:01:00Z") {
		t.Errorf("after a failed probe: got %q", reason)
	}
	c.Advance(time.Hour)
	f.setErr(nil)
	take(t, s, storetest.Base, op(1, rules.FailOpen, 1, time.Minute))
	if degraded, reason := s.Degraded(); degraded {
		t.Errorf("recovered: got degraded %q", reason)
	}
}

// TestBreakerConcurrent hammers the breaker through outages and
// recoveries, for -race, and checks the store is never called while open.
func TestBreakerConcurrent(t *testing.T) {
	t.Parallel()
	s, f, c := breakerStore(t, Options{})
	o := op(1, rules.FailOpen, 1000, time.Second)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			res := make([]rules.Result, 1)
			for i := range 2000 {
				s.Take(context.Background(), storetest.Base, []rules.Op{o}, res)
				if g == 0 && i%100 == 0 {
					if i%200 == 0 {
						f.setErr(nil)
					} else {
						f.setErr(errDown)
					}
					c.Advance(DefaultCooldown)
				}
				s.State()
				s.Degraded()
				s.Stats()
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if total := uint64(f.calls.Load()) + st.ShortCircuits; total != 16000 {
		t.Errorf("inner calls %d + short circuits %d = %d, want 16000", f.calls.Load(), st.ShortCircuits, total)
	}
}
