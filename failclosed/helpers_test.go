package failclosed

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/storetest"
)

var errDown = errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")

// fakeClock is a Clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: storetest.Base} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeStore is an inner store whose health the test controls. Healthy, it
// answers from backing (a memstore when set; every op allowed otherwise).
type fakeStore struct {
	calls   atomic.Int64
	closed  atomic.Int64
	mu      sync.Mutex
	err     error
	block   chan struct{} // when set, Take waits for it, ignoring ctx
	entered chan struct{} // when set, Take reports that it is blocking
	backing rules.Store
}

func (f *fakeStore) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeStore) setBlock(block, entered chan struct{}) {
	f.mu.Lock()
	f.block, f.entered = block, entered
	f.mu.Unlock()
}

func (f *fakeStore) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	f.calls.Add(1)
	f.mu.Lock()
	err, block, entered, backing := f.err, f.block, f.entered, f.backing
	f.mu.Unlock()
	if block != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		<-block
	}
	if err != nil {
		return err
	}
	if backing != nil {
		return backing.Take(ctx, now, ops, res)
	}
	for i := range res {
		res[i] = rules.Result{Allowed: true}
	}
	return nil
}

func (f *fakeStore) Close() error {
	f.closed.Add(1)
	return nil
}

// pingStore is a fakeStore with Ping, which the background prober prefers.
type pingStore struct {
	fakeStore
	pings atomic.Int64
}

func (p *pingStore) Ping(context.Context) error {
	p.pings.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func newStore(t testing.TB, inner rules.Store, opts Options) *Store {
	t.Helper()
	s, err := New(inner, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newMemstore(t testing.TB) *memstore.Store {
	t.Helper()
	m, err := memstore.New(memstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// op is an enforcing GCRA take of limit per period with burst = limit.
func op(key byte, mode rules.StoreErrorMode, limit int64, period time.Duration) rules.Op {
	return rules.Op{
		Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{key},
		Limit: limit, Burst: limit, PeriodUS: period.Microseconds(), Cost: 1,
		Enforce: true, OnError: mode,
	}
}

func take(t testing.TB, s rules.Store, now time.Time, ops ...rules.Op) []rules.Result {
	t.Helper()
	res := make([]rules.Result, len(ops))
	if err := s.Take(context.Background(), now, ops, res); err != nil {
		t.Fatalf("Take: %v", err)
	}
	return res
}
