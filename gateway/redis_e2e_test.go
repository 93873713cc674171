package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/internal/testredis"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/nodestore"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// The fleet and store-failure tests of issue 3, through real edge nodes on
// loopback in front of the demo origin, with real redis-server processes
// (internal/testredis starts one per test, so a test can kill it).

const redisTimeout = 5 * time.Millisecond // the policy's default budget

// breakerSpanBudgets is how many budgets of failures open the breaker, as
// cmd/edge's openStore sets it (docs/attacks.md, "Saturation fail-open").
const breakerSpanBudgets = 20

// redisPolicy is foundation.hcl with its memory store swapped for Redis,
// at the default 5 ms budget: the failure tests measure against it. tls,
// for a TLS server, names its files (redis_transport_test.go).
func redisPolicy(t testing.TB, url string, tls ...testredis.TLSFiles) *rules.Policy {
	return loadPolicy(t, foundation, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url = %q\n%s}", url, tlsAttrs(tls)))
}

// countingPolicy is redisPolicy with a 1 s budget, for tests that count
// exact decisions and script calls: on a loaded CI machine a 5 ms budget
// can expire, and a store error (and the breaker's probe) would change
// the counts these tests are not about.
func countingPolicy(t testing.TB, url string, tls ...testredis.TLSFiles) *rules.Policy {
	return loadPolicy(t, foundation, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url     = %q\n  timeout = \"1s\"\n%s}", url, tlsAttrs(tls)))
}

type fleetNode struct {
	srv   *Server
	fc    *failclosed.Store
	rs    *redisstore.Store
	addr  string
	admin string
	reg   *prometheus.Registry
}

// startFleet runs n edge nodes on one Redis and one demo origin, sharing
// one key secret, as a fleet behind a load balancer would.
func startFleet(t testing.TB, p *rules.Policy, n int) (*demo.Origin, string, []*fleetNode) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	origin := demo.New()
	oln := listen(t)
	wg.Add(1)
	go func() { defer wg.Done(); _ = origin.Serve(ctx, oln) }()

	var nodes []*fleetNode
	for range n {
		rs, err := redisstore.New(storeOptions(nodecfg.Of(p).Store))
		if err != nil {
			t.Fatal(err)
		}
		fc, err := failclosed.New(rs, failclosed.Options{FleetSize: nodecfg.Of(p).Store.FleetSize, FailureSpan: breakerSpanBudgets * nodecfg.Of(p).Store.Timeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fc.Close() })
		fn := &fleetNode{fc: fc, rs: rs, reg: prometheus.NewRegistry()}
		fn.srv, err = New(Options{
			Policy: p, Store: fc, KeySecret: []byte("one fleet, one secret, 32+ bytes long"), Extensions: builtin.Extensions(), // as cmd/edge requires with Redis
			Upstream: "http://" + oln.Addr().String(), Registry: fn.reg, Health: fc,
			Collectors: append(nodestore.StoreMetrics(fc), nodestore.RedisMetrics(rs.Stats)...),
		})
		if err != nil {
			t.Fatal(err)
		}
		ln, aln := listen(t), listen(t)
		fn.addr, fn.admin = ln.Addr().String(), aln.Addr().String()
		wg.Add(2)
		go func() { defer wg.Done(); _ = fn.srv.Serve(ctx, ln) }()
		go func() { defer wg.Done(); _ = fn.srv.ServeAdmin(ctx, aln) }()
		nodes = append(nodes, fn)
	}
	return origin, oln.Addr().String(), nodes
}

// TestFleetSharesOneCount runs over each transport to Redis: plain, TLS
// and Sentinel (redisTransports).
func TestFleetSharesOneCount(t *testing.T) {
	for _, tr := range redisTransports {
		t.Run(tr.name, func(t *testing.T) { testFleetSharesOneCount(t, tr.start(t)) })
	}
}

