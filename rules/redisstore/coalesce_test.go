package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestCoalescedRoundTrips: concurrent Takes share pipelines and script
// calls, and each is decided exactly once, in order: every caller's takes
// see its key's remaining units go down by one (not run in parallel with
// the other tests, which share the server's counters). Each pipeline holds
// the calls of its Takes that went alone, one EVALSHA each, and at most
// one shared EVALSHA for the others.
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
	pipelines, shared := s.Stats().Pipelines, s.Stats().SharedCalls
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
	p := s.Stats().Pipelines - pipelines
	sh := s.Stats().SharedCalls - shared
	if p == 0 || p > callers*takes {
		t.Errorf("pipelines: got %d for %d Takes", p, callers*takes)
	}
	if sh == 0 {
		t.Errorf("no Take shared a script call, with %d callers at once", callers)
	}
	alone := uint64(callers*takes) - sh
	evalsha := uint64(commandCalls(t, ctx, []*redis.Client{c}, "evalsha") - before["evalsha"])
	if evalsha <= alone || evalsha > alone+p {
		t.Errorf("EVALSHA calls: got %d, want %d alone plus between 1 and %d shared", evalsha, alone, p)
	}
	if got := commandCalls(t, ctx, []*redis.Client{c}, "eval") - before["eval"]; got != 0 {
		t.Errorf("EVAL calls: got %d, want 0", got)
	}
	t.Logf("%d Takes in %d pipelines (%.1f a pipeline), %d EVALSHA; %d Takes shared a script call",
		callers*takes, p, float64(callers*takes)/float64(p), evalsha, sh)
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

// TestBudgetWhileQueued: against a server that hangs, a call queued behind
// the pipeline ahead of it fails with a timeout too, and nothing is
// retried: at most one EVALSHA per call reaches the server (the second
// goes out, on a new connection, once the first's has failed, if its
// caller is still waiting then). That the queued call fails at its own
// budget, not the pipeline's and then its own, is
// TestBudgetIsStoreTime/queued_behind_a_hung_pipeline, on a fake clock.
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
			if i == 1 {
				<-h.accepted // the first call's pipeline is out: the second queues behind it
			}
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
		// A timer never fires early; the upper bound is a hang guard.
		if o.elapsed < budget || o.elapsed > hangGuard {
			t.Errorf("call %d returned after %v, want at its %v budget or later, and no hang", i, o.elapsed, budget)
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
		<-h.accepted // the call's pipeline is out
		cancel()
	}()
	start := time.Now()
	err := s.Take(ctx, time.Now(), []rules.Op{gcra('a', 5)}, make([]rules.Result, 1))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	// Only the cancel can end the call before its 10s budget.
	if elapsed := time.Since(start); elapsed > hangGuard {
		t.Errorf("Take returned after %v, want at the cancel", elapsed)
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
	<-h.accepted // one pipeline in flight, the rest queued, in it or still to come
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range cap(errs) {
		if err := <-errs; err == nil {
			t.Error("a Take in flight at Close returned no error")
		}
	}
	// Only Close can end them before their 10s budget.
	if elapsed := time.Since(start); elapsed > hangGuard {
		t.Errorf("Close and the Takes it ended took %v, want well under the 10s budget", elapsed)
	}
	if err := s.Take(context.Background(), time.Now(), []rules.Op{gcra('z', 5)}, make([]rules.Result, 1)); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Take after Close: got %v, want redis.ErrClosed", err)
	}
	h.settle(t)
	goleak.VerifyNone(t, ignore)
}

