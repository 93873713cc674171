package redisstore

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
)

// connPair returns the two ends of a loopback TCP connection.
func connPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// waitReadable waits until c's socket holds data, as a reply that came in
// while the node was busy would.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// Polling for an event of the kernel, not timing: loopback delivers at
	// once, and the 10s only ends a test whose data never arrives.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		var ready bool
		_ = raw.Control(func(fd uintptr) { ready = peek(fd) })
		if ready {
			return
		}
	}
	t.Fatal("the data never reached the socket")
}

// TestLateRead: a read whose deadline has passed while the reply is
// already in the socket (the node looked too late) returns the reply; with
// nothing in the socket it is the timeout it was, and the deadline stays
// passed. A plain connection times out in both cases: the behaviour
// storeTimeConn exists to correct.
func TestLateRead(t *testing.T) {
	const reply = "+PONG\r\n"
	// grace is the fresh deadline of a retried read: a minute, so that a
	// read which wrongly waited for it cannot pass for one that did not.
	const grace = time.Minute
	passed := time.Now().Add(-time.Second)
	buf := make([]byte, 64)

	t.Run("plain_conn_times_out_with_the_reply_there", func(t *testing.T) {
		server, client := connPair(t)
		if _, err := server.Write([]byte(reply)); err != nil {
			t.Fatal(err)
		}
		waitReadable(t, client)
		_ = client.SetReadDeadline(passed)
		if _, err := client.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want the deadline error (the premise of storeTimeConn)", err)
		}
	})

	t.Run("reply_there", func(t *testing.T) {
		server, client := connPair(t)
		var late lateReads
		c := newStoreTimeConn(client, grace, &late)
		if _, err := server.Write([]byte(reply)); err != nil {
			t.Fatal(err)
		}
		waitReadable(t, client)
		_ = c.SetReadDeadline(passed)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != reply {
			t.Fatalf("got %q, %v; want %q", buf[:n], err, reply)
		}
		if late.Load() != 1 {
			t.Errorf("late reads: got %d, want 1", late.Load())
		}
	})

	t.Run("nothing_there", func(t *testing.T) {
		_, client := connPair(t)
		var late lateReads
		c := newStoreTimeConn(client, grace, &late)
		_ = c.SetReadDeadline(passed)
		start := time.Now()
		if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want the deadline error", err)
		}
		// Generous against a busy machine: a read that waited for the
		// grace would take its minute.
		if elapsed := time.Since(start); elapsed > grace/6 {
			t.Errorf("the timed-out read took %v: it must not wait for the %v grace", elapsed, grace)
		}
		if late.Load() != 0 {
			t.Errorf("late reads: got %d, want 0", late.Load())
		}
		// The deadline stays passed: the next read fails at once too.
		if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("second read: got %v, want the deadline error", err)
		}
	})

	t.Run("deadline_in_time", func(t *testing.T) {
		server, client := connPair(t)
		var late lateReads
		c := newStoreTimeConn(client, grace, &late)
		_ = c.SetReadDeadline(time.Now().Add(grace))
		if _, err := server.Write([]byte(reply)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != reply || late.Load() != 0 {
			t.Fatalf("got %q, %v, %d late reads; want %q, nil, 0", buf[:n], err, late.Load(), reply)
		}
	})
}

// TestStoreTimeDialer: the store's connections are storeTimeConns, and a
// dial to a port nothing listens on fails at once.
func TestStoreTimeDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
	}()
	var late lateReads
	dial := storeTimeDialer(time.Second, time.Second, nil, &late)
	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := c.(*storeTimeConn)
	if !ok {
		t.Fatalf("got a %T, want a *storeTimeConn", c)
	}
	if _, err := sc.SyscallConn(); err != nil {
		t.Errorf("SyscallConn (go-redis' health check needs it): %v", err)
	}
	// A failed dial is a connection that fails with the dial's error (go-redis
	// must not count it: storeTimeDialer).
	addr := ln.Addr().String()
	ln.Close()
	dc, err := dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("got %v, want a dead connection carrying the error", err)
	}
	if _, err := dc.Write([]byte("*1\r\n$4\r\nPING\r\n")); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("write on a failed dial: got %v, want connection refused", err)
	}
	if _, err := dc.Read(make([]byte, 8)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("read on a failed dial: got %v, want connection refused", err)
	}
}