func testFleetSharesOneCount(t *testing.T, r redisDeployment) {
	origin, _, nodes := startFleet(t, countingPolicy(t, r.URL(), r.TLS()), 2)
	var statuses []int
	for i := range 10 {
		n := nodes[i%2] // the load balancer alternates
		statuses = append(statuses, do(t, "POST", "http://"+n.addr+"/login", "", "X-Forwarded-For", "203.0.113.7").status)
	}
	want := []int{401, 401, 401, 401, 401, 429, 429, 429, 429, 429}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v: two nodes must share one limit of 5", statuses, want)
	}
	if got := origin.Hits()["/login"]; got != 5 {
		t.Errorf("origin got %d /login, want 5", got)
	}
}

func TestOneRoundTripPerRequest(t *testing.T) {
	r := testredis.Start(t)
	_, _, nodes := startFleet(t, countingPolicy(t, r.URL()), 1)
	// Two rules match /api/* (one dry-run): one script call per request.
	do(t, "GET", "http://"+nodes[0].addr+"/api/warm", "")
	before, err := r.CommandCalls("evalsha")
	if err != nil {
		t.Fatal(err)
	}
	evalBefore, _ := r.CommandCalls("eval")
	const n = 25
	for i := range n {
		do(t, "GET", "http://"+nodes[0].addr+"/api/x", "", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))
	}
	after, _ := r.CommandCalls("evalsha")
	evalAfter, _ := r.CommandCalls("eval")
	if got := (after - before) + (evalAfter - evalBefore); got != n {
		t.Errorf("%d requests made %d script calls, want %d", n, got, n)
	}
	// One at a time, each request's call is a pipeline of its own; the
	// Redis client's counters are exported. The first request found a
	// fresh Redis without the script (NOSCRIPT) and ran it by EVAL.
	m := do(t, "GET", "http://"+nodes[0].admin+"/metrics", "").body
	if want := fmt.Sprintf("edge_redis_pipelines_total %d\n", n+1); !strings.Contains(m, want) {
		t.Errorf("metrics lack %q", want)
	}
	for _, want := range []string{"edge_redis_late_reads_total 0\n", "edge_redis_late_replies_total 0\n", "edge_redis_noscript_total 1\n", "edge_redis_undos_total 0\n", "edge_redis_shared_calls_total 0\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestRedisKeysHaveTTLAndNoRawIdentities: every key has a TTL, and no key
// or value holds a client address or a header value (keyed hashes only).
func TestRedisKeysHaveTTLAndNoRawIdentities(t *testing.T) {
	r := testredis.Start(t)
	p := loadPolicy(t, foundation, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url = %q\n  timeout = \"1s\"\n}", r.URL()),
		`rule "api-per-client" {`, `rule "api-per-key" {
  paths = ["/api/*"]
  key   = ["header:X-Api-Key", "ip"]
  limit = 100
  period = "1h"
}

rule "api-per-client" {`)
	_, _, nodes := startFleet(t, p, 1)
	addr := "http://" + nodes[0].addr
	secrets := []string{"198.51.100.23", "2001:db8:77::1", "sk-live-raw-api-key"}
	for _, path := range []string{"/login", "/signup", "/otp/send", "/api/x", "/trace/gcra", "/trace/fixed_window", "/trace/sliding_window", "/trace/sliding_log", "/trace/token_bucket", "/trace/leaky_bucket"} {
		for _, ip := range secrets[:2] {
			do(t, "POST", addr+path, "", "X-Forwarded-For", ip, "X-Api-Key", secrets[2])
			do(t, "GET", addr+path, "", "X-Forwarded-For", ip, "X-Api-Key", secrets[2])
		}
	}
	keys, err := r.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 10 {
		t.Fatalf("got %d keys, want one per rule and client", len(keys))
	}
	for _, k := range keys {
		// -1 is a key without a TTL: the failure this test looks for. -2
		// is a key that expired since the SCAN (the trace rules' 1 s
		// states decay fast), which is its TTL at work.
		ttl, err := r.Do("PTTL", k)
		if err != nil || ttl == "-1" {
			t.Errorf("key %q has no TTL (PTTL %s, %v)", k, ttl, err)
		}
		if ttl == "-2" {
			continue
		}
		dump, err := r.Do("DUMP", k)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(k, s) || strings.Contains(dump, s) {
				t.Errorf("key %q or its value holds %q", k, s)
			}
		}
	}
}

