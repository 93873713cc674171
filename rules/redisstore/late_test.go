package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
)

// The Store counts its server's replies, so failclosed's breaker opens on
// the store's silence, not on calls that fail while it answers.
var _ failclosed.Liveness = (*Store)(nil)

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestBudgetIsStoreSilence: past its budget, a call fails when a pipeline
// has been out silenceBudgets budgets with nothing heard from the store
// since it was written (asleep, paused, cut off), and waits on while the
// store answers other pipelines written meanwhile (late, not silent). The
// test plays two flushers in a synctest bubble, so each moment is exact.
func TestBudgetIsStoreSilence(t *testing.T) {
	const budget = 20 * time.Millisecond
	twoFlushers := func(t *testing.T) *Store {
		s := flusherless(t, budget)
		s.co.out = make([]outstanding, 2)
		return s
	}
	// take runs one Take in the background, reporting its error and when
	// it returned (since start).
	take := func(s *Store, key byte, start time.Time, err *error, at *time.Duration, wg *sync.WaitGroup) {
		wg.Go(func() {
			*err = s.Take(context.Background(), time.Now(), []rules.Op{gcra(key, 5)}, make([]rules.Result, 1))
			*at = time.Since(start)
		})
	}

	t.Run("silent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := twoFlushers(t)
			start := time.Now()
			var wg sync.WaitGroup
			var errs [2]error
			var at [2]time.Duration
			take(s, 'a', start, &errs[0], &at[0], &wg)
			synctest.Wait()
			if n := len(s.co.next(nil)); n != 1 {
				t.Fatalf("queued %d calls, want 1", n)
			}
			s.co.sent(&s.co.out[0]) // out, never answered
			time.Sleep(silenceBudgets*budget + budget/2)
			take(s, 'b', start, &errs[1], &at[1], &wg) // queued behind it
			wg.Wait()
			// The first fails once its pipeline has been out
			// silenceBudgets; the second at its own budget: the store is
			// silent by then.
			for i, want := range []time.Duration{silenceBudgets * budget, silenceBudgets*budget + budget/2 + budget} {
				if !isTimeoutErr(errs[i]) {
					t.Errorf("call %d: got %v, want a timeout", i, errs[i])
				}
				if at[i] != want {
					t.Errorf("call %d failed at %v, want %v", i, at[i], want)
				}
			}
		})
	})

	t.Run("late_while_answering", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := twoFlushers(t)
			start := time.Now()
			var wg sync.WaitGroup
			var err error
			var at time.Duration
			take(s, 'a', start, &err, &at, &wg)
			synctest.Wait()
			inFlight := s.co.next(nil)
			s.co.sent(&s.co.out[0])
			// The other flusher's pipelines, written after it, are
			// answered a budget apart: the store is answering.
			for range 9 {
				s.co.sent(&s.co.out[1])
				time.Sleep(budget)
				s.co.received(&s.co.out[1], true)
			}
			inFlight[0].reply, inFlight[0].err = good(1), nil
			s.co.received(&s.co.out[0], true)
			s.co.answer(inFlight[0])
			wg.Wait()
			if err != nil || at != 9*budget {
				t.Errorf("got %v at %v, want its reply at %v", err, at, 9*budget)
			}
		})
	})

	// A link that is steadily slow: every pipeline takes 8 budgets. A
	// pipeline out that long with nothing heard is the store's latency,
	// not its silence: the call waits for its reply (issue 25, section 3).
	// Silence is then latencyFactor times that latency: a pipeline never
	// answered fails at 16 budgets, not at overloadBudgets.
	t.Run("slow_link", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const slow = 8 * budget
			s := twoFlushers(t)
			for range 3 { // the pipelines before: each answered after 8 budgets
				s.co.sent(&s.co.out[0])
				time.Sleep(slow)
				s.co.received(&s.co.out[0], true)
			}
			start := time.Now()
			var wg sync.WaitGroup
			var errs [2]error
			var at [2]time.Duration
			take(s, 'a', start, &errs[0], &at[0], &wg)
			synctest.Wait()
			inFlight := s.co.next(nil)
			s.co.sent(&s.co.out[0])
			time.Sleep(slow)
			inFlight[0].reply, inFlight[0].err = good(1), nil
			s.co.received(&s.co.out[0], true)
			s.co.answer(inFlight[0])
			wg.Wait()
			if errs[0] != nil || at[0] != slow {
				t.Errorf("slow reply: got %v at %v, want its reply at %v", errs[0], at[0], slow)
			}
			if got := s.Stats().LateReplies; got != 1 {
				t.Errorf("LateReplies = %d, want 1", got)
			}

			start = time.Now()
			take(s, 'b', start, &errs[1], &at[1], &wg)
			synctest.Wait()
			s.co.next(nil)
			s.co.sent(&s.co.out[0]) // never answered
			wg.Wait()
			if want := latencyFactor * slow; !isTimeoutErr(errs[1]) || at[1] != want {
				t.Errorf("silent after a slow link: got %v at %v, want a timeout at %v", errs[1], at[1], want)
			}
		})
	})

	t.Run("answering_then_silent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := twoFlushers(t)
			start := time.Now()
			var wg sync.WaitGroup
			var errs [2]error
			var at [2]time.Duration
			take(s, 'a', start, &errs[0], &at[0], &wg)
			synctest.Wait()
			s.co.next(nil)
			s.co.sent(&s.co.out[0]) // a's pipeline, never answered
			s.co.sent(&s.co.out[1])
			time.Sleep(budget)
			s.co.received(&s.co.out[1], true) // the store answered after a's was written
			take(s, 'b', start, &errs[1], &at[1], &wg)
			synctest.Wait()
			s.co.next(nil)
			s.co.sent(&s.co.out[1]) // b's pipeline, never answered: silent from here
			wg.Wait()
			// b's pipeline, written at one budget, is silent
			// silenceBudgets later: both fail then, at a half-budget
			// check of each.
			want := (1 + silenceBudgets) * budget
			for i := range errs {
				if !isTimeoutErr(errs[i]) || at[i] != want {
					t.Errorf("call %d: got %v at %v, want a timeout at %v", i, errs[i], at[i], want)
				}
			}
		})
	})
}