// TestRecoversAfterManyFailedDials: after more failed dials than the pool
// has connections (an outage of a few seconds), the first call after Redis
// returns succeeds. go-redis alone would fail calls with the last dial
// error for up to a second more (storeTimeDialer).
func TestRecoversAfterManyFailedDials(t *testing.T) {
	r := testredis.Start(t)
	const poolSize = 4
	// A budget far above any round trip, so that only go-redis' dial
	// backoff could fail the first call after Redis returns: a dial to a
	// port that refuses fails at once whatever the budget.
	s := mustNew(t, Options{URL: r.URL(), Timeout: 5 * time.Second, PoolSize: poolSize})
	defer s.Close()
	ctx := context.Background()
	op := []rules.Op{gcra('r', 5)}
	if err := s.Take(ctx, time.Now(), op, make([]rules.Result, 1)); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	for i := range 5 * poolSize {
		if err := s.Take(ctx, time.Now(), op, make([]rules.Result, 1)); err == nil {
			t.Fatalf("take %d succeeded with Redis down", i)
		}
	}
	r.Restart()
	if err := s.Take(ctx, time.Now(), op, make([]rules.Result, 1)); err != nil {
		t.Fatalf("first take after Redis returned: %v (go-redis' dial backoff?)", err)
	}
}

// flusherless returns a Store whose coalescer has no flusher: the test
// plays the flusher, answering queued calls when it likes.
func flusherless(t *testing.T, budget time.Duration) *Store {
	t.Helper()
	s := &Store{prefix: DefaultPrefix}
	s.co = newCoalescer(s, nil, budget, 0, 0)
	t.Cleanup(func() {
		s.co.close()
		s.co.waitFlushers()
	})
	return s
}

// answerQueued answers every queued call with a well-formed one-op reply
// and reports how many it answered.
func answerQueued(s *Store) int {
	s.co.mu.Lock()
	q := s.co.queue
	s.co.queue = nil
	s.co.mu.Unlock()
	for _, w := range q {
		w.reply, w.err = good(1), nil
		s.co.answer(w)
	}
	return len(q)
}