// outageLoad sends sensitive (POST /login) and ordinary (GET /api/x)
// requests from many clients until stop is closed, recording what came back
// and how long it took, split by the phase of the run.
type outageLoad struct {
	mu        sync.Mutex
	phase     atomic.Int32 // 0 up, 1 down, 2 back
	loginOK   int          // 401 from the origin: the request was forwarded
	statuses  [3]map[string]int
	lat       [3][]time.Duration // per phase
	total     atomic.Int64
	transport *http.Transport
}

func (l *outageLoad) run(t *testing.T, addr string, stop <-chan struct{}, worker int) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: l.transport}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		method, path := "GET", "/api/x"
		if i%2 == 0 {
			method, path = "POST", "/login"
		}
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		// Many clients, so the login limit of 5 a minute is not what refuses.
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.%d.%d", worker, i%250))
		phase := l.phase.Load()
		start := time.Now()
		resp, err := c.Do(req)
		lat := time.Since(start)
		if err != nil {
			t.Errorf("request failed: %v", err)
			return
		}
		resp.Body.Close()
		l.total.Add(1)
		l.mu.Lock()
		l.statuses[phase][fmt.Sprintf("%s %d", path, resp.StatusCode)]++
		if path == "/login" && resp.StatusCode == 401 {
			l.loginOK++
		}
		if l.phase.Load() == phase {
			l.lat[phase] = append(l.lat[phase], lat)
		}
		l.mu.Unlock()
	}
}

// TestRedisOutageDuringLoad kills redis-server during a load run:
// sensitive routes answer 503 and not one sensitive request reaches the
// origin unchecked; ordinary routes keep answering (fail open); no request
// hangs (the client's 5s timeout fails the test); after Redis returns the
// node is healthy again and sensitive requests pass; no goroutine leaks.
//
// Correctness here never rests on the machine's speed: the waits below
// are for events, bounded generously against a hang only. When the node is
// healthy again (within one second of its store returning) is failclosed's
// TestRecoveryByRequests and TestRecoveryInBackground, on a fake clock; how
// fast it answers while Redis is down (p99 within the budget + 5 ms) is a
// latency goal, measured by BenchmarkRedisOutage (BENCHMARKS.md), not
// asserted by a test that two busy cores could fail.
//
// It runs over each transport to Redis (redisTransports): with Sentinel,
// the primary and its replica die and return together.
func TestRedisOutageDuringLoad(t *testing.T) {
	for _, tr := range redisTransports {
		t.Run(tr.name, func(t *testing.T) {
			goleakOpts := goleak.IgnoreCurrent()
			testRedisOutageDuringLoad(t, tr.start(t), goleakOpts)
		})
	}
}

