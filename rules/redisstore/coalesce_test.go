package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestCoalescedRoundTrips: concurrent Takes share pipelines, and each is
// still exactly one EVALSHA on the server (not run in parallel with the
// other tests, which share the server's counters).
func TestCoalescedRoundTrips(t *testing.T) {
	addr := redisAddr(t)
	ctx := context.Background()
	s := mustNew(t, Options{URL: "redis://" + addr, Prefix: testPrefix("coalesce"), Timeout: time.Second})
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c := rawClient(t, addr)
	const callers, takes = 32, 50
	before := map[string]int64{}
	for _, cmd := range []string{"evalsha", "eval"} {
		before[cmd] = commandCalls(t, ctx, []*redis.Client{c}, cmd)
	}
	pipelines := s.Stats().Pipelines
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			op := rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{'c', byte(g)}, Limit: 1000, Burst: 1000, PeriodUS: 3600_000_000, Cost: 1, Enforce: true}
			res := make([]rules.Result, 1)
			for i := range takes {
				if err := s.Take(ctx, time.Now(), []rules.Op{op}, res); err != nil {
					t.Error(err)
					return
				}
				if !res[0].Allowed || res[0].Remaining != int64(1000-i-1) {
					t.Errorf("caller %d take %d: got %+v, want allowed with %d left", g, i, res[0], 1000-i-1)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := commandCalls(t, ctx, []*redis.Client{c}, "evalsha") - before["evalsha"]; got != callers*takes {
		t.Errorf("EVALSHA calls: got %d, want %d (one per Take)", got, callers*takes)
	}
	if got := commandCalls(t, ctx, []*redis.Client{c}, "eval") - before["eval"]; got != 0 {
		t.Errorf("EVAL calls: got %d, want 0", got)
	}
	p := s.Stats().Pipelines - pipelines
	if p == 0 || p > callers*takes {
		t.Errorf("pipelines: got %d for %d Takes", p, callers*takes)
	}
	t.Logf("%d Takes in %d pipelines (%.1f a pipeline)", callers*takes, p, float64(callers*takes)/float64(p))
}

// TestConformanceRedisDirect runs the conformance tables against a real
// Redis without coalescing.
func TestConformanceRedisDirect(t *testing.T) {
	addr := redisAddr(t)
	prefix := testPrefix("direct")
	storetest.Run(t, func(t *testing.T) rules.Store {
		return mustNew(t, Options{URL: "redis://" + addr + "/0", Prefix: prefix, UseCallerClock: true, Timeout: time.Second, DisableCoalescing: true})
	})
}

// TestBudgetWhileQueued: a call queued behind a pipeline that hangs fails
// at its own budget, not after the pipeline ahead of it has timed out and
// then its own. Nothing is retried: at most one EVALSHA per call reaches
// the server (the second goes out, on a new connection, once the first's
// has failed, if its caller is still waiting then).
func TestBudgetWhileQueued(t *testing.T) {
	h := newHungServer(t)
	const budget = 60 * time.Millisecond
	s := mustNew(t, Options{URL: "redis://" + h.ln.Addr().String(), Timeout: budget, flushers: 1})
	type outcome struct {
		err     error
		elapsed time.Duration
	}
	out := make([]outcome, 2)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * budget / 3) // the second queues behind the first
			start := time.Now()
			err := s.Take(context.Background(), time.Now(), []rules.Op{gcra(byte('a'+i), 5)}, make([]rules.Result, 1))
			out[i] = outcome{err, time.Since(start)}
		})
	}
	wg.Wait()
	for i, o := range out {
		var ne net.Error
		if o.err == nil || !errors.As(o.err, &ne) || !ne.Timeout() {
			t.Errorf("call %d: got %v, want a timeout", i, o.err)
		}
		if o.elapsed < budget-5*time.Millisecond || o.elapsed > budget+50*time.Millisecond {
			t.Errorf("call %d returned after %v, want about its budget %v", i, o.elapsed, budget)
		}
	}
	s.Close()
	conns, got := h.settle(t)
	if conns < 1 || conns > 2 {
		t.Errorf("got %d connections, want 1 or 2", conns)
	}
	if n := strings.Count(got, "\r\nevalsha\r\n"); n < 1 || n > 2 {
		t.Errorf("got %d EVALSHA for 2 calls, want 1 or 2 (never retried)", n)
	}
	if n := strings.Count(got, "\r\neval\r\n"); n != 0 {
		t.Errorf("got %d EVAL, want 0", n)
	}
}

// TestCoalescedContext: a caller's context ends its wait; the store goes
// on serving others.
func TestCoalescedContext(t *testing.T) {
	h := newHungServer(t)
	s := mustNew(t, Options{URL: "redis://" + h.ln.Addr().String(), Timeout: 10 * time.Second})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	err := s.Take(ctx, time.Now(), []rules.Op{gcra('a', 5)}, make([]rules.Result, 1))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > 20*time.Millisecond+50*time.Millisecond {
		t.Errorf("Take returned after %v, want at the cancel (20ms) + 50ms", elapsed)
	}
}

// TestCloseStopsCoalescing: Close fails what is queued, stops the
// flushers (no goroutine is left) and later Takes fail at once.
func TestCloseStopsCoalescing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	h := newHungServer(t)
	s := mustNew(t, Options{URL: "redis://" + h.ln.Addr().String(), Timeout: 10 * time.Second, flushers: 1})
	errs := make(chan error, 8)
	for i := range cap(errs) {
		go func() {
			errs <- s.Take(context.Background(), time.Now(), []rules.Op{gcra(byte(i), 5)}, make([]rules.Result, 1))
		}()
	}
	time.Sleep(50 * time.Millisecond) // one pipeline in flight, the rest queued or in it
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range cap(errs) {
		if err := <-errs; err == nil {
			t.Error("a Take in flight at Close returned no error")
		}
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Close and the Takes it ended took %v, want well under the 10s budget", elapsed)
	}
	if err := s.Take(context.Background(), time.Now(), []rules.Op{gcra('z', 5)}, make([]rules.Result, 1)); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Take after Close: got %v, want redis.ErrClosed", err)
	}
	h.settle(t)
	goleak.VerifyNone(t, ignore)
}
