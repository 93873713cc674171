package failclosed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestConformance: with the deny cache off, a Store in front of a healthy
// memstore is transparent: it passes the suite every store passes,
// invalid ops and length mismatches included.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) rules.Store {
		m := newMemstore(t)
		s, err := New(m, Options{NoDenyCache: true, NoBackgroundProbe: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		inner   rules.Store
		opts    Options
		wantErr string
	}{
		{"zero_value", &fakeStore{}, Options{}, ""},
		{"nil_inner", nil, Options{}, "inner store is nil"},
		{"negative_fleet", &fakeStore{}, Options{FleetSize: -1}, "fleet size -1"},
		{"negative_threshold", &fakeStore{}, Options{FailureThreshold: -1}, "failure threshold -1"},
		{"negative_cooldown", &fakeStore{}, Options{Cooldown: -time.Second}, "cooldown -1s"},
		{"negative_span", &fakeStore{}, Options{FailureSpan: -time.Second}, "failure span -1s"},
		{"negative_health_interval", &fakeStore{}, Options{HealthInterval: -time.Second}, "health interval -1s"},
		{"negative_probe_timeout", &fakeStore{}, Options{ProbeTimeout: -time.Second}, "probe timeout -1s"},
		{"negative_local_keys", &fakeStore{}, Options{LocalMaxKeys: -1}, "local max keys -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(tt.inner, tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				if s.br.threshold != DefaultFailureThreshold || s.br.cooldown != int64(DefaultCooldown) ||
					s.br.probeTimeout != int64(DefaultProbeTimeout) || s.fleet.Load() != 1 || s.deny == nil {
					t.Errorf("defaults: got threshold %d cooldown %d probe timeout %d fleet %d", s.br.threshold, s.br.cooldown, s.br.probeTimeout, s.fleet.Load())
				}
				s.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestModes: when the store fails, every op is answered by its rule's
// on_store_error and marked StoreError, and Take returns nil.
func TestModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		mode        rules.StoreErrorMode
		wantAllowed bool
		want        Stats
	}{
		{"allow", rules.FailOpen, true, Stats{StoreErrors: 1, FallbackAllow: 1}},
		{"deny", rules.FailClosed, false, Stats{StoreErrors: 1, FallbackDeny: 1}},
		{"local", rules.FailLocal, true, Stats{StoreErrors: 1, LocalAllow: 1}},
		{"unknown_mode_denies", rules.FailLocal + 1, false, Stats{StoreErrors: 1, FallbackDeny: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeStore{err: errDown}
			s := newStore(t, f, Options{NoBackgroundProbe: true, Clock: newFakeClock()})
			res := take(t, s, storetest.Base, op(1, tt.mode, 10, time.Minute))
			if res[0].Allowed != tt.wantAllowed || !res[0].StoreError {
				t.Errorf("got %+v, want Allowed=%v StoreError=true", res[0], tt.wantAllowed)
			}
			if got := s.Stats(); got != tt.want {
				t.Errorf("got stats %+v, want %+v", got, tt.want)
			}
			if got := s.LastError(); !errors.Is(got, errDown) {
				t.Errorf("got last error %v, want %v", got, errDown)
			}
		})
	}
}

// TestMixedModes: one failed call with every mode answers each op by its
// own mode; a fail-closed refusal keeps the local take from consuming, as a
// refused request consumes nothing.
func TestMixedModes(t *testing.T) {
	t.Parallel()
	f := &fakeStore{err: errDown}
	s := newStore(t, f, Options{NoBackgroundProbe: true, Clock: newFakeClock(), FailureThreshold: 1000})
	now := storetest.Base
	local := op(3, rules.FailLocal, 2, time.Minute)
	for range 5 {
		res := take(t, s, now, op(1, rules.FailOpen, 1, time.Minute), op(2, rules.FailClosed, 1, time.Minute), local)
		want := []rules.Result{{Allowed: true, StoreError: true}, {StoreError: true}, {Allowed: true, Remaining: 2, ResetAfter: 30 * time.Second, StoreError: true}}
		for i := range want {
			if res[i] != want[i] {
				t.Fatalf("op %d: got %+v, want %+v", i, res[i], want[i])
			}
		}
	}
	// The local bucket is untouched: its 2 units are still there.
	for i, want := range []bool{true, true, false} {
		if res := take(t, s, now, local); res[0].Allowed != want || !res[0].StoreError {
			t.Errorf("local take %d: got %+v, want Allowed=%v StoreError=true", i, res[0], want)
		}
	}
	// A dry-run fail-closed op refuses nothing, so the local take consumes.
	dry := op(4, rules.FailClosed, 1, time.Minute)
	dry.Enforce = false
	local2 := op(5, rules.FailLocal, 1, time.Minute)
	if res := take(t, s, now, dry, local2); res[0].Allowed || !res[1].Allowed {
		t.Fatalf("got %+v, want the dry-run op refused and the local one allowed", res)
	}
	if res := take(t, s, now, local2); res[0].Allowed {
		t.Errorf("got %+v, want the local bucket of 1 spent", res[0])
	}
}

// TestLocalLimit: the local bucket runs the op's algorithm at ⌈limit ÷
// fleet⌉, at least 1, on the same key.
func TestLocalLimit(t *testing.T) {
	t.Parallel()
	algs := []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket, rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog}
	tests := []struct {
		limit       int64
		fleet       int
		wantAllowed int
	}{
		{10, 3, 4},
		{1, 5, 1},
		{5, 0, 5}, // FleetSize 0 means 1
		{9, 3, 3},
		{100, 1000, 1},
	}
	for _, tt := range tests {
		for _, alg := range algs {
			t.Run(alg.String(), func(t *testing.T) {
				t.Parallel()
				s := newStore(t, &fakeStore{err: errDown}, Options{FleetSize: tt.fleet, NoBackgroundProbe: true, Clock: newFakeClock()})
				o := op(1, rules.FailLocal, tt.limit, time.Hour)
				o.Algorithm = alg
				now := storetest.Base
				allowed := 0
				for range 2 * tt.limit {
					res := take(t, s, now, o)
					if !res[0].StoreError {
						t.Fatalf("got %+v, want StoreError", res[0])
					}
					if res[0].Allowed {
						allowed++
					} else if res[0].RetryAfter <= 0 {
						t.Errorf("refused with RetryAfter %v, want > 0", res[0].RetryAfter)
					}
					now = now.Add(time.Microsecond)
				}
				if allowed != tt.wantAllowed {
					t.Errorf("limit %d fleet %d: got %d allowed, want %d", tt.limit, tt.fleet, allowed, tt.wantAllowed)
				}
				st := s.Stats()
				if st.LocalAllow != uint64(tt.wantAllowed) || st.LocalDeny != uint64(2*tt.limit)-uint64(tt.wantAllowed) {
					t.Errorf("got stats %+v", st)
				}
			})
		}
	}
}

