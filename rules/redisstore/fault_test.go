package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
)

// fakeScripter answers script calls from a queue of replies, as a Redis
// that returns anything at all would.
type fakeScripter struct {
	mu      sync.Mutex
	replies []fakeReply
	evalSha int
	eval    int
	args    [][]any
}

type fakeReply struct {
	val any
	err error
}

func (f *fakeScripter) next(args []any) fakeReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.args = append(f.args, args)
	if len(f.replies) == 0 {
		return fakeReply{err: errors.New("fake: no reply queued")}
	}
	r := f.replies[0]
	f.replies = f.replies[1:]
	return r
}

// Process answers a script call (EVALSHA or EVAL) from the queue.
func (f *fakeScripter) Process(_ context.Context, c redis.Cmder) error {
	args := c.Args()
	f.mu.Lock()
	switch args[0] {
	case "evalsha":
		f.evalSha++
	case "eval":
		f.eval++
	default:
		panic(fmt.Sprintf("fake: unexpected command %v", args[0]))
	}
	f.mu.Unlock()
	r := f.next(args[cmdHead+args[2].(int):])
	cmd := c.(*redis.Cmd)
	cmd.SetVal(r.val)
	cmd.SetErr(r.err)
	return r.err
}

func fakeStore(f *fakeScripter) *Store {
	return &Store{prefix: DefaultPrefix, node: f}
}

// fakeCluster is a cluster Store whose every slot's master is f.
func fakeCluster(f *fakeScripter) *Store {
	return &Store{prefix: DefaultPrefix, masterFor: func(context.Context, string) (scripter, error) { return f, nil }}
}

func gcra(key byte, limit int64) rules.Op {
	return rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{key}, Limit: limit, Burst: limit, PeriodUS: 1_000_000, Cost: 1, Enforce: true}
}

// good is a well-formed take reply for n allowed ops.
func good(n int) []any {
	r := []any{int64(1_700_000_000_000_000)}
	for range n {
		r = append(r, int64(1), int64(4), int64(200_000), int64(0))
	}
	return r
}

func TestMalformedReplies(t *testing.T) {
	t.Parallel()
	with := func(r []any, i int, v any) []any {
		r = append([]any(nil), r...)
		r[i] = v
		return r
	}
	tests := []struct {
		name  string
		reply any
	}{
		{"nil", nil},
		{"string", "OK"},
		{"integer", int64(1)},
		{"empty", []any{}},
		{"short", good(1)[:4]},
		{"long", append(good(1), int64(0))},
		{"now_string", with(good(1), 0, "1700000000000000")},
		{"now_negative", with(good(1), 0, int64(-1))},
		{"allowed_two", with(good(1), 1, int64(2))},
		{"allowed_string", with(good(1), 1, "1")},
		{"allowed_nil", with(good(1), 1, nil)},
		{"remaining_negative", with(good(1), 2, int64(-1))},
		{"remaining_huge", with(good(1), 2, int64(1)<<60)},
		{"reset_negative", with(good(1), 3, int64(-5))},
		{"reset_nested", with(good(1), 3, []any{int64(1)})},
		{"retry_under_never", with(good(1), 4, int64(-2))},
		{"allowed_with_retry", with(good(1), 4, int64(10))},
		{"refused_without_retry", with(good(1), 1, int64(0))},
		{"refused_with_remaining", with(with(good(1), 1, int64(0)), 4, int64(10))},
		{"float", with(good(1), 2, 4.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeScripter{replies: []fakeReply{{val: tt.reply}}}
			res := make([]rules.Result, 1)
			err := fakeStore(f).Take(context.Background(), time.Now(), []rules.Op{gcra('a', 5)}, res)
			if !errors.Is(err, ErrMalformedReply) {
				t.Errorf("got %v, want ErrMalformedReply", err)
			}
			if res[0] != (rules.Result{}) {
				t.Errorf("res written on a malformed reply: %+v", res[0])
			}
		})
	}
	t.Run("two_ops_one_short", func(t *testing.T) {
		f := &fakeScripter{replies: []fakeReply{{val: good(1)}}}
		err := fakeStore(f).Take(context.Background(), time.Now(), []rules.Op{gcra('a', 5), gcra('b', 5)}, make([]rules.Result, 2))
		if !errors.Is(err, ErrMalformedReply) {
			t.Errorf("got %v, want ErrMalformedReply", err)
		}
	})
	t.Run("caller_clock_mismatch", func(t *testing.T) {
		f := &fakeScripter{replies: []fakeReply{{val: good(1)}}}
		s := fakeStore(f)
		s.callerClock = true
		err := s.Take(context.Background(), time.UnixMicro(1_600_000_000_000_000), []rules.Op{gcra('a', 5)}, make([]rules.Result, 1))
		if !errors.Is(err, ErrMalformedReply) {
			t.Errorf("got %v, want ErrMalformedReply (the reply's now is not the caller's)", err)
		}
	})
	t.Run("well_formed", func(t *testing.T) {
		f := &fakeScripter{replies: []fakeReply{{val: with(with(good(1), 1, int64(0)), 2, int64(0))}}}
		r := with(with(good(1), 1, int64(0)), 2, int64(0))
		r[4] = int64(-1)
		f.replies[0].val = r
		res := make([]rules.Result, 1)
		if err := fakeStore(f).Take(context.Background(), time.Now(), []rules.Op{gcra('a', 5)}, res); err != nil {
			t.Fatal(err)
		}
		if want := (rules.Result{ResetAfter: 200 * time.Millisecond, RetryAfter: rules.RetryNever}); res[0] != want {
			t.Errorf("got %+v, want %+v", res[0], want)
		}
	})
}

