package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// newMini starts a miniredis for t and returns its URL.
func newMini(t testing.TB) (*miniredis.Miniredis, string) {
	t.Helper()
	m := miniredis.RunT(t)
	return m, "redis://" + m.Addr() + "/0"
}

func mustNew(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// timedStore drives miniredis' clock with each call's now, so that the
// script's TIME path runs the conformance tables.
type timedStore struct {
	*Store
	m *miniredis.Miniredis
}

func (s timedStore) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	// The tables never call one store at two instants concurrently (the
	// concurrent check uses one now for every caller).
	s.m.SetTime(now)
	return s.Store.Take(ctx, now, ops, res)
}

// conformanceBudget is the conformance suite's per-call budget: a budget
// for a test on a busy machine, not a latency the suite measures (the
// "concurrent" table runs 64 callers at once through a pool of a few
// connections, under the race detector).
const conformanceBudget = 10 * time.Second

func TestConformanceMiniredis(t *testing.T) {
	t.Run("caller_clock", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) rules.Store {
			_, url := newMini(t)
			return mustNew(t, Options{URL: url, UseCallerClock: true, Timeout: conformanceBudget, DialTimeout: conformanceBudget})
		})
	})
	t.Run("server_time", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) rules.Store {
			m, url := newMini(t)
			return timedStore{mustNew(t, Options{URL: url, Timeout: conformanceBudget, DialTimeout: conformanceBudget}), m}
		})
	})
	// miniredis answers CLUSTER SLOTS as one master owning every slot: the
	// cluster path (one script call per slot, pipelined, undone on a
	// refusal elsewhere) runs in process.
	t.Run("cluster", func(t *testing.T) {
		storetest.RunWith(t, func(t *testing.T) rules.Store {
			m := miniredis.RunT(t)
			return mustNew(t, Options{URL: "redis+cluster://" + m.Addr(), UseCallerClock: true, Timeout: conformanceBudget, DialTimeout: conformanceBudget})
		}, storetest.Options{PerShard: true})
	})
	t.Run("cluster_server_time", func(t *testing.T) {
		storetest.RunWith(t, func(t *testing.T) rules.Store {
			m := miniredis.RunT(t)
			return timedStore{mustNew(t, Options{URL: "redis+cluster://" + m.Addr(), Timeout: conformanceBudget, DialTimeout: conformanceBudget}), m}
		}, storetest.Options{PerShard: true})
	})
}