func TestSetFleetSize(t *testing.T) {
	t.Parallel()
	s := newStore(t, &fakeStore{err: errDown}, Options{FleetSize: 2, NoBackgroundProbe: true, Clock: newFakeClock()})
	s.SetFleetSize(5)
	o := op(1, rules.FailLocal, 10, time.Hour)
	if res := take(t, s, storetest.Base, o, op(2, rules.FailLocal, 10, time.Hour)); res[0].Remaining != 1 {
		t.Errorf("got %+v, want the bucket of ⌈10/5⌉ = 2 left with 1", res[0])
	}
	s.SetFleetSize(0)
	if got := s.fleet.Load(); got != 1 {
		t.Errorf("got fleet %d, want 1", got)
	}
}

// TestCallerBugs: an invalid call is an error, reaches nobody and never
// counts against the store.
func TestCallerBugs(t *testing.T) {
	t.Parallel()
	f := &fakeStore{}
	s := newStore(t, f, Options{NoBackgroundProbe: true, FailureThreshold: 1})
	bad := op(1, rules.FailClosed, 10, time.Minute)
	bad.Limit = 0
	for range 3 {
		if err := s.Take(context.Background(), storetest.Base, []rules.Op{bad}, make([]rules.Result, 1)); !errors.Is(err, rules.ErrInvalidLimits) {
			t.Errorf("got %v, want ErrInvalidLimits", err)
		}
		if err := s.Take(context.Background(), storetest.Base, []rules.Op{op(1, 0, 1, time.Minute)}, nil); !errors.Is(err, rules.ErrLenMismatch) {
			t.Errorf("len mismatch: got %v, want rules.ErrLenMismatch", err)
		}
	}
	if f.calls.Load() != 0 || s.State() != BreakerClosed || s.Stats() != (Stats{}) {
		t.Errorf("got %d inner calls, state %v, stats %+v; want none, closed, zero", f.calls.Load(), s.State(), s.Stats())
	}
}

// TestCancelled: an inner error while the caller's ctx is cancelled is
// answered but not held against the store.
func TestCancelled(t *testing.T) {
	t.Parallel()
	f := &fakeStore{err: context.Canceled}
	s := newStore(t, f, Options{NoBackgroundProbe: true, FailureThreshold: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := make([]rules.Result, 1)
	if err := s.Take(ctx, storetest.Base, []rules.Op{op(1, rules.FailClosed, 1, time.Minute)}, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Allowed || !res[0].StoreError {
		t.Errorf("got %+v, want a fail-closed answer", res[0])
	}
	if st := s.Stats(); s.State() != BreakerClosed || st.StoreErrors != 0 || st.FallbackDeny != 1 {
		t.Errorf("got state %v stats %+v, want closed, no store error, one deny", s.State(), st)
	}
}

// TestCloseOwnsInner: Close closes the inner store once, however often it
// is called.
func TestCloseOwnsInner(t *testing.T) {
	t.Parallel()
	f := &fakeStore{}
	s, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.closed.Load(); got != 1 {
		t.Errorf("inner closed %d times, want 1", got)
	}
}

func TestBreakerStateString(t *testing.T) {
	t.Parallel()
	for st, want := range map[BreakerState]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half-open", 7: "unknown"} {
		if got := st.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