// TestNoScriptFallback: NOSCRIPT means the script did not run; the store
// runs it once by EVAL. Any other error is returned as it is, without a
// second call.
func TestNoScriptFallback(t *testing.T) {
	t.Parallel()
	noscript := redisError("NOSCRIPT No matching script. Please use EVAL.")
	tests := []struct {
		name        string
		replies     []fakeReply
		wantErr     bool
		wantEvalSha int
		wantEval    int
	}{
		{"cached", []fakeReply{{val: good(1)}}, false, 1, 0},
		{"noscript", []fakeReply{{err: noscript}, {val: good(1)}}, false, 1, 1},
		{"noscript_then_error", []fakeReply{{err: noscript}, {err: io.EOF}}, true, 1, 1},
		{"noscript_then_malformed", []fakeReply{{err: noscript}, {val: "x"}}, true, 1, 1},
		{"other_error", []fakeReply{{err: redisError("ERR something")}}, true, 1, 0},
		{"timeout", []fakeReply{{err: &net.OpError{Op: "read", Err: timeoutErr{}}}}, true, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeScripter{replies: tt.replies}
			s := fakeStore(f)
			err := s.Take(context.Background(), time.Now(), []rules.Op{gcra('a', 5)}, make([]rules.Result, 1))
			if (err != nil) != tt.wantErr {
				t.Errorf("got error %v, want error %v", err, tt.wantErr)
			}
			if f.evalSha != tt.wantEvalSha || f.eval != tt.wantEval {
				t.Errorf("got %d EVALSHA and %d EVAL, want %d and %d", f.evalSha, f.eval, tt.wantEvalSha, tt.wantEval)
			}
		})
	}
}

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestMalformedCrossSlot: a malformed undo payload fails the call; a
// malformed undo reply leaves the request refused and is counted.
func TestMalformedCrossSlot(t *testing.T) {
	t.Parallel()
	keys := keysInSlots("fake", 2, distinctSlots)
	ops := []rules.Op{gcra(0, 5), gcra(0, 5)}
	ops[0].Key, ops[1].Key = keys[0], keys[1]
	allowedWithPayload := func(p any) []any { return append(good(1), p) }
	refusedReply := []any{int64(1_700_000_000_000_000), int64(0), int64(0), int64(1000), int64(500), int64(0)}
	payload := []any{"0:1:2:0:0", "0:3:4:0:0", "0"}
	tests := []struct {
		name           string
		replies        []fakeReply
		wantErr        bool
		wantUndoErrors uint64
	}{
		{"payload_nonzero_int", []fakeReply{{val: allowedWithPayload(int64(2))}, {val: refusedReply}}, true, 0},
		{"payload_string", []fakeReply{{val: allowedWithPayload("x")}, {val: refusedReply}}, true, 0},
		{"payload_short", []fakeReply{{val: allowedWithPayload([]any{"a", "b"})}, {val: refusedReply}}, true, 0},
		{"payload_int_inside", []fakeReply{{val: allowedWithPayload([]any{"a", "b", int64(0)})}, {val: refusedReply}}, true, 0},
		{"payload_bad_count", []fakeReply{{val: allowedWithPayload([]any{"a", "b", "2", "m"})}, {val: refusedReply}}, true, 0},
		{"payload_odd_pairs", []fakeReply{{val: allowedWithPayload([]any{"a", "b", "0", "m"})}, {val: refusedReply}}, true, 0},
		{"missing_payloads", []fakeReply{{val: good(1)}, {val: refusedReply}}, true, 0},
		{"undo_ok", []fakeReply{{val: allowedWithPayload(payload)}, {val: refusedReply}, {val: []any{int64(5), int64(0)}}}, false, 0},
		{"undo_malformed", []fakeReply{{val: allowedWithPayload(payload)}, {val: refusedReply}, {val: []any{int64(5)}}}, false, 1},
		{"undo_negative", []fakeReply{{val: allowedWithPayload(payload)}, {val: refusedReply}, {val: []any{int64(-5), int64(0)}}}, false, 1},
		{"undo_error", []fakeReply{{val: allowedWithPayload(payload)}, {val: refusedReply}, {err: io.EOF}}, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeScripter{replies: tt.replies}
			s := fakeCluster(f)
			res := make([]rules.Result, 2)
			err := s.Take(context.Background(), time.Now(), ops, res)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrMalformedReply) {
				t.Errorf("got %v, want ErrMalformedReply", err)
			}
			if got := s.Stats().UndoErrors; got != tt.wantUndoErrors {
				t.Errorf("Stats().UndoErrors: got %d, want %d", got, tt.wantUndoErrors)
			}
			if !tt.wantErr && (!res[0].Allowed || res[1].Allowed) {
				t.Errorf("got %+v, want the first op allowed, the second refused", res)
			}
			if tt.name == "undo_ok" && res[0].Remaining != 5 {
				t.Errorf("Remaining after the undo: got %d, want 5", res[0].Remaining)
			}
		})
	}
}

