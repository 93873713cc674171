package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// queuePolicy is the queue: 5 a second, a burst of 20, held.
const queuePolicy = `
rule "api-queue" {
  paths     = ["/api/*"]
  key       = ["ip"]
  algorithm = "leaky_bucket"
  limit     = 5
  period    = "1s"
  burst     = 20
  queue     = true
}
`

// fakeTimers is Options.QueueAfter on the test's clock: each hold asks for
// a channel; fire delivers to those whose deadline has come.
type fakeTimers struct {
	clk     *fakeClock
	mu      sync.Mutex
	pending []fakeTimer
}

type fakeTimer struct {
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (f *fakeTimers) after(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	f.pending = append(f.pending, fakeTimer{at: f.clk.Now().Add(d), ch: ch})
	return ch
}

func (f *fakeTimers) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.pending) }

func (f *fakeTimers) deadline(i int) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending[i].at
}

// fire delivers to every timer whose deadline is at or before now.
func (f *fakeTimers) fire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clk.Now()
	for i := range f.pending {
		if p := &f.pending[i]; !p.fired && !p.at.After(now) {
			p.fired = true
			p.ch <- now
		}
	}
}

// orderOrigin records the X-Seq of every request it receives, in order.
type orderOrigin struct {
	mu   sync.Mutex
	seqs []int
}

func (o *orderOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.Header.Get("X-Seq"))
	o.mu.Lock()
	o.seqs = append(o.seqs, n)
	o.mu.Unlock()
	w.WriteHeader(200)
}

func (o *orderOrigin) got() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.seqs...)
}

type queueNode struct {
	addr   string
	srv    *Server
	origin *orderOrigin
	clk    *fakeClock
	timers *fakeTimers
}

func startQueueNode(t *testing.T, maxHeld int) *queueNode {
	t.Helper()
	return startQueueNodeWith(t, queuePolicy, nil, maxHeld, false)
}

// startQueueNodeWith starts src's node on store (nil: a memory store), its
// holds on the fake timers or, when realTimers, on the production ones.
func startQueueNodeWith(t *testing.T, src string, store rules.Store, maxHeld int, realTimers bool) *queueNode {
	t.Helper()
	p, diags := builtin.Load("queue.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	q := &queueNode{origin: &orderOrigin{}, clk: clk, timers: &fakeTimers{clk: clk}}
	oln := listen(t)
	osrv := &http.Server{Handler: q.origin}
	go func() { _ = osrv.Serve(oln) }()
	t.Cleanup(func() { osrv.Close() })
	if store == nil {
		ms, err := memstore.New(memstore.Options{MaxKeys: 1000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ms.Close() })
		store = ms
	}
	after := q.timers.after
	if realTimers {
		after = nil
	}
	var err error
	q.srv, err = New(Options{Extensions: builtin.Extensions(), Policy: p, Store: store, Upstream: "http://" + oln.Addr().String(), Registry: prometheus.NewRegistry(),
		Clock: clk, QueueAfter: after, QueueMaxHeld: maxHeld})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ln := listen(t)
	q.addr = ln.Addr().String()
	wg.Add(1)
	go func() { defer wg.Done(); _ = q.srv.Serve(ctx, ln) }()
	t.Cleanup(func() { q.timers.clk.Advance(time.Hour); q.timers.fire(); cancel(); wg.Wait() })
	return q
}

// waitFor polls cond until it holds, failing after a generous guard.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// send starts request seq in the background; its status arrives on the
// returned channel.
func (q *queueNode) send(t *testing.T, seq int) <-chan int {
	ch := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+q.addr+"/api/x", nil)
		req.Header.Set("X-Seq", strconv.Itoa(seq))
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("request %d: %v", seq, err)
			ch <- 0
			return
		}
		resp.Body.Close()
		ch <- resp.StatusCode
	}()
	return ch
}