func testRedisOutageDuringLoad(t *testing.T, r redisDeployment, goleakOpts goleak.Option) {
	n := startOutageNode(t, r.URL(), r.TLS())
	origin, addr, admin := n.origin, n.addr, n.admin

	l := &outageLoad{transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for i := range l.statuses {
		l.statuses[i] = map[string]int{}
	}
	stop := make(chan struct{})
	var lwg sync.WaitGroup
	for w := range 2 { // two cores: more workers only measure the scheduler
		lwg.Add(1)
		go func() { defer lwg.Done(); l.run(t, addr, stop, w) }()
	}
	waitFor(t, func() bool { return l.total.Load() >= 200 }, 10*time.Second, "load to start")

	// Redis dies.
	r.Kill()
	l.phase.Store(1)
	waitFor(t, func() bool { return readyzStatus(t, admin) == "degraded" }, 10*time.Second, "readyz to report degraded")
	downAt := l.total.Load()
	waitFor(t, func() bool { return l.total.Load() >= downAt+400 }, 20*time.Second, "load while Redis is down")
	if st := statusOf(t, admin, "/readyz"); st != 200 {
		t.Errorf("readyz answered %d while degraded, want 200", st)
	}
	if st := statusOf(t, admin, "/readyz?strict=1"); st != 503 {
		t.Errorf("readyz?strict=1 answered %d while degraded, want 503", st)
	}

	// Redis returns: healthy again (the hang guards are ten times the
	// one second the node promises, which failclosed's tests pin).
	l.phase.Store(2)
	r.Restart()
	back := time.Now()
	waitFor(t, func() bool { return readyzStatus(t, admin) == "ok" }, 10*time.Second, "the node to be healthy after Redis returned")
	t.Logf("healthy %v after Redis returned", time.Since(back).Round(time.Millisecond))
	waitFor(t, func() bool {
		return do(t, "POST", "http://"+addr+"/login", "", "X-Forwarded-For", "192.0.2.200").status == 401
	}, 10*time.Second, "a sensitive request to pass again")
	backAt := l.total.Load()
	waitFor(t, func() bool { return l.total.Load() >= backAt+100 }, 10*time.Second, "load after Redis returned")
	close(stop)
	lwg.Wait()

	down := l.statuses[1]
	t.Logf("while down: %v; after: %v", down, l.statuses[2])
	if down["/login 401"] != 0 {
		t.Errorf("%d sensitive requests were forwarded while Redis was down", down["/login 401"])
	}
	if down["/login 503"] == 0 || down["/api/x 200"] == 0 {
		t.Errorf("while down: want /login 503s and /api/x 200s, got %v", down)
	}
	for k, n := range down {
		if k != "/login 503" && k != "/api/x 200" {
			t.Errorf("while down: %d answers %q", n, k)
		}
	}
	// Every /login the origin saw was one the store allowed: the origin's
	// count equals the forwarded answers (plus the probe above).
	if got, want := origin.Hits()["/login"], int64(l.loginOK+1); got != want {
		t.Errorf("origin saw %d /login, clients saw %d forwarded", got, want)
	}
	// Logged for whoever reads a failure; the goal is BenchmarkRedisOutage's.
	for phase, lat := range l.lat {
		p50, p99, top := percentiles(lat)
		t.Logf("phase %d latency over %d requests: p50 %v p99 %v max %v", phase, len(lat), p50, p99, top)
	}

	l.transport.CloseIdleConnections()
	n.stop()
	goleak.VerifyNone(t, goleakOpts,
		// fasthttp's own background goroutines: process-wide (the date
		// updater, the dialer's address cache) or idle cleaners that exit
		// on their own schedule after the servers and clients stop.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	)
}

// outageNode is one edge node on Redis at the default budget, with its
// own demo origin, as TestRedisOutageDuringLoad and BenchmarkRedisOutage
// run it.
type outageNode struct {
	origin      *demo.Origin
	addr, admin string
	stop        func() // stops the servers and closes the store
}

func startOutageNode(tb testing.TB, url string, tls ...testredis.TLSFiles) *outageNode {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &outageNode{origin: demo.New()}
	oln := listen(tb)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = n.origin.Serve(ctx, oln) }()
	p := redisPolicy(tb, url, tls...)
	rs, err := redisstore.New(storeOptions(nodecfg.Of(p).Store))
	if err != nil {
		tb.Fatal(err)
	}
	fc, err := failclosed.New(rs, failclosed.Options{FailureSpan: breakerSpanBudgets * redisTimeout}) // as cmd/edge sets it
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: fc, KeySecret: []byte("a Redis-backed node needs 32 bytes"), Upstream: "http://" + oln.Addr().String(), Health: fc, Collectors: nodestore.StoreMetrics(fc)})
	if err != nil {
		tb.Fatal(err)
	}
	ln, aln := listen(tb), listen(tb)
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	go func() { defer wg.Done(); _ = srv.ServeAdmin(ctx, aln) }()
	n.addr, n.admin = ln.Addr().String(), aln.Addr().String()
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			fc.Close()
		})
	}
	tb.Cleanup(n.stop)
	return n
}