// TestBudgetIsStoreTime: past its budget, a queued call waits on while the
// store is answering (its flusher is only late, as on a node whose cores
// are all busy), fails at its budget when the last pipeline failed, and
// fails in any case after overloadBudgets budgets. The coalescer's timers
// run in a synctest bubble, so each moment is exact, whatever the machine.
func TestBudgetIsStoreTime(t *testing.T) {
	const budget = 20 * time.Millisecond
	ops := []rules.Op{gcra('a', 5)}
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}

	t.Run("flusher_late_store_answering", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := flusherless(t, budget)
			go func() {
				time.Sleep(3 * budget)
				for answerQueued(s) == 0 {
					time.Sleep(time.Millisecond)
				}
			}()
			start := time.Now()
			res := make([]rules.Result, 1)
			if err := s.Take(context.Background(), time.Now(), ops, res); err != nil {
				t.Fatalf("got %v after %v, want the reply the late flusher brought", err, time.Since(start))
			}
			if elapsed := time.Since(start); elapsed != 3*budget {
				t.Errorf("answered after %v, want when the flusher ran (%v)", elapsed, 3*budget)
			}
			if !res[0].Allowed {
				t.Errorf("got %+v, want the reply's allowed result", res[0])
			}
		})
	})

	t.Run("store_failing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := flusherless(t, budget)
			s.co.failing.Store(true)
			start := time.Now()
			err := s.Take(context.Background(), time.Now(), ops, make([]rules.Result, 1))
			if !isTimeout(err) {
				t.Fatalf("got %v, want a timeout", err)
			}
			if elapsed := time.Since(start); elapsed != budget {
				t.Errorf("failed after %v, want at its budget %v", elapsed, budget)
			}
		})
	})

	t.Run("cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := flusherless(t, budget)
			start := time.Now()
			err := s.Take(context.Background(), time.Now(), ops, make([]rules.Result, 1))
			if !isTimeout(err) {
				t.Fatalf("got %v, want a timeout", err)
			}
			if elapsed, limit := time.Since(start), overloadBudgets*budget; elapsed != limit {
				t.Errorf("failed after %v, want at %d budgets (%v)", elapsed, overloadBudgets, limit)
			}
		})
	})

	// TestBudgetWhileQueued's rule, exactly: a call queued behind a
	// pipeline that hangs fails at its own budget from when it was queued,
	// once that pipeline has failed, though no pipeline ever carried it.
	t.Run("queued_behind_a_hung_pipeline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := flusherless(t, budget)
			start := time.Now()
			var at [2]time.Duration
			var errs [2]error
			var wg sync.WaitGroup
			for i := range at {
				wg.Go(func() {
					time.Sleep(time.Duration(i) * budget / 3) // the second queues behind the first
					errs[i] = s.Take(context.Background(), time.Now(), []rules.Op{gcra(byte('a'+i), 5)}, make([]rules.Result, 1))
					at[i] = time.Since(start)
				})
			}
			synctest.Wait()
			inFlight := s.co.next(nil) // the flusher sends the first call; the pipeline hangs
			if len(inFlight) != 1 {
				t.Fatalf("got %d calls in the pipeline, want the first alone", len(inFlight))
			}
			time.Sleep(budget) // the pipeline's read deadline
			s.co.failing.Store(true)
			inFlight[0].reply, inFlight[0].err = nil, errBudget
			s.co.answer(inFlight[0])
			wg.Wait()
			for i, want := range []time.Duration{budget, budget/3 + budget} {
				if !isTimeout(errs[i]) {
					t.Errorf("call %d: got %v, want a timeout", i, errs[i])
				}
				if at[i] != want {
					t.Errorf("call %d returned at %v, want at %v (its budget from when it was queued)", i, at[i], want)
				}
			}
		})
	})
}

// TestIOFailed: a pipeline failed below the script when a command has an
// error that is not the server's own reply.
func TestIOFailed(t *testing.T) {
	cmd := func(err error) redis.Cmder {
		c := redis.NewCmd(context.Background(), "evalsha")
		c.SetErr(err)
		return c
	}
	tests := []struct {
		name string
		errs []error
		want bool
	}{
		{"all_answered", []error{nil, nil}, false},
		{"script_error", []error{nil, redisError("ERR user_script:1: boom")}, false},
		{"noscript", []error{redisError("NOSCRIPT No matching script.")}, false},
		{"nil_reply", []error{redis.Nil}, false},
		{"timeout", []error{nil, &net.OpError{Op: "read", Err: timeoutErr{}}}, true},
		{"closed", []error{redis.ErrClosed}, true},
	}
	for _, tt := range tests {
		cmds := make([]redis.Cmder, len(tt.errs))
		for i, err := range tt.errs {
			cmds[i] = cmd(err)
		}
		if got := ioFailed(cmds); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSetupErrorIsReported: when a connection's setup fails (here SELECT
// of a database the server does not have; AUTH refused is the same), a
// Take returns the server's error, coalesced or not, rather than a
// malformed reply.
func TestSetupErrorIsReported(t *testing.T) {
	addr := redisAddr(t)
	for _, direct := range []bool{false, true} {
		s := mustNew(t, Options{URL: "redis://" + addr + "/999", Timeout: time.Second, DisableCoalescing: direct})
		err := s.Take(context.Background(), time.Now(), []rules.Op{gcra('s', 5)}, make([]rules.Result, 1))
		s.Close()
		if err == nil || errors.Is(err, ErrMalformedReply) || !strings.Contains(err.Error(), "DB index is out of range") {
			t.Errorf("direct=%v: got %v, want the server's DB index error", direct, err)
		}
	}
}