// hungServer accepts connections and reads everything sent, never
// answering: a Redis that hangs. It counts connections and script calls.
type hungServer struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    int
	received bytes.Buffer
	accepted chan net.Addr
	wg       sync.WaitGroup
}

func newHungServer(t *testing.T) *hungServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hungServer{ln: ln, accepted: make(chan net.Addr, 64)}
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns++
			h.mu.Unlock()
			h.accepted <- c.RemoteAddr()
			h.wg.Go(func() {
				defer c.Close()
				// Answer the connection's HELLO as a Redis without it
				// would (go-redis then stays on RESP2), then nothing.
				var got []byte
				buf := make([]byte, 4096)
				hello := false
				for {
					n, err := c.Read(buf)
					got = append(got, buf[:n]...)
					if !hello && bytes.Contains(bytes.ToLower(got), []byte("\r\nhello\r\n")) {
						hello = true
						c.Write([]byte("-ERR unknown command 'hello'\r\n"))
					}
					if err != nil {
						break
					}
				}
				h.mu.Lock()
				h.received.Write(got)
				h.mu.Unlock()
			})
		}
	})
	return h
}

// settle waits until every connection dialed before it was accepted and
// read to its end (the client must have closed them), then stops the
// server. A sentinel connection, dialed last, marks the end: connections
// are accepted in order.
func (h *hungServer) settle(t *testing.T) (conns int, received string) {
	t.Helper()
	sentinel, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sentinel.Close()
	deadline := time.After(10 * time.Second)
	for found := false; !found; {
		select {
		case a := <-h.accepted:
			found = a.String() == sentinel.LocalAddr().String()
		case <-deadline:
			t.Fatal("the sentinel connection was never accepted")
		}
	}
	h.ln.Close()
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns - 1, strings.ToLower(h.received.String())
}

// hangGuard bounds the tests below that wait on a real socket, whose
// budgets are tens of milliseconds: a hang guard only, far above any budget
// on any machine, so a busy one cannot fail them. When a call ends is
// TestBudgetIsStoreTime's, on a fake clock; that every wait takes the
// budget is TestBudgetWiring's.
const hangGuard = 5 * time.Second

