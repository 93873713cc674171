//go:build !race

package failclosed

import (
	"context"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestTakeAllocs guards the hot path: failclosed adds no allocation to a
// healthy store's Take (memstore's, which allocates nothing for keys that
// exist), nor from the deny cache, and a store outage answered by allow,
// deny or local (for keys the local store holds) allocates nothing either.
func TestTakeAllocs(t *testing.T) {
	ops := func(mode rules.StoreErrorMode, limit int64) []rules.Op {
		return []rules.Op{op(1, mode, limit, time.Second), op(2, mode, 1_000_000, time.Second), op(3, mode, 1_000_000, time.Second)}
	}
	tests := []struct {
		name    string
		inner   func(t *testing.T) rules.Store
		opts    Options
		ops     []rules.Op
		allowed bool
		want    func(*Store) bool
	}{
		{"healthy/allowed", memInner, Options{}, ops(rules.FailOpen, 1_000_000), true, nil},
		{"healthy/refused_by_store", memInner, Options{NoDenyCache: true}, ops(rules.FailOpen, 3), false, nil},
		{"healthy/refused_by_deny_cache", memInner, Options{}, ops(rules.FailOpen, 3), false,
			func(s *Store) bool { return s.Stats().DenyCacheHits > 1000 }},
		// Refused every other call, with a RetryAfter of one step: the
		// cache misses, the store refuses, the refusal is inserted.
		{"healthy/refused_and_cached", memInner, Options{}, []rules.Op{op(1, rules.FailOpen, 1, 20*time.Microsecond)}, true,
			func(s *Store) bool { return s.deny.horizon.Load() > 0 }},
		{"down/allow/breaker_closed", downInner, Options{FailureThreshold: 1 << 30}, ops(rules.FailOpen, 3), true,
			func(s *Store) bool { return s.Stats().StoreErrors > 1000 }},
		{"down/deny/breaker_closed", downInner, Options{FailureThreshold: 1 << 30}, ops(rules.FailClosed, 3), false,
			func(s *Store) bool { return s.Stats().StoreErrors > 1000 }},
		{"down/allow/breaker_open", downInner, Options{}, ops(rules.FailOpen, 3), true,
			func(s *Store) bool { return s.Stats().ShortCircuits > 1000 }},
		{"down/deny/breaker_open", downInner, Options{}, ops(rules.FailClosed, 3), false,
			func(s *Store) bool { return s.Stats().ShortCircuits > 1000 }},
		{"down/local/allowed", downInner, Options{FleetSize: 3}, ops(rules.FailLocal, 1_000_000), true,
			func(s *Store) bool { return s.Stats().LocalAllow > 1000 }},
		{"down/local/refused", downInner, Options{FleetSize: 3}, ops(rules.FailLocal, 3), false,
			func(s *Store) bool { return s.Stats().LocalDeny > 1000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.NoBackgroundProbe = true
			opts.Clock = newFakeClock()
			s := newStore(t, tt.inner(t), opts)
			ctx := context.Background()
			res := make([]rules.Result, len(tt.ops))
			now := storetest.Base
			call := func() {
				now = now.Add(10 * time.Microsecond)
				if err := s.Take(ctx, now, tt.ops, res); err != nil {
					t.Fatal(err)
				}
			}
			for range 1000 { // create the keys, open the breaker, fill the caches
				call()
			}
			if allocs := testing.AllocsPerRun(1000, call); allocs != 0 {
				t.Errorf("got %v allocs per Take, want 0", allocs)
			}
			if refused := rules.Refused(tt.ops, res); refused == tt.allowed {
				t.Errorf("got %+v, want allowed=%v", res, tt.allowed)
			}
			if tt.want != nil && !tt.want(s) {
				t.Errorf("the path under test was not taken: stats %+v", s.Stats())
			}
		})
	}
}

func memInner(t *testing.T) rules.Store { return newMemstore(t) }

func downInner(*testing.T) rules.Store { return &fakeStore{err: errDown} }