// TestCountsReplies: a pipeline's script results count in Replies and
// mark the store heard; its error replies mark it heard without counting;
// commands the pipeline never ran (setup failed) or that failed below the
// script do neither.
func TestCountsReplies(t *testing.T) {
	s := flusherless(t, time.Second)
	result := func(v any) redis.Cmder {
		c := redis.NewCmd(context.Background())
		c.SetVal(v)
		return c
	}
	failed := func(err error) redis.Cmder {
		c := redis.NewCmd(context.Background())
		c.SetErr(err)
		return c
	}
	for _, tt := range []struct {
		name     string
		cmds     []redis.Cmder
		replies  uint64
		answered bool
	}{
		{"results", []redis.Cmder{result([]any{int64(1)}), result([]any{int64(2)})}, 2, true},
		{"error_reply", []redis.Cmder{failed(redisError("NOSCRIPT No matching script."))}, 0, true},
		{"not_run", []redis.Cmder{redis.NewCmd(context.Background())}, 0, false},
		{"io_failed", []redis.Cmder{failed(errBudget)}, 0, false},
		{"result_then_io_failed", []redis.Cmder{result([]any{int64(1)}), failed(errBudget)}, 1, true},
	} {
		before := s.Replies()
		if got := s.co.count(tt.cmds); got != tt.answered {
			t.Errorf("%s: answered %v, want %v", tt.name, got, tt.answered)
		}
		if got := s.Replies() - before; got != tt.replies {
			t.Errorf("%s: counted %d replies, want %d", tt.name, got, tt.replies)
		}
	}
}