// TestBudgetWiring: every wait of a call on an established connection is
// bounded by Options.Timeout: the client's pool-wait timeout, the
// coalescer's own timer, and uncoalesced, the read and write timeouts; a
// coalescing client reads and writes its pipelines for overloadBudgets
// budgets, so that a late reply is read (the calls' own timers fail them
// on the store's silence, TestBudgetIsStoreTime); establishing a
// connection has Options.DialTimeout (DefaultDialTimeout when 0); a
// caller's deadline counts too, and nothing is retried. The same on
// Sentinel's failover client; a cluster's clients as uncoalesced ones.
func TestBudgetWiring(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Millisecond
	const pipelined = overloadBudgets * timeout
	for _, tt := range []struct {
		url     string
		dial    time.Duration // Options.DialTimeout
		want    time.Duration // the client's
		alone   bool          // DisableCoalescing
		rwWant  time.Duration // the client's read and write timeouts
		coalesc bool          // whether it has a coalescer
	}{
		{"redis://127.0.0.1:1", 0, DefaultDialTimeout, false, pipelined, true},
		{"redis://127.0.0.1:1", 300 * time.Millisecond, 300 * time.Millisecond, false, pipelined, true},
		{"redis://127.0.0.1:1", 0, DefaultDialTimeout, true, timeout, false},
		{"redis+sentinel://m@127.0.0.1:1", 0, DefaultDialTimeout, false, pipelined, true},
		{"redis+sentinel://m@127.0.0.1:1", 0, DefaultDialTimeout, true, timeout, false},
	} {
		s := mustNew(t, Options{URL: tt.url, Timeout: timeout, DialTimeout: tt.dial, DisableCoalescing: tt.alone})
		defer s.Close()
		o := s.node.(*redis.Client).Options()
		budget := timeout
		if s.co != nil {
			budget = s.co.budget
		}
		if (s.co != nil) != tt.coalesc {
			t.Errorf("%s: coalescing %v, want %v", tt.url, s.co != nil, tt.coalesc)
		}
		for _, d := range []struct {
			name      string
			got, want time.Duration
		}{{"DialTimeout", o.DialTimeout, tt.want}, {"PoolTimeout", o.PoolTimeout, timeout}, {"ReadTimeout", o.ReadTimeout, tt.rwWant}, {"WriteTimeout", o.WriteTimeout, tt.rwWant}, {"coalescer budget", budget, timeout}} {
			if d.got != d.want {
				t.Errorf("%s: %s: got %v, want %v", tt.url, d.name, d.got, d.want)
			}
		}
		// go-redis keeps the -1 that disables retries as 0 (its default is 3).
		if o.MaxRetries != 0 || o.DialerRetries != 1 || !o.ContextTimeoutEnabled {
			t.Errorf("%s: got MaxRetries %d, DialerRetries %d, ContextTimeoutEnabled %v; want 0 (no retry), 1, true", tt.url, o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled)
		}
	}
}

// TestTimeout: against a server that accepts and never answers, Take fails
// with a timeout, no sooner than its budget, with one connection and one
// script call: nothing is retried.
func TestTimeout(t *testing.T) {
	h := newHungServer(t)
	const timeout = 20 * time.Millisecond
	s := mustNew(t, Options{URL: "redis://" + h.ln.Addr().String(), Timeout: timeout})
	ops := []rules.Op{gcra('a', 5), gcra('b', 5)}
	start := time.Now()
	err := s.Take(context.Background(), time.Now(), ops, make([]rules.Result, 2))
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("got no error from a server that never answers")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("got %v, want a timeout", err)
	}
	// A timer never fires early, so the lower bound holds on any machine.
	if elapsed < timeout || elapsed > hangGuard {
		t.Errorf("Take returned after %v, want at its %v budget or later, and no hang", elapsed, timeout)
	}
	s.Close()
	conns, got := h.settle(t)
	if conns != 1 {
		t.Errorf("got %d connections, want 1 (no reconnect, no retry)", conns)
	}
	if n := strings.Count(got, "\r\nevalsha\r\n"); n != 1 {
		t.Errorf("got %d EVALSHA, want 1 (never retried): %q", n, got)
	}
	if n := strings.Count(got, "\r\neval\r\n"); n != 0 {
		t.Errorf("got %d EVAL, want 0: %q", n, got)
	}
}

// TestContextDeadline: a caller's deadline shorter than the budget ends
// the call early (failclosed's prober sets one): with a budget of a
// minute, the call ends with the caller's deadline error.
func TestContextDeadline(t *testing.T) {
	h := newHungServer(t)
	s := mustNew(t, Options{URL: "redis://" + h.ln.Addr().String(), Timeout: time.Minute})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Take(ctx, time.Now(), []rules.Op{gcra('a', 5)}, make([]rules.Result, 1))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the caller's context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > hangGuard {
		t.Errorf("Take returned after %v: the caller's 20ms deadline did not end it", elapsed)
	}
}