// A burst of 20 at 5 a second through the real server: the first is
// forwarded at once, the next 19 are held for 200ms, 400ms, … 3.8s on the
// test's clock, the 21st is refused 429, and each step of 200ms releases
// exactly the next one, so the origin receives them in arrival order.
func TestQueueReleasesInOrderThroughTheServer(t *testing.T) {
	q := startQueueNode(t, 0)
	t0 := q.clk.Now()
	var replies []<-chan int
	for i := range 20 {
		replies = append(replies, q.send(t, i))
		if i == 0 {
			waitUntil(t, "the first request at the origin", func() bool { return len(q.origin.got()) == 1 })
			continue
		}
		waitUntil(t, fmt.Sprintf("request %d held", i), func() bool { return q.timers.count() == i })
	}
	if got := <-q.send(t, 20); got != 429 {
		t.Fatalf("21st: status %d, want 429", got)
	}
	for i := 1; i < 20; i++ {
		if d := q.timers.deadline(i - 1).Sub(t0); d != time.Duration(i)*200*time.Millisecond {
			t.Fatalf("request %d held until t0+%v, want t0+%v", i, d, time.Duration(i)*200*time.Millisecond)
		}
	}
	if v := float64(q.srv.queueHeld.Load()); v != 19 {
		t.Errorf("edge_queue_held = %v, want 19", v)
	}
	for i := 1; i < 20; i++ {
		q.clk.Advance(200 * time.Millisecond)
		q.timers.fire()
		waitUntil(t, fmt.Sprintf("request %d at the origin", i), func() bool { return len(q.origin.got()) >= i+1 })
		got := q.origin.got()
		if len(got) != i+1 || got[i] != i {
			t.Fatalf("after %v the origin has %v, want 0…%d in order", time.Duration(i)*200*time.Millisecond, got, i)
		}
	}
	for i, ch := range replies {
		if st := <-ch; st != 200 {
			t.Errorf("request %d: status %d, want 200", i, st)
		}
	}
	waitUntil(t, "edge_queue_held back to 0", func() bool { return float64(q.srv.queueHeld.Load()) == 0 })
}