// TestClusterReadsAtBudget: a cluster's calls go one per connection, so
// its clients read and write for one budget, not a pipeline's
// overloadBudgets.
func TestClusterReadsAtBudget(t *testing.T) {
	const timeout = 20 * time.Millisecond
	co := &redis.ClusterOptions{}
	configureCluster(co, Options{Timeout: timeout, DialTimeout: time.Second}, new(lateReads))
	if co.ReadTimeout != timeout || co.WriteTimeout != timeout {
		t.Errorf("got read %v, write %v; want %v", co.ReadTimeout, co.WriteTimeout, timeout)
	}
}

// waitUntil polls cond, bounded by a hang guard: it waits for an event of
// a real process or for time to have passed, never for correctness.
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("hang guard: never saw %s", what)
		case <-tick.C:
		}
	}
}

// TestRealRedisLateIsDecided: a real redis-server whose reply reaches the
// node after the call's budget (held by a proxy until the budget has
// surely passed) decides the call: the coalesced client reads the late
// reply instead of timing out and dropping the connection, the call gets
// it, and Replies counts it. The coalescer's clock is frozen, so the
// store never counts as silent: what is tested is that a late reply is
// read and delivered; when silence fails a call is
// TestBudgetIsStoreSilence's, on a fake clock.
func TestRealRedisLateIsDecided(t *testing.T) {
	r := testredis.Start(t)
	p := testredis.NewHoldProxy(t, r.Addr())
	// A budget whose 20 budgets (the read deadline) no stall of a loaded
	// machine reaches while the reply is held for 2.
	const budget = 250 * time.Millisecond
	s := mustNew(t, Options{URL: "redis://" + p.Addr() + "/0", Timeout: budget, flushers: 1})
	defer s.Close()
	s.co.clock = func() int64 { return 0 }
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		op := []rules.Op{gcra(byte('L'+i), 5)}
		p.Hold()
		got, replies := p.Got(), s.Replies()
		res := make([]rules.Result, 1)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- s.Take(ctx, time.Now(), op, res) }()
		waitUntil(t, func() bool { return p.Got() > got }, "Redis' reply")
		waitUntil(t, func() bool { return time.Since(start) >= 2*budget }, "two budgets to pass")
		p.Release()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("hang guard: the late call never returned")
		}
		if err != nil {
			t.Fatalf("call %d, its reply held past its budget: got %v, want the reply", i, err)
		}
		if !res[0].Allowed || res[0].Remaining != 4 {
			t.Errorf("call %d: got %+v, want allowed with 4 left (decided in Redis)", i, res[0])
		}
		if s.Replies() == replies {
			t.Errorf("call %d: Replies did not move for the late reply", i)
		}
	}
}

// TestRealRedisAsleepFails: a real redis-server in DEBUG SLEEP is silent:
// each call fails with a timeout near its budget (the hang guard, far
// below the sleep, tells that it did not wait for Redis to wake), and
// Replies does not move.
func TestRealRedisAsleepFails(t *testing.T) {
	r := testredis.Start(t)
	const budget = 20 * time.Millisecond
	s := mustNew(t, Options{URL: r.URL(), Timeout: budget})
	defer s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	op := []rules.Op{gcra('S', 5)}
	if err := s.Take(ctx, time.Now(), op, make([]rules.Result, 1)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = r.Do("DEBUG", "SLEEP", "10") }()
	waitUntil(t, func() bool {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		_, _ = c.Write([]byte("PING\r\n"))
		_, err = c.Read(make([]byte, 7))
		return err != nil // an awake Redis answers in microseconds
	}, "Redis asleep")
	replies := s.Replies()
	for i := range 5 {
		start := time.Now()
		err := s.Take(ctx, time.Now(), op, make([]rules.Result, 1))
		if !isTimeoutErr(err) {
			t.Errorf("call %d: got %v, want a timeout", i, err)
		}
		if elapsed := time.Since(start); elapsed > hangGuard {
			t.Errorf("call %d took %v: it waited for Redis to wake", i, elapsed)
		}
	}
	if s.Replies() != replies {
		t.Errorf("Replies moved from %d to %d while Redis slept", replies, s.Replies())
	}
}