// percentiles returns lat's median, 99th percentile and maximum, sorting
// lat; zeros when it is empty.
func percentiles(lat []time.Duration) (p50, p99, top time.Duration) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
}

// BenchmarkRedisOutage measures what clients wait for while a node's Redis
// is down: one node at the default 5 ms budget, warmed up on a live
// redis-server which is then killed ("down"; "up" leaves it running, for
// comparison), and parallel clients alternating a sensitive route (/login,
// answered 503 while down) and an ordinary one (/api/x, fail open: 200)
// from the kill on, so the requests that pay the budget before the breaker
// opens, and its probes, are counted. It reports the p50 and p99 latency
// per request; the goal (issue 3) is a p99 within the budget + 5 ms,
// without the race detector (BENCHMARKS.md, "The Redis store"). A wrong
// answer fails the benchmark; a slow one is only reported.
//
//	go test -run '^$' -bench BenchmarkRedisOutage -benchtime 5000x ./gateway/
func BenchmarkRedisOutage(b *testing.B) {
	for _, down := range []bool{false, true} {
		name, login := "up", 401 // the origin's answer to a forwarded /login
		if down {
			name, login = "down", 503
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			r := testredis.Start(b)
			n := startOutageNode(b, r.URL())
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
			for i := range 50 { // the store's connection pool is in use when Redis dies
				do(b, "GET", "http://"+n.addr+"/api/x", "", "X-Forwarded-For", fmt.Sprintf("198.18.0.%d", i))
			}
			if down {
				r.Kill()
			}
			var (
				mu      sync.Mutex
				lat     []time.Duration
				workers atomic.Int32
			)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := workers.Add(1)
				mine := make([]time.Duration, 0, 1024)
				for i := 0; pb.Next(); i++ {
					// Many clients, so the login limit of 5 a minute is not what refuses.
					method, path, want := "GET", "/api/x", 200
					if i%2 == 0 {
						method, path, want = "POST", "/login", login
					}
					req, _ := http.NewRequest(method, "http://"+n.addr+path, nil)
					req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.%d.%d.%d", 18+w, i/250%250, i%250))
					start := time.Now()
					resp, err := c.Do(req)
					took := time.Since(start)
					if err != nil {
						b.Errorf("request failed: %v", err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != want {
						b.Errorf("%s %s (Redis %s): got %d, want %d", method, path, name, resp.StatusCode, want)
						return
					}
					mine = append(mine, took)
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			p50, p99, _ := percentiles(lat)
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		})
	}
}

// TestSlowRedisIsTreatedAsDead: a Redis that does not answer (a port that
// accepts and never replies; a server stuck in DEBUG SLEEP) is answered
// like a dead one: 503 on a sensitive route, the ordinary route fails open.
// The answer is the proof: a request that waited for the sleeping server
// would be forwarded (401 from the origin) once it woke.
func TestSlowRedisIsTreatedAsDead(t *testing.T) {
	blackhole := listen(t)
	defer blackhole.Close()
	go func() {
		for {
			c, err := blackhole.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	r := testredis.Start(t)
	for _, tt := range []struct {
		name  string
		url   string
		setup func()
	}{
		{"blackholed port", "redis://" + blackhole.Addr().String() + "/0", func() {}},
		{"DEBUG SLEEP", r.URL(), func() {
			// Asleep for far longer than the requests below take on any
			// machine; a PING unanswered for 500ms is the sleep, not a slow
			// node (an awake Redis answers in microseconds).
			go func() { _, _ = r.Do("DEBUG", "SLEEP", "10") }()
			waitFor(t, func() bool { return !pingWithin(r.Addr(), 500*time.Millisecond) }, 10*time.Second, "redis to be asleep")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, nodes := startFleet(t, redisPolicy(t, tt.url), 1)
			tt.setup()
			for i := range 5 {
				start := time.Now()
				st := do(t, "POST", "http://"+nodes[0].addr+"/login", "", "X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i)).status
				lat := time.Since(start)
				if st != 503 {
					t.Errorf("request %d: got %d, want 503", i, st)
				}
				// A hang guard only, far above the 5 ms budget: a request that
				// waited for the store would take the 10 s sleep, or for ever.
				if lat > 5*time.Second {
					t.Errorf("request %d took %v: it waited for the store (budget %v)", i, lat, redisTimeout)
				}
			}
			if st := do(t, "GET", "http://"+nodes[0].addr+"/api/x", "").status; st != 200 {
				t.Errorf("ordinary route: got %d, want 200 (fail open)", st)
			}
		})
	}
}

func pingWithin(addr string, d time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	_, err = c.Read(buf)
	return err == nil
}

// waitFor polls cond until it holds or d passes: waiting for an event of a
// real process, not sleeping for correctness.
func waitFor(t testing.TB, cond func() bool, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readyzStatus(t testing.TB, admin string) string {
	r := do(t, "GET", "http://"+admin+"/readyz", "")
	switch {
	case strings.Contains(r.body, `"status":"degraded"`):
		return "degraded"
	case strings.Contains(r.body, `"status":"ok"`):
		return "ok"
	}
	return r.body
}

func statusOf(t *testing.T, admin, path string) int {
	return do(t, "GET", "http://"+admin+path, "").status
}

// TestLocalFallbackWhenRedisIsDown: a rule with on_store_error = "local"
// answers from an in-memory bucket at limit ÷ fleet_size while Redis is
// down: 10 a minute in a fleet of 2 is 5 per node.
func TestLocalFallbackWhenRedisIsDown(t *testing.T) {
	r := testredis.Start(t)
	p := loadPolicy(t, foundation,
		"store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url        = %q\n  fleet_size = 2\n}", r.URL()),
		`rule "api-per-client" {
  paths     = ["/api/*"]`, `rule "api-per-client" {
  on_store_error = "local"
  paths     = ["/api/*"]`)
	_, _, nodes := startFleet(t, p, 1)
	r.Kill()
	var statuses []int
	for range 7 {
		statuses = append(statuses, do(t, "GET", "http://"+nodes[0].addr+"/api/x", "", "X-Forwarded-For", "192.0.2.44").status)
	}
	if want := []int{200, 200, 200, 200, 200, 429, 429}; fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v (the local bucket: ceil(10/2) = 5)", statuses, want)
	}
	if st := nodes[0].fc.Stats(); st.LocalAllow < 5 || st.LocalDeny < 2 {
		t.Errorf("local fallback counters %+v", st)
	}
}

// TestConcurrentRequestsShareScriptCallsExactly: through the real server,
// concurrent requests' script calls go to Redis together (shared script
// calls) and the limit still holds exactly: of 32 simultaneous logins from
// one address, 5 reach the origin, whichever shared call carried them.
func TestConcurrentRequestsShareScriptCallsExactly(t *testing.T) {
	r := testredis.Start(t)
	origin, _, nodes := startFleet(t, countingPolicy(t, r.URL()), 1)
	const burst, limit = 32, 5
	metric := func() string { return do(t, "GET", "http://"+nodes[0].admin+"/metrics", "").body }
	for round := range 5 {
		ip := fmt.Sprintf("203.0.113.%d", 100+round)
		statuses := make([]int, burst)
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				statuses[i] = do(t, "POST", "http://"+nodes[0].addr+"/login", "", "X-Forwarded-For", ip).status
			})
		}
		wg.Wait()
		count := map[int]int{}
		for _, st := range statuses {
			count[st]++
		}
		if count[401] != limit || count[429] != burst-limit {
			t.Fatalf("round %d: got %v, want %d forwarded (401 from the origin) and %d refused", round, count, limit, burst-limit)
		}
		if got := origin.Hits()["/login"]; got != int64(limit*(round+1)) {
			t.Fatalf("round %d: the origin got %d /login, want %d", round, got, limit*(round+1))
		}
		if !strings.Contains(metric(), "edge_redis_shared_calls_total 0\n") {
			return // shared calls happened, and every round so far was exact
		}
	}
	t.Errorf("no script call was shared in 5 rounds of %d concurrent requests:\n%s", burst, metric())
}

// TestLateRedisDecidesThroughTheServer is saturation fail-open (docs/
// attacks.md) through the real server: a login whose Redis reply comes
// after the store's budget, as on a node short of CPU, is decided in
// Redis and reaches the origin, where it used to be refused with the
// fail-closed 503. Redis answers at once; a proxy in front of it holds the
// reply until one budget and a fifth have passed, well inside the 20
// budgets a late reply is waited for and the 4 of silence that fail it
// (the budget is 1 s, so a stalled machine cannot reach either bound).
func TestLateRedisDecidesThroughTheServer(t *testing.T) {
	r := testredis.Start(t)
	p := testredis.NewHoldProxy(t, r.Addr())
	pol := countingPolicy(t, "redis://"+p.Addr()+"/0")
	origin, _, nodes := startFleet(t, pol, 1)
	login := func(i int) int {
		return do(t, "POST", "http://"+nodes[0].addr+"/login", "", "X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i)).status
	}
	// The demo origin answers a login without credentials 401: the
	// origin's answer, where on_store_error's is a 503.
	originAnswer := login(1)
	if originAnswer == 503 || origin.Hits()["/login"] != 1 {
		t.Fatalf("a login with Redis answering at once: got %d and %d at the origin, want the origin's answer", originAnswer, origin.Hits()["/login"])
	}

	p.Hold()
	before := p.Got()
	start := time.Now()
	status := make(chan int, 1)
	go func() { status <- login(2) }()
	waitFor(t, func() bool { return p.Got() > before }, 30*time.Second, "Redis' reply")
	waitFor(t, func() bool { return time.Since(start) >= nodecfg.Of(pol).Store.Timeout*6/5 }, 30*time.Second, "the budget to pass")
	p.Release()
	select {
	case st := <-status:
		if st != originAnswer {
			t.Errorf("a login whose Redis reply came after the budget: got %d, want the origin's %d (decided in Redis, not by on_store_error)", st, originAnswer)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hang guard: the late login never answered")
	}
	if n := origin.Hits()["/login"]; n != 2 {
		t.Errorf("the origin saw %d logins, want 2", n)
	}
}

// TestSlowRedisLinkDecidesThroughTheServer: a Redis whose every reply is
// late (a proxy adds 1, 3 and then 8 budgets to each) is a slow link, not a
// silent store: the node's logins are decided in Redis, as the docs
// promise for up to 20 budgets, not answered by on_store_error's 503
// (issue 25, section 3: with 50 ms on every reply and a 5 ms budget, 87%
// of logins got 503). The calls sent after the link slows past 4 budgets
// and before its first slow reply is read may fail (the store's new
// latency is not yet known): one login at a time, the first two of the
// step; none after them. Each late decision counts in
// edge_redis_late_replies_total.
func TestSlowRedisLinkDecidesThroughTheServer(t *testing.T) {
	r := testredis.Start(t)
	p := testredis.NewDelayProxy(t, r.Addr(), 0)
	// 25ms, not the default 5ms: the same budgets of delay, with room for
	// a race-instrumented node on two busy cores to read each reply within
	// twice the learnt latency (400ms at 8 budgets) and 20 budgets.
	const budget = 25 * time.Millisecond
	pol := loadPolicy(t, foundation, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url     = %q\n  timeout = %q\n}", "redis://"+p.Addr()+"/0", budget.String()))
	origin, _, nodes := startFleet(t, pol, 1)
	ip := 0
	login := func() int {
		ip++
		return do(t, "POST", "http://"+nodes[0].addr+"/login", "", "X-Forwarded-For", fmt.Sprintf("198.51.%d.%d", ip/250, ip%250+1)).status
	}
	originAnswer := login()
	if originAnswer == 503 || origin.Hits()["/login"] != 1 {
		t.Fatalf("a login with Redis answering at once: got %d and %d at the origin, want the origin's answer", originAnswer, origin.Hits()["/login"])
	}
	const logins = 12
	for _, delay := range []time.Duration{budget, 3 * budget, 8 * budget} {
		p.SetDelay(delay)
		refused := 0
		for i := range logins {
			switch st := login(); {
			case st == 503:
				refused++
				if i > 1 {
					t.Errorf("+%v on every reply: login %d got 503 (on_store_error), want the origin's %d", delay, i+1, originAnswer)
				}
			case st != originAnswer:
				t.Errorf("+%v on every reply: login %d got %d, want the origin's %d", delay, i+1, st, originAnswer)
			}
		}
		t.Logf("+%v on every reply: %d of %d logins answered by on_store_error", delay, refused, logins)
	}
	if n := gathered(t, nodes[0].reg, "edge_redis_late_replies_total"); n < logins {
		t.Errorf("edge_redis_late_replies_total = %v, want at least the %d logins decided at +8 budgets", n, logins)
	}
}

// BenchmarkSlowRedisLink is the fault trial of docs/deploying.md ("A slow
// link"): logins, 8 at a time, through a node whose Redis (at the default
// 5ms budget) answers every reply 0 to 120 ms late from the moment the
// benchmark starts (it had answered at once before), reporting the share
// answered by on_store_error (store-errors-%), that share among the second
// half of the logins, once the node has seen the link's new latency
// (steady-errors-%), and the share decided by a late reply (late-%). Run
// it with
//
//	go test -run '^$' -bench SlowRedisLink -benchtime 400x ./gateway/
func BenchmarkSlowRedisLink(b *testing.B) {
	for _, delay := range []time.Duration{0, 12 * time.Millisecond, 18 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond, 80 * time.Millisecond, 120 * time.Millisecond} {
		b.Run(fmt.Sprintf("plus_%dms", delay.Milliseconds()), func(b *testing.B) {
			r := testredis.Start(b)
			p := testredis.NewDelayProxy(b, r.Addr(), 0)
			pol := loadPolicy(b, foundation, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url = %q\n}", "redis://"+p.Addr()+"/0"))
			_, _, nodes := startFleet(b, pol, 1)
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
			// A node that has run with its Redis (the script loaded, its
			// connections open) when the link slows.
			for i := range 8 {
				do(b, "POST", "http://"+nodes[0].addr+"/login", "", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
			}
			p.SetDelay(delay)
			var next, refused, steady atomic.Int64
			lateBefore := gathered(b, nodes[0].reg, "edge_redis_late_replies_total")
			b.ResetTimer()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						req, _ := http.NewRequest("POST", "http://"+nodes[0].addr+"/login", nil)
						req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.%d.%d.%d", 18+i/62500, i/250%250, i%250))
						resp, err := c.Do(req)
						if err != nil {
							b.Errorf("login failed: %v", err)
							return
						}
						resp.Body.Close()
						if resp.StatusCode == 503 {
							refused.Add(1)
							if i > int64(b.N)/2 {
								steady.Add(1)
							}
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			late := gathered(b, nodes[0].reg, "edge_redis_late_replies_total") - lateBefore
			b.ReportMetric(100*float64(refused.Load())/float64(b.N), "store-errors-%")
			b.ReportMetric(100*late/float64(b.N), "late-%")
			b.ReportMetric(100*float64(steady.Load())/float64(b.N-b.N/2), "steady-errors-%")
		})
	}
}