// TestRefused: a server that is down (connection refused) fails the call
// at once, with the dial's error: with a budget of a minute, only the
// refusal can end the call.
func TestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := mustNew(t, Options{URL: "redis://" + addr, Timeout: time.Minute})
	defer s.Close()
	start := time.Now()
	if err := s.Take(context.Background(), time.Now(), []rules.Op{gcra('a', 5)}, make([]rules.Result, 1)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("got %v from a server that is down, want connection refused", err)
	}
	if elapsed := time.Since(start); elapsed > hangGuard {
		t.Errorf("Take returned after %v, want at once (the dial was refused)", elapsed)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		wantErr bool
	}{
		{"zero", Options{}, false},
		{"url", Options{URL: "redis://10.0.0.1:6380/2"}, false},
		{"tls", Options{URL: "rediss://10.0.0.1:6380/2"}, false},
		{"unix", Options{URL: "unix:///run/redis.sock?db=1"}, false},
		{"cluster", Options{URL: "redis+cluster://10.0.0.1:7001,10.0.0.2:7001"}, false},
		{"bad_scheme", Options{URL: "http://10.0.0.1"}, true},
		{"bad_cluster", Options{URL: "redis+cluster://"}, true},
		{"negative_timeout", Options{Timeout: -time.Second}, true},
		{"negative_pool", Options{PoolSize: -1}, true},
		{"brace_prefix", Options{Prefix: "edge:{x}:"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if s != nil {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			}
		})
	}
}

// TestTakeBeforeIO: calls a store must refuse do not reach the server.
func TestTakeBeforeIO(t *testing.T) {
	t.Parallel()
	f := &fakeScripter{}
	s := fakeStore(f)
	ctx := context.Background()
	bad := gcra('a', 5)
	bad.Limit = 0
	if err := s.Take(ctx, time.Now(), []rules.Op{gcra('a', 5)}, nil); !errors.Is(err, rules.ErrLenMismatch) {
		t.Errorf("len(res) != len(ops): got %v, want rules.ErrLenMismatch", err)
	}
	if err := s.Take(ctx, time.Now(), []rules.Op{gcra('a', 5), bad}, make([]rules.Result, 2)); !errors.Is(err, rules.ErrInvalidLimits) {
		t.Errorf("invalid op: got %v, want rules.ErrInvalidLimits", err)
	}
	if err := s.Take(ctx, time.Now(), nil, nil); err != nil {
		t.Errorf("no ops: got %v, want nil", err)
	}
	s.callerClock = true
	if err := s.Take(ctx, time.Unix(-1, 0), []rules.Op{gcra('a', 5)}, make([]rules.Result, 1)); err == nil {
		t.Error("a caller clock before the epoch: got no error")
	}
	if f.evalSha+f.eval != 0 {
		t.Errorf("got %d script calls, want none", f.evalSha+f.eval)
	}
}

// TestArgs pins the wire format the script parses: the command's
// arguments as go-redis writes them.
func TestArgs(t *testing.T) {
	t.Parallel()
	s := &Store{prefix: "p:", slackMS: 60000}
	ops := []rules.Op{
		{Kind: rules.OpPeek, Algorithm: rules.SlidingLog, Key: rules.Key{0xab, 23: 0xcd}, Limit: 3, PeriodUS: 1000, Cost: 2, Enforce: true, Attempts: true},
		{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{1}, Limit: 5, Burst: 7, PeriodUS: 1_000_000, Cost: 1},
	}
	var c call
	// Twice: the second call reuses the first's buffers and command.
	for range 2 {
		s.prepare(&c, ops, nil, 1_699_920_000_000_001, false)
		want := []string{
			"evalsha", takeSHA, "3",
			"p:{ab" + strings.Repeat("0", 44) + "cd}",
			"p:{ab" + strings.Repeat("0", 44) + "cd}:log",
			"p:{01" + strings.Repeat("0", 46) + "}",
			// 76 = take (0) + 4 (now and the slack follow) + 8 (a
			// sliding_log: the port) + 32×2 ops; 233 = peek (1) +
			// 8×sliding_log (5) + 64 (enforce) + 128 (attempts).
			"76", "1699920000000001", "60000",
			"233", "3", "0", "1000", "2",
			"0", "5", "7", "1000000", "1",
		}
		if got := argStrings(t, c.command().Args()); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("args: got %q, want %q", got, want)
		}
	}
	if got := c.keyString(2); got != "p:{01"+strings.Repeat("0", 46)+"}" {
		t.Errorf("keyString(2): got %q", got)
	}
}

// argStrings renders a command's arguments as go-redis writes them.
func argStrings(t *testing.T, args []any) []string {
	t.Helper()
	var out []string
	for _, a := range args {
		switch v := a.(type) {
		case string:
			out = append(out, v)
		case []byte:
			out = append(out, string(v))
		case int:
			out = append(out, strconv.Itoa(v))
		case *int64:
			out = append(out, strconv.FormatInt(*v, 10))
		default:
			t.Fatalf("argument %v of type %T", a, a)
		}
	}
	return out
}