// TestSharedScriptCall: the queued takes of the fast path go as one script
// call, decided one after another in queue order, each all-or-nothing; a
// take with a sliding_log goes alone; after the server lost the script
// (NOSCRIPT), both go again by EVAL and nothing is counted twice. The test
// plays the flusher, so the pipeline's contents are known.
func TestSharedScriptCall(t *testing.T) {
	addr := redisAddr(t)
	ctx := context.Background()
	s := mustNew(t, Options{URL: "redis://" + addr, Prefix: testPrefix("shared"), Timeout: time.Second, DisableCoalescing: true})
	defer s.Close()
	client := s.node.(*redis.Client)
	s.co = newCoalescer(s, client, time.Second, 0, 0) // no flusher: the test flushes; Close stops it
	raw := rawClient(t, addr)

	gcraOp := func(key byte, limit int64) rules.Op {
		return rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{'s', key}, Limit: limit, Burst: limit, PeriodUS: 3600_000_000, Cost: 1, Enforce: true}
	}
	logOp := rules.Op{Kind: rules.OpTake, Algorithm: rules.SlidingLog, Key: rules.Key{'s', 'L'}, Limit: 5, PeriodUS: 3600_000_000, Cost: 1, Enforce: true}
	calls := [][]rules.Op{
		{gcraOp('A', 3)}, {gcraOp('A', 3)}, {gcraOp('A', 3)}, {gcraOp('A', 3)}, {gcraOp('A', 3)},
		{logOp},
		{gcraOp('B', 2), gcraOp('C', 1)}, // all-or-nothing: C allows one
		{gcraOp('B', 2), gcraOp('C', 1)}, // C refuses: B is not taken either
		{gcraOp('B', 2)},                 // so B still has one
	}
	results := make([][]rules.Result, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, ops := range calls {
		results[i] = make([]rules.Result, len(ops))
		wg.Go(func() { errs[i] = s.Take(ctx, time.Now(), ops, results[i]) })
		for { // queue them in order
			s.co.mu.Lock()
			n := len(s.co.queue)
			s.co.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	before := map[string]int64{}
	for _, cmd := range []string{"evalsha", "eval"} {
		before[cmd] = commandCalls(t, ctx, []*redis.Client{raw}, cmd)
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f := flusher{pipe: client.Pipeline(), batch: s.co.next(nil)}
	s.co.flush(&f, new(outstanding)) // a flusher of the test's own
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	allowed := func(i int) bool { return results[i][0].Allowed }
	for i, want := range []bool{true, true, true, false, false} {
		if allowed(i) != want {
			t.Errorf("take %d of key A (limit 3, in queue order): allowed %v, want %v", i, allowed(i), want)
		}
	}
	if !allowed(5) || results[5][0].Remaining != 4 {
		t.Errorf("sliding_log take: got %+v, want allowed with 4 left", results[5][0])
	}
	if r := results[6]; !r[0].Allowed || !r[1].Allowed {
		t.Errorf("first B+C take: got %+v, want both allowed", r)
	}
	if r := results[7]; r[1].Allowed || !r[0].Allowed || r[0].Remaining != 1 {
		// B's own op allows, C refuses, so the call is refused and takes
		// nothing: B reports its state after the call, one unit left.
		t.Errorf("second B+C take: got %+v, want B allowed with 1 left (nothing taken) and C refused", r)
	}
	if r := results[8][0]; !r.Allowed || r.Remaining != 0 {
		t.Errorf("B after the refused call: got %+v, want allowed with its last unit (the refused call took none)", r)
	}
	if got := commandCalls(t, ctx, []*redis.Client{raw}, "evalsha") - before["evalsha"]; got != 2 {
		t.Errorf("EVALSHA: got %d, want 2 (the shared call and the sliding_log take)", got)
	}
	if got := commandCalls(t, ctx, []*redis.Client{raw}, "eval") - before["eval"]; got != 2 {
		t.Errorf("EVAL: got %d, want 2 (both again after NOSCRIPT)", got)
	}
	if st := s.Stats(); st.SharedCalls != 8 || st.NoScript != 2 || st.Pipelines != 1 {
		t.Errorf("stats: got %+v, want 8 shared calls, 2 NOSCRIPT, 1 pipeline", st)
	}
}

// TestSharedCallsMatchMemory: random rounds of queued calls (every
// algorithm and op kind, several ops a call, keys shared across calls)
// flushed by the test, against the memory store running the same calls in
// the order Redis ran them (the calls that go alone, then the shared call's
// in queue order), on the caller's clock: every result must be the same.
func TestSharedCallsMatchMemory(t *testing.T) {
	addr := redisAddr(t)
	ctx := context.Background()
	s := mustNew(t, Options{URL: "redis://" + addr, Prefix: testPrefix("sharedmem"), Timeout: time.Second, DisableCoalescing: true, UseCallerClock: true})
	defer s.Close()
	client := s.node.(*redis.Client)
	s.co = newCoalescer(s, client, time.Second, 0, 0) // no flusher: the test flushes; Close stops it
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()

	rng := rand.New(rand.NewPCG(7, 11))
	const keys = 8
	limits := make([]rules.Op, keys) // each key's algorithm and limits
	for k := range limits {
		a := algorithms[k%len(algorithms)]
		limit := int64(2 + rng.IntN(4))
		limits[k] = rules.Op{Algorithm: a, Key: rules.Key{'m', byte(k)}, Limit: limit, Burst: limit, PeriodUS: int64(1+rng.IntN(3)) * 1_000_000}
	}
	now := storetest.Base
	for round := range 40 {
		n := 2 + rng.IntN(10)
		calls := make([][]rules.Op, n)
		nows := make([]time.Time, n)
		for i := range calls {
			for _, k := range rng.Perm(keys)[:1+rng.IntN(3)] {
				op := limits[k]
				op.Kind = rules.OpTake
				if r := rng.IntN(10); r >= 7 {
					op.Kind = rules.OpKind(1 + rng.IntN(4)) // peek, add, refund, reset
				}
				op.Cost = int64(rng.IntN(3))
				op.Enforce = rng.IntN(4) != 0
				op.Attempts = rng.IntN(5) == 0
				calls[i] = append(calls[i], op)
			}
			now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
			nows[i] = now
		}
		got := make([][]rules.Result, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range calls {
			got[i] = make([]rules.Result, len(calls[i]))
			wg.Go(func() { errs[i] = s.Take(ctx, nows[i], calls[i], got[i]) })
			for { // queue them in order
				s.co.mu.Lock()
				q := len(s.co.queue)
				s.co.mu.Unlock()
				if q == i+1 {
					break
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
		batch := s.co.next(nil)
		var alone, shared []int // the order Redis runs them: flush's
		for i, w := range batch {
			if w.shareable {
				shared = append(shared, i)
			} else {
				alone = append(alone, i)
			}
		}
		if len(shared) == 1 {
			alone, shared = append(alone, shared[0]), nil
		}
		f := flusher{pipe: client.Pipeline(), batch: batch}
		s.co.flush(&f, new(outstanding)) // a flusher of the test's own
		wg.Wait()
		for _, i := range append(alone, shared...) {
			if errs[i] != nil {
				t.Fatalf("round %d call %d: %v", round, i, errs[i])
			}
			want := make([]rules.Result, len(calls[i]))
			if err := mem.Take(ctx, nows[i], calls[i], want); err != nil {
				t.Fatal(err)
			}
			for j := range want {
				if got[i][j] != want[j] {
					t.Fatalf("round %d call %d op %d (%+v): redis %+v, memory %+v", round, i, j, calls[i][j], got[i][j], want[j])
				}
			}
		}
	}
	if st := s.Stats(); st.SharedCalls == 0 {
		t.Error("no call was shared")
	}
}