// A held request whose client hangs up is dropped when its time comes: the
// origin never receives it, the one behind it still arrives, and
// edge_queue_dropped_total counts it.
func TestQueueDropsAClientThatLeft(t *testing.T) {
	q := startQueueNode(t, 0)
	if st := <-q.send(t, 0); st != 200 {
		t.Fatalf("first: %d", st)
	}
	c, err := net.Dial("tcp", q.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /api/x HTTP/1.1\r\nHost: x\r\nX-Seq: 1\r\n\r\n")
	waitUntil(t, "request 1 held", func() bool { return q.timers.count() == 1 })
	second := q.send(t, 2)
	waitUntil(t, "request 2 held", func() bool { return q.timers.count() == 2 })
	c.Close()

	q.clk.Advance(200 * time.Millisecond)
	q.timers.fire()
	waitUntil(t, "the drop counted", func() bool { return testutil.ToFloat64(q.srv.m.queueDropped) == 1 })
	q.clk.Advance(200 * time.Millisecond)
	q.timers.fire()
	if st := <-second; st != 200 {
		t.Fatalf("request 2: %d, want 200", st)
	}
	if got := q.origin.got(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("the origin received %v, want [0 2] (1's client had gone)", got)
	}
}

// The node-wide cap: with QueueMaxHeld 2, a third request the bucket admits
// early is answered 503 at once (not held) and counted; the held two are
// still forwarded.
func TestQueueNodeCap(t *testing.T) {
	q := startQueueNode(t, 2)
	if st := <-q.send(t, 0); st != 200 {
		t.Fatalf("first: %d", st)
	}
	a := q.send(t, 1)
	waitUntil(t, "request 1 held", func() bool { return q.timers.count() == 1 })
	b := q.send(t, 2)
	waitUntil(t, "request 2 held", func() bool { return q.timers.count() == 2 })
	if st := <-q.send(t, 3); st != 503 {
		t.Fatalf("third held: %d, want 503", st)
	}
	if v := testutil.ToFloat64(q.srv.m.queueFull); v != 1 {
		t.Errorf("edge_queue_full_total = %v, want 1", v)
	}
	q.clk.Advance(time.Second)
	q.timers.fire()
	if sa, sb := <-a, <-b; sa != 200 || sb != 200 {
		t.Fatalf("held: %d %d, want 200 200", sa, sb)
	}
	if got := q.origin.got(); len(got) != 3 {
		t.Fatalf("the origin received %v, want 0, 1, 2", got)
	}
}

// max_delay through the real server, on the memory store and a real
// redis-server: with max_delay = "1s" the first six of a burst are admitted
// (delays 0 … 1s), the next ten would wait 1.2 s and are refused 429 at
// once, never held, and their units are given back: 200ms later the next
// is held for exactly 1s. Without the refunds the level would be 16 and it
// would be refused too (a 3 s wait).
func TestQueueMaxDelayThroughTheServer(t *testing.T) {
	src := strings.Replace(queuePolicy, "queue     = true", "queue     = true\n  max_delay = \"1s\"", 1)
	t.Run("memory", func(t *testing.T) { testQueueMaxDelay(t, startQueueNodeWith(t, src, nil, 0, false)) })
	t.Run("redis", func(t *testing.T) {
		rs, err := redisstore.New(redisstore.Options{URL: testredis.Start(t).URL(), Timeout: time.Second, UseCallerClock: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		testQueueMaxDelay(t, startQueueNodeWith(t, src, rs, 0, false))
	})
}

func testQueueMaxDelay(t *testing.T, q *queueNode) {
	t0 := q.clk.Now()
	if st := <-q.send(t, 0); st != 200 {
		t.Fatalf("first: %d", st)
	}
	var held []<-chan int
	for i := 1; i <= 5; i++ {
		held = append(held, q.send(t, i))
		waitUntil(t, fmt.Sprintf("request %d held", i), func() bool { return q.timers.count() == i })
	}
	for i := range 10 {
		if st := <-q.send(t, 100+i); st != 429 {
			t.Fatalf("over max_delay %d: status %d, want 429", i, st)
		}
	}
	if n := q.timers.count(); n != 5 {
		t.Fatalf("%d held, want 5 (the refused are never held)", n)
	}
	q.clk.Advance(200 * time.Millisecond)
	held = append(held, q.send(t, 6))
	waitUntil(t, "request 6 held", func() bool { return q.timers.count() == 6 })
	if d := q.timers.deadline(5).Sub(t0); d != 1200*time.Millisecond {
		t.Fatalf("request 6 held until t0+%v, want t0+1.2s (1s from its arrival)", d)
	}
	q.clk.Advance(time.Second)
	q.timers.fire()
	for i, ch := range held {
		if st := <-ch; st != 200 {
			t.Errorf("held %d: %d, want 200", i+1, st)
		}
	}
	// Released together here (order is TestQueueReleasesInOrderThroughTheServer's).
	got := q.origin.got()
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6}) {
		t.Fatalf("the origin received %v, want 0 … 6 and none of the refused", got)
	}
}

// The production wait, on the pooled timers (no QueueAfter): at 1 a second
// with a burst of 2 on the test's fixed clock, the second request is held
// for 1s on a real timer (seen held, then forwarded), twice, so a pooled
// timer is reused (Stop, Reset) across holds.
func TestQueuePooledTimers(t *testing.T) {
	src := strings.NewReplacer(`limit     = 5`, `limit     = 1`, `burst     = 20`, `burst     = 2`).Replace(queuePolicy)
	q := startQueueNodeWith(t, src, nil, 0, true)
	for round := range 2 {
		if st := <-q.send(t, 10*round); st != 200 {
			t.Fatalf("round %d, first: %d, want 200", round, st)
		}
		held := q.send(t, 10*round+1)
		waitUntil(t, "the second held", func() bool { return q.srv.queueHeld.Load() == 1 })
		if st := <-held; st != 200 {
			t.Fatalf("round %d, second: %d, want 200", round, st)
		}
		q.clk.Advance(2 * time.Second) // the bucket drains for the next round
	}
	if got := q.origin.got(); !slices.Equal(got, []int{0, 1, 10, 11}) {
		t.Fatalf("the origin received %v, want 0, 1, 10, 11", got)
	}
	if n := q.timers.count(); n != 0 {
		t.Fatalf("the test hook was used %d times", n)
	}
}
