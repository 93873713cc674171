package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/internal/testnet"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		i    int
		want string
	}{
		{0, "198.18.0.0"},
		{1, "198.18.0.1"},
		{255, "198.18.0.255"},
		{256, "198.18.1.0"},
		{65535, "198.18.255.255"},
		{65536, "198.19.0.0"},
		{maxClients - 1, "198.19.255.255"},
	}
	for _, tt := range tests {
		if got := clientAddr(tt.i).String(); got != tt.want {
			t.Errorf("clientAddr(%d): got %s, want %s", tt.i, got, tt.want)
		}
	}
}

func TestClientAddrStrings(t *testing.T) {
	t.Parallel()
	bench := netip.MustParsePrefix("198.18.0.0/15")
	addrs := clientAddrStrings(maxClients)
	if len(addrs) != maxClients {
		t.Fatalf("got %d addresses, want %d", len(addrs), maxClients)
	}
	seen := make(map[string]bool, len(addrs))
	for i, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil || !bench.Contains(a) {
			t.Fatalf("address %d: got %q, want an address in %v", i, s, bench)
		}
		if seen[s] {
			t.Fatalf("address %d: %s repeats", i, s)
		}
		seen[s] = true
	}
	// Deterministic: the same k gives the same addresses, a prefix of
	// any larger k's.
	if got := clientAddrStrings(3); strings.Join(got, " ") != "198.18.0.0 198.18.0.1 198.18.0.2" {
		t.Errorf("clientAddrStrings(3): got %v", got)
	}
}

func TestValidMethodAndPath(t *testing.T) {
	t.Parallel()
	methods := []struct {
		m    string
		want bool
	}{
		{"GET", true}, {"POST", true}, {"PURGE", true}, {"M-SEARCH", true},
		{"", false}, {"GET /", false}, {"GÉT", false}, {"GET\r\n", false}, {strings.Repeat("A", 33), false},
	}
	for _, tt := range methods {
		if got := validMethod(tt.m); got != tt.want {
			t.Errorf("validMethod(%q): got %v, want %v", tt.m, got, tt.want)
		}
	}
	paths := []struct {
		p    string
		want bool
	}{
		{"/", true}, {"/api/bench", true}, {"/trace/warmup?x=1&y=%20", true},
		{"", false}, {"api/bench", false}, {"http://127.0.0.1/", false}, {"/a b", false},
		{"/a\r\nX-Evil: 1", false}, {"/a#frag", false}, {"/é", false}, {"/" + strings.Repeat("a", 4096), false},
	}
	for _, tt := range paths {
		if got := validPath(tt.p); got != tt.want {
			t.Errorf("validPath(%q): got %v, want %v", tt.p, got, tt.want)
		}
	}
}

func TestErrorKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"fasthttp timeout", fasthttp.ErrTimeout, errTimeout},
		{"dial timeout", fasthttp.ErrDialTimeout, errTimeout},
		{"deadline", fmt.Errorf("reading: %w", os.ErrDeadlineExceeded), errTimeout},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, errRefused},
		{"closed", fasthttp.ErrConnectionClosed, errClosed},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, errClosed},
		{"eof", io.EOF, errClosed},
		{"other", errors.New("cannot parse response"), errOther},
	}
	for _, tt := range tests {
		if got := errorKind(tt.err); got != tt.want {
			t.Errorf("%s: errorKind(%v): got %s, want %s", tt.name, tt.err, errKindNames[got], errKindNames[tt.want])
		}
	}
}

// fakeResult builds a loadResult with the given answers and one latency
// per answer, in µs.
func fakeResult(t *testing.T, base string, elapsed time.Duration, statuses map[int]int64, latencies []int64) *loadResult {
	t.Helper()
	r := &loadResult{base: base, elapsed: elapsed, statuses: statuses, hist: newLatencyHistogram(2 * time.Second), dials: 4}
	for _, us := range latencies {
		if err := r.hist.RecordValue(us); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// repeat returns n copies of v.
func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestThroughputReport(t *testing.T) {
	t.Parallel()
	h := throughputHeader{method: "GET", path: "/trace/warmup", connections: 4, clients: 100, warmup: time.Second, duration: 2 * time.Second}

	// 1000 answers in 2 s through the edge: 500/s; latencies 100µs ×980,
	// 1000µs ×19, 2000µs ×1 (HDR keeps values under 2048 exact).
	edge := fakeResult(t, "http://127.0.0.1:18080", 2*time.Second,
		map[int]int64{200: 900, 429: 50, 503: 10, 404: 30, 401: 10},
		append(append(repeat(100, 980), repeat(1000, 19)...), 2000))
	edge.errs[errTimeout] = 2
	edge.errs[errClosed] = 1
	edge.firstErr[errTimeout] = "timeout"
	edge.firstErr[errClosed] = "the server closed connection"
	// 2000 answers in 2 s direct: 1000/s; latencies 50µs ×980, 500µs ×20.
	origin := fakeResult(t, "http://127.0.0.1:19000", 2*time.Second,
		map[int]int64{200: 2000}, append(repeat(50, 980), repeat(500, 20)...))
	origin.capped = true

	var b strings.Builder
	if err := writeThroughputReport(&b, h, []*loadResult{edge, origin}); err != nil {
		t.Fatal(err)
	}
	want := `throughput: GET /trace/warmup, 4 connections, 100 client addresses, 2s measured per target after a 1s warm-up

              target                      compare
url           http://127.0.0.1:18080      http://127.0.0.1:19000
requests      1003                        2000
requests/s    500                         1000
elapsed       2s                          2s (-requests cap reached)
200           900                         2000
429           50                          0
503           10                          0
other         40 (401: 10, 404: 30)       0
errors        3 (timeout: 2, closed: 1)   0
p50           0.100ms                     0.050ms
p90           0.100ms                     0.050ms
p99           1.000ms                     0.500ms
p99.9         1.000ms                     0.500ms
max           2.000ms                     0.500ms
connections   4 opened                    4 opened

throughput ratio (target/compare): 0.50×
p99 ratio (target/compare): 2.00×

first timeout error from http://127.0.0.1:18080: timeout
first closed error from http://127.0.0.1:18080: the server closed connection

GET /trace/warmup, 4 connections, 100 client addresses, 2s measured per target after a 1s warm-up:

| target | requests | req/s | 200 | 429 | 503 | other | errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| http://127.0.0.1:18080 | 1003 | 500 | 900 | 50 | 10 | 40 | 3 | 0.100 | 0.100 | 1.000 | 1.000 | 2.000 |
| http://127.0.0.1:19000 | 2000 | 1000 | 2000 | 0 | 0 | 0 | 0 | 0.050 | 0.050 | 0.500 | 0.500 | 0.500 |
| target/compare |  | 0.50× |  |  |  |  |  | 2.00× | 2.00× | 2.00× | 2.00× | 4.00× |
`
	if got := b.String(); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}

	// One target: one column, no ratios.
	b.Reset()
	if err := writeThroughputReport(&b, h, []*loadResult{origin}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, bad := range []string{"compare", "ratio", "first"} {
		if strings.Contains(got, bad) {
			t.Errorf("single-target report mentions %q:\n%s", bad, got)
		}
	}
	if !strings.HasSuffix(got, "| http://127.0.0.1:19000 | 2000 | 1000 | 2000 | 0 | 0 | 0 | 0 | 0.050 | 0.050 | 0.500 | 0.500 | 0.500 |\n") {
		t.Errorf("single-target report does not end with the target's row:\n%s", got)
	}
}

func TestFmtRatio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b float64
		want string
	}{
		{1, 2, "0.50×"}, {3, 1, "3.00×"}, {1, 3, "0.33×"}, {0, 1, "0.00×"}, {1, 0, "n/a"},
	}
	for _, tt := range tests {
		if got := fmtRatio(tt.a, tt.b); got != tt.want {
			t.Errorf("fmtRatio(%v, %v): got %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestThroughputUsageErrors(t *testing.T) {
	t.Parallel()
	runUsageErrors(t, []string{"-scenario", "throughput", "-target", "http://127.0.0.1:1"}, []usageError{
		{"no connections", []string{"-connections", "0"}, "-connections must be in [1, 512]"},
		{"too many connections", []string{"-connections", "513"}, "-connections"},
		{"no clients", []string{"-clients", "0"}, "-clients must be in [1, 131072]"},
		{"too many clients", []string{"-clients", "131073"}, "-clients"},
		{"bad method", []string{"-method", "GET /x"}, "-method"},
		{"bad path", []string{"-path", "api"}, "-path"},
		{"path with newline", []string{"-path", "/a\nX-Evil: 1"}, "-path"},
		{"long warm-up", []string{"-warmup", "11s"}, "-warmup"},
		{"remote compare", []string{"-compare", "http://192.0.2.1:19000"}, `-compare "http://192.0.2.1:19000": host "192.0.2.1" is not a loopback address`},
		{"compare with path", []string{"-compare", "http://127.0.0.1:19000/x"}, "-compare"},
		{"huge duration", []string{"-duration", "11m"}, "-duration"},
		{"cap below connections", []string{"-requests", "10", "-connections", "8", "-compare", "http://127.0.0.1:1"}, "-requests 10 leaves 5 per target, fewer than -connections 8"},
	})
}

// benchServer is a fasthttp server on 127.0.0.1:0 that answers by client
// address, so a run sees every kind of outcome: of each 20 consecutive
// addresses, 2 get 429, 2 get 503, 1 gets 404, 1 has its connection closed
// without an answer, the rest 200. Once closeAfter requests have arrived
// (0: never), it stops listening and closes every connection it is asked
// on, so clients find nothing to reconnect to.
type benchServer struct {
	t          *testing.T
	method     string
	uri        string
	closeAfter int64

	ln       net.Listener
	srv      *fasthttp.Server
	received atomic.Int64
	accepted atomic.Int64 // connections accepted
	closed   sync.Once
	log      *arrivalLog // when not nil, every request is logged in it under name
	name     string
	node     *fakeNode // when not nil, every request is a rule decision of it

	mu      sync.Mutex
	clients map[string]bool
}

var benchPrefix = netip.MustParsePrefix("198.18.0.0/15")

func startBenchServer(t *testing.T, method, uri string, closeAfter int64) *benchServer {
	t.Helper()
	return startLoggedBenchServer(t, method, uri, closeAfter, nil, "")
}

// startLoggedBenchServer starts a benchServer that logs its requests in
// log under name.
func startLoggedBenchServer(t *testing.T, method, uri string, closeAfter int64, log *arrivalLog, name string) *benchServer {
	t.Helper()
	return serveBench(t, &benchServer{t: t, method: method, uri: uri, closeAfter: closeAfter, log: log, name: name})
}

// serveBench starts s, configured but not yet started, on a loopback
// port.
func serveBench(t *testing.T, s *benchServer) *benchServer {
	t.Helper()
	s.clients = make(map[string]bool)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = countingListener{Listener: ln, n: &s.accepted}
	s.srv = &fasthttp.Server{Handler: s.handle, IdleTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(s.ln)
	}()
	t.Cleanup(func() {
		_ = s.srv.Shutdown()
		<-done
	})
	return s
}

func (s *benchServer) url() string { return "http://" + s.ln.Addr().String() }

// countingListener counts the connections it accepts in n.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// arrivalLog records, across servers, the requests each received in
// arrival order, one segment per uninterrupted stretch of one server's
// requests. The tool measures one target at a time and awaits every
// answer before moving on, so each segment is one measured run, and
// requests of different runs cannot interleave.
type arrivalLog struct {
	mu   sync.Mutex
	segs []arrivalSegment
}

type arrivalSegment struct {
	server string
	n      int64
}

func (l *arrivalLog) add(server string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) == 0 || l.segs[len(l.segs)-1].server != server {
		l.segs = append(l.segs, arrivalSegment{server: server})
	}
	l.segs[len(l.segs)-1].n++
}

func (l *arrivalLog) segments() []arrivalSegment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.segs)
}

func (s *benchServer) handle(ctx *fasthttp.RequestCtx) {
	n := s.received.Add(1)
	if s.log != nil {
		s.log.add(s.name)
	}
	if s.node != nil {
		s.node.decide()
	}
	if s.closeAfter > 0 && n >= s.closeAfter {
		s.closed.Do(func() { _ = s.ln.Close() })
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(net.Conn) {}) // the server closes it on return
		return
	}
	if got := string(ctx.Method()); got != s.method {
		s.t.Errorf("method: got %s, want %s", got, s.method)
	}
	if got := string(ctx.RequestURI()); got != s.uri {
		s.t.Errorf("request URI: got %s, want %s", got, s.uri)
	}
	xff := string(ctx.Request.Header.Peek("X-Forwarded-For"))
	a, err := netip.ParseAddr(xff)
	if err != nil || !benchPrefix.Contains(a) {
		s.t.Errorf("X-Forwarded-For %q, want an address in %v", xff, benchPrefix)
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.clients[xff] = true
	s.mu.Unlock()

	b := a.As4()
	switch i := int(b[1]-18)<<16 | int(b[2])<<8 | int(b[3]); i % 20 {
	case 0, 1:
		ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	case 2, 3:
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	case 4:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	case 5:
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(net.Conn) {})
	default:
		ctx.SetBodyString("ok\n")
	}
}

func (s *benchServer) distinctClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// TestThroughputEndToEnd measures a one-second run from inside, and at the
// same time runs the tool in compare mode against two other servers: both
// in one test, since go test runs only GOMAXPROCS parallel tests at once.
func TestThroughputEndToEnd(t *testing.T) {
	t.Parallel()
	srv := startBenchServer(t, "POST", "/bench?x=1", 0)
	edge := startBenchServer(t, "GET", "/api/bench", 0)
	origin := startBenchServer(t, "GET", "/api/bench", 0)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { checkCompareRun(t, edge, origin) })

	tg, err := parseTarget(srv.url())
	if err != nil {
		t.Error(err)
		return
	}
	cfg := config{
		target:      tg,
		duration:    time.Second,
		requests:    maxRequests,
		timeout:     2 * time.Second,
		connections: 4,
		clients:     40,
		method:      "POST",
		path:        "/bench?x=1",
		warmup:      100 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(t.Context(), throughputBudget(cfg))
	defer cancel()
	start := time.Now()
	res, err := measure(ctx, cfg, tg, maxRequests)
	if err != nil {
		t.Error(err)
		return
	}
	took := time.Since(start)

	answered, failed := res.answered(), res.failed()
	var sum int64
	for _, n := range res.statuses {
		sum += n
	}
	if res.total() != sum+failed {
		t.Errorf("total %d, want statuses %d + errors %d", res.total(), sum, failed)
	}
	if got := res.hist.TotalCount(); got != answered {
		t.Errorf("histogram holds %d latencies, want one per answer: %d", got, answered)
	}
	if got := res.statuses[200] + res.statuses[429] + res.statuses[503] + res.otherStatuses(); got != answered {
		t.Errorf("200+429+503+other = %d, want %d", got, answered)
	}
	// Every outcome the server hands out shows up.
	for _, code := range []int{200, 429, 503, 404} {
		if res.statuses[code] == 0 {
			t.Errorf("no %d answers: %v", code, res.statuses)
		}
	}
	if res.errs[errClosed] == 0 || failed != res.errs[errClosed] {
		t.Errorf("errors %v, want only closed connections, at least one", res.errs)
	}
	// A closed connection is reopened, so more dials than connections.
	if res.dials <= int64(cfg.connections) {
		t.Errorf("dials: got %d, want more than %d", res.dials, cfg.connections)
	}
	// The server saw every request the run sent, warm-up included, which
	// is more than the measured ones.
	if got := srv.received.Load(); got != res.sent || got <= res.total() {
		t.Errorf("server received %d, run sent %d and measured %d; want sent = received > measured", got, res.sent, res.total())
	}
	if got := srv.distinctClients(); got != cfg.clients {
		t.Errorf("server saw %d client addresses, want %d", got, cfg.clients)
	}
	if res.elapsed < cfg.duration || res.elapsed > cfg.duration+cfg.timeout {
		t.Errorf("elapsed %v, want about %v", res.elapsed, cfg.duration)
	}
	if took < cfg.warmup+cfg.duration {
		t.Errorf("run took %v, shorter than warm-up plus duration", took)
	}
	if res.capped {
		t.Error("capped, want not")
	}
}

// checkCompareRun runs the tool against edge with origin to compare, half a
// second each, and checks the report. It runs on its own goroutine, so it
// reports with t.Error only.
func checkCompareRun(t *testing.T, edge, origin *benchServer) {
	code, stdout, stderr := runTool(t, "-scenario", "throughput", "-target", edge.url(), "-compare", origin.url(),
		"-duration", "500ms", "-warmup", "50ms", "-connections", "4", "-clients", "20")
	if code != exitOK {
		t.Errorf("compare run: exit %d, want 0\nstderr: %s\nstdout:\n%s", code, stderr, stdout)
		return
	}
	for _, re := range []string{
		`(?m)^throughput ratio \(target/compare\): \d+\.\d\d×$`,
		`(?m)^p99 ratio \(target/compare\): (\d+\.\d\d×|n/a)$`,
		`(?m)^url +` + regexp.QuoteMeta(edge.url()) + ` +` + regexp.QuoteMeta(origin.url()) + `$`,
		`(?m)^\| ` + regexp.QuoteMeta(edge.url()) + ` \| \d+ \| \d+ \|`,
		`(?m)^\| ` + regexp.QuoteMeta(origin.url()) + ` \| \d+ \| \d+ \|`,
		`(?m)^\| target/compare \|  \| \d+\.\d\d× \|`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("report does not match %s:\n%s", re, stdout)
		}
	}
	if edge.received.Load() == 0 || origin.received.Load() == 0 {
		t.Errorf("requests: edge %d, origin %d; want both loaded", edge.received.Load(), origin.received.Load())
	}
}

func TestThroughputRequestsCap(t *testing.T) {
	t.Parallel()
	srv := startBenchServer(t, "GET", "/api/bench", 0)
	// A 10 s run capped at 200 requests ends as soon as they are spent.
	code, stdout, stderr := runTool(t, "-scenario", "throughput", "-target", srv.url(),
		"-duration", "10s", "-warmup", "0s", "-connections", "4", "-requests", "200")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstderr: %s\nstdout:\n%s", code, stderr, stdout)
	}
	if got := srv.received.Load(); got != 200 {
		t.Errorf("server received %d requests, want the cap, 200", got)
	}
	if !strings.Contains(stdout, "(-requests cap reached)") {
		t.Errorf("report does not say the cap ended the run:\n%s", stdout)
	}
	// 4 requests opened the connections; the rest were measured.
	if !regexp.MustCompile(`(?m)^requests +196$`).MatchString(stdout) {
		t.Errorf("report does not count 196 measured requests:\n%s", stdout)
	}
}

func TestThroughputConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := startBenchServer(t, "GET", "/api/bench", 0)
	free := "http://" + testnet.DeadAddr(t)

	tests := []struct {
		name string
		args []string
	}{
		{"target", []string{"-target", free}},
		// The comparison target is dialled before the first run starts.
		{"compare", []string{"-target", srv.url(), "-compare", free}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-scenario", "throughput", "-duration", "10s"}, tt.args...)
			code, stdout, stderr := runTool(t, args...)
			if code != exitError || !strings.Contains(stderr, "connecting to "+free) || !strings.Contains(stderr, "connection refused") {
				t.Errorf("exit %d, stderr %q; want exit %d and a refused connection to %s", code, stderr, exitError, free)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
		})
	}
	if got := srv.received.Load(); got != 0 {
		t.Errorf("the target got %d requests although the comparison target was down", got)
	}
}

func TestThroughputTargetGoesAway(t *testing.T) {
	t.Parallel()
	// After 300 requests the server stops listening and drops every
	// connection: reconnecting is refused and voids the run.
	srv := startBenchServer(t, "GET", "/api/bench", 300)
	code, stdout, stderr := runTool(t, "-scenario", "throughput", "-target", srv.url(),
		"-duration", "10s", "-warmup", "0s", "-connections", "4")
	if code != exitError || !strings.Contains(stderr, "connection refused mid-run") {
		t.Errorf("exit %d, stderr %q; want exit %d and a refused connection mid-run", code, stderr, exitError)
	}
	if stdout != "" {
		t.Errorf("stdout: got %q, want nothing", stdout)
	}
}

// TestLatencyHistogramMergeKeepsCount guards the assumption measure makes
// when merging the connections' histograms: same geometry, nothing dropped,
// even at the ceiling.
func TestLatencyHistogramMergeKeepsCount(t *testing.T) {
	t.Parallel()
	timeout := 2 * time.Second
	a, b := newLatencyHistogram(timeout), newLatencyHistogram(timeout)
	for _, v := range []int64{1, 999, latencyCeiling(timeout)} {
		if err := a.RecordValue(v); err != nil {
			t.Fatalf("recording %d: %v", v, err)
		}
	}
	if err := b.RecordValue(1234); err != nil {
		t.Fatal(err)
	}
	total := newLatencyHistogram(timeout)
	for _, h := range []*hdrhistogram.Histogram{a, b} {
		if dropped := total.Merge(h); dropped != 0 {
			t.Errorf("merge dropped %d values", dropped)
		}
	}
	if got := total.TotalCount(); got != 4 {
		t.Errorf("merged count: got %d, want 4", got)
	}
}

func TestParseLevels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []int
		wantErr string
	}{
		{"one", "32", []int{32}, ""},
		{"bounds", "1,512", []int{1, 512}, ""},
		{"list", "32,128,256", []int{32, 128, 256}, ""},
		{"order kept", "256,32", []int{256, 32}, ""},
		{"spaces", " 32 , 128 ", []int{32, 128}, ""},
		{"ten", "1,2,3,4,5,6,7,8,9,10", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, ""},
		{"empty", "", nil, "-connections is empty"},
		{"blank", " ", nil, "-connections is empty"},
		{"empty element", "32,,64", nil, `-connections "32,,64": element 2 is empty`},
		{"trailing comma", "32,", nil, `-connections "32,": element 2 is empty`},
		{"zero", "0", nil, "-connections must be in [1, 512], got 0"},
		{"zero in list", "32,0", nil, `-connections must be in [1, 512], got 0 in "32,0"`},
		{"negative", "-4", nil, "-connections must be in [1, 512], got -4"},
		{"over the cap", "513", nil, "-connections must be in [1, 512], got 513"},
		{"over the cap in list", "32,513", nil, `got 513 in "32,513"`},
		{"not a number", "32,many", nil, `"many" is not a whole number`},
		{"fraction", "1.5", nil, `"1.5" is not a whole number`},
		{"other separator", "32;64", nil, `"32;64" is not a whole number`},
		{"huge", "99999999999999999999", nil, `"99999999999999999999" is not a whole number in [1, 512]`},
		{"duplicate", "32,64,32", nil, `-connections "32,64,32": 32 is listed twice`},
		{"duplicate spelled apart", "32, 032", nil, "32 is listed twice"},
		{"too many levels", "1,2,3,4,5,6,7,8,9,10,11", nil, "at most 10 levels, got 11"},
	}
	for _, tt := range tests {
		got, err := parseLevels(tt.in)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: parseLevels(%q): got %v, %v; want error %q", tt.name, tt.in, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("%s: parseLevels(%q): got %v, %v; want %v", tt.name, tt.in, got, err, tt.want)
		}
	}
}

func TestThroughputLevelsUsageErrors(t *testing.T) {
	t.Parallel()
	runUsageErrors(t, []string{"-target", "http://127.0.0.1:1"}, []usageError{
		{"empty element", []string{"-scenario", "throughput", "-connections", "32,,64"}, "element 2 is empty"},
		{"level over the cap", []string{"-scenario", "throughput", "-connections", "32,600"}, "-connections must be in [1, 512], got 600"},
		{"duplicate level", []string{"-scenario", "throughput", "-connections", "8,8"}, "8 is listed twice"},
		{"no repetition", []string{"-scenario", "throughput", "-repeat", "0"}, "-repeat must be in [1, 10], got 0"},
		{"too many repetitions", []string{"-scenario", "throughput", "-repeat", "11"}, "-repeat must be in [1, 10], got 11"},
		// The cap is per level and repetition: the highest level must fit.
		{"cap below the highest level", []string{"-scenario", "throughput", "-requests", "100", "-connections", "8,64", "-compare", "http://127.0.0.1:1"},
			"-requests 100 leaves 50 per target, fewer than -connections 64"},
		// 3 × 3 × 2 × 610s of load is over the hour.
		{"load over an hour", []string{"-scenario", "throughput", "-duration", "10m", "-warmup", "10s", "-connections", "1,2,3", "-repeat", "3", "-compare", "http://127.0.0.1:1"},
			"3 levels × 3 repetitions × 2 targets × (-warmup 10s + -duration 10m0s) is 3h3m0s of load, over 1h0m0s"},
		{"list for cgnat-crowd", []string{"-scenario", "cgnat-crowd", "-connections", "8,16"}, "for -scenario throughput only"},
		{"repeat for seed-trace", []string{"-scenario", "seed-trace", "-repeat", "2"}, "for -scenario throughput only"},
	})
}

func TestThroughputBudget(t *testing.T) {
	t.Parallel()
	cfg := config{timeout: time.Second, warmup: time.Second, duration: 10 * time.Second}
	per := 2*time.Second + time.Second + 10*time.Second + time.Second + time.Second // 15s
	tests := []struct {
		name    string
		levels  []int
		repeat  int
		compare bool
		want    time.Duration
	}{
		{"one run", []int{32}, 1, false, per},
		{"compare", []int{32}, 1, true, 2 * per},
		{"levels and repetitions", []int{32, 128, 256}, 4, true, 3 * 4 * 2 * per},
		{"zero config is one run", nil, 0, false, per},
	}
	for _, tt := range tests {
		c := cfg
		c.levels, c.repeat = tt.levels, tt.repeat
		if tt.compare {
			c.compare = target{addr: "127.0.0.1:1", base: "http://127.0.0.1:1"}
		}
		if got := throughputBudget(c); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{1, 3}, 2},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7, 7, 1}, 7},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.xs)
		if got := median(in); got != tt.want {
			t.Errorf("median(%v): got %v, want %v", tt.xs, got, tt.want)
		}
		if !slices.Equal(in, tt.xs) {
			t.Errorf("median(%v) reordered its argument to %v", tt.xs, in)
		}
	}
}

func TestNon2xx(t *testing.T) {
	t.Parallel()
	r := &loadResult{statuses: map[int]int64{200: 5, 204: 1, 299: 1, 301: 2, 429: 3, 503: 1, 0: 1}}
	r.errs[errTimeout] = 4 // no answer: an error, not a non-2xx answer
	if got := r.non2xx(); got != 7 {
		t.Errorf("non2xx: got %d, want 7 (301 ×2, 429 ×3, 503, status 0)", got)
	}
}

func TestPeaks(t *testing.T) {
	t.Parallel()
	lv := func(connections int, rates ...float64) levelSummary {
		s := levelSummary{connections: connections}
		for i, r := range rates {
			s.targets = append(s.targets, targetSummary{base: targetLabels[i], rate: r})
		}
		return s
	}
	tests := []struct {
		name   string
		levels []levelSummary
		want   []throughputPeak
	}{
		{"different levels", []levelSummary{lv(4, 100, 2000), lv(64, 1000, 1700)},
			[]throughputPeak{{"target", 1000, 64}, {"compare", 2000, 4}}},
		// Among equal rates, the first level listed, whatever its size.
		{"tie", []levelSummary{lv(64, 500), lv(4, 500), lv(16, 400)}, []throughputPeak{{"target", 500, 64}}},
		{"zero rates still name a level", []levelSummary{lv(8, 0), lv(16, 0)}, []throughputPeak{{"target", 0, 8}}},
	}
	for _, tt := range tests {
		if got := peaks(tt.levels); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// rateResult builds a one-second loadResult: ok answers of 200 and n429 of
// 429, errs timeouts, every latency lat µs (under 2048, where HDR keeps
// values exact).
func rateResult(t *testing.T, base string, ok, n429, errs, lat int64) *loadResult {
	t.Helper()
	r := fakeResult(t, base, time.Second, map[int]int64{200: ok, 429: n429}, repeat(lat, 10))
	r.errs[errTimeout] = errs
	return r
}

func TestThroughputSummary(t *testing.T) {
	t.Parallel()
	const edge, origin = "http://127.0.0.1:18080", "http://127.0.0.1:19000"
	capped := rateResult(t, origin, 1800, 0, 0, 500)
	capped.capped = true
	// Level 4 first: the target (latency-bound) is slow there, the
	// comparison target at its best; at 64 the target peaks and the
	// comparison target has fallen back.
	levels := []levelResults{
		{connections: 4, runs: [][]*loadResult{
			{rateResult(t, edge, 100, 0, 0, 1000), rateResult(t, origin, 2000, 0, 0, 50)},
			{rateResult(t, edge, 300, 0, 0, 1200), rateResult(t, origin, 1900, 0, 0, 60)},
			{rateResult(t, edge, 200, 0, 0, 1100), rateResult(t, origin, 2100, 0, 0, 40)},
		}},
		{connections: 64, runs: [][]*loadResult{
			{rateResult(t, edge, 900, 0, 0, 1500), capped},
			// 1095 + 5 answers: 1100/s; the 429s and timeouts are summed
			// into the summary, whatever the median.
			{rateResult(t, edge, 1095, 5, 2, 1600), rateResult(t, origin, 1700, 0, 0, 600)},
			{rateResult(t, edge, 1000, 0, 0, 1400), rateResult(t, origin, 1600, 0, 0, 400)},
		}},
	}
	sum := summarize(levels)
	if got := sum[1].targets[0]; got.rate != 1000 || got.p50 != 1500 || got.p99 != 1500 || got.non2xx != 5 || got.errors != 2 ||
		!slices.Equal(got.rates, []float64{900, 1100, 1000}) {
		t.Errorf("target at 64: got %+v, want rate 1000 (900, 1100, 1000), p50 = p99 = 1500µs, non-2xx 5, errors 2", got)
	}

	h := summaryHeader{method: "GET", path: "/api/bench", clients: 100, warmup: 100 * time.Millisecond, duration: time.Second,
		levels: 2, repetitions: 3, bases: []string{edge, origin}}
	var b strings.Builder
	if err := writeThroughputSummary(&b, h, sum); err != nil {
		t.Fatal(err)
	}
	want := `summary: GET /api/bench, 100 client addresses, 2 levels × 3 repetitions, 1s measured per target per level per repetition after a 100ms warm-up
target:  http://127.0.0.1:18080
compare: http://127.0.0.1:19000

connections                    req/s   each repetition    p50       p99       non-2xx   errors
4             target           200     100, 300, 200      1.100ms   1.100ms   0         0
              compare          2000    2000, 1900, 2100   0.050ms   0.050ms   0         0
              target/compare   0.10×                      22.00×    22.00×
64            target           1000    900, 1100, 1000    1.500ms   1.500ms   5         2
              compare          1700    1800, 1700, 1600   0.500ms   0.500ms   0         0
              target/compare   0.59×                      3.00×     3.00×

peak: target 1000 req/s at 64 connections, compare 2000 req/s at 4 connections; peak ratio (target/compare): 0.50×
target peaked at the highest level measured, 64 connections: its capacity may be higher (add a higher level)

req/s: median over the repetitions; p50, p99: medians of the repetitions' percentiles; non-2xx (answers outside 200-299) and errors (no answer): summed over the repetitions.
the -requests cap ended runs early (their rates cover less than -duration): compare at 64 connections: 1 of 3

GET /api/bench, 100 client addresses, 2 levels × 3 repetitions, 1s measured per target per level per repetition after a 100ms warm-up; medians over the repetitions:

| connections | target | req/s | each repetition | p50 ms | p99 ms | non-2xx | errors |
|---:|---|---:|---|---:|---:|---:|---:|
| 4 | http://127.0.0.1:18080 | 200 | 100, 300, 200 | 1.100 | 1.100 | 0 | 0 |
| 4 | http://127.0.0.1:19000 | 2000 | 2000, 1900, 2100 | 0.050 | 0.050 | 0 | 0 |
| 4 | target/compare | 0.10× |  | 22.00× | 22.00× |  |  |
| 64 | http://127.0.0.1:18080 | 1000 | 900, 1100, 1000 | 1.500 | 1.500 | 5 | 2 |
| 64 | http://127.0.0.1:19000 | 1700 | 1800, 1700, 1600 | 0.500 | 0.500 | 0 | 0 |
| 64 | target/compare | 0.59× |  | 3.00× | 3.00× |  |  |

| peak | req/s | connections |
|---|---:|---:|
| http://127.0.0.1:18080 | 1000 | 64 |
| http://127.0.0.1:19000 | 2000 | 4 |
| target/compare | 0.50× |  |
`
	if got := b.String(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}

	// One target, two repetitions: medians of two are their mean; no
	// ratios.
	one := summarize([]levelResults{
		{connections: 8, runs: [][]*loadResult{{rateResult(t, edge, 100, 0, 0, 1000)}, {rateResult(t, edge, 201, 0, 0, 1001)}}},
		{connections: 2, runs: [][]*loadResult{{rateResult(t, edge, 50, 0, 0, 400)}, {rateResult(t, edge, 60, 0, 0, 400)}}},
	})
	b.Reset()
	h.repetitions, h.bases = 2, []string{edge}
	if err := writeThroughputSummary(&b, h, one); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, line := range []string{
		"8             target   150     100, 201          1.000ms   1.000ms   0         0",
		"peak: target 150 req/s at 8 connections",
		"target peaked at the highest level measured, 8 connections: its capacity may be higher (add a higher level)",
		"| 8 | http://127.0.0.1:18080 | 150 | 100, 201 | 1.000 | 1.000 | 0 | 0 |", // (1000+1001)/2 = 1000.5µs
		"| http://127.0.0.1:18080 | 150 | 8 |",
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("one-target summary lacks the line %q:\n%s", line, got)
		}
	}
	for _, bad := range []string{"compare", "ratio", "-requests cap"} {
		if strings.Contains(got, bad) {
			t.Errorf("one-target summary mentions %q:\n%s", bad, got)
		}
	}
}

// atoi parses a number the report printed; the regular expressions that
// found it admit digits only.
func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestThroughputLevelsEndToEnd runs the tool at 2 levels × 2 repetitions
// against two servers that log which of them each request reached, in
// arrival order, and checks that the runs were interleaved as promised,
// that every run's report agrees with the servers' counts, and that the
// summary is built from those reports.
func TestThroughputLevelsEndToEnd(t *testing.T) {
	t.Parallel()
	var log arrivalLog
	edge := startLoggedBenchServer(t, "GET", "/api/bench", 0, &log, "edge")
	origin := startLoggedBenchServer(t, "GET", "/api/bench", 0, &log, "origin")
	// At most 5 connections: each run opens connection i with client
	// address i, and benchServer drops the sixth's request.
	levels := []int64{2, 5}
	const reps = 2
	// No warm-up, so every request of a run but the one opening each
	// connection is measured, and the servers' counts can be compared
	// with the reports exactly.
	start := time.Now()
	code, stdout, stderr := runTool(t, "-scenario", "throughput", "-target", edge.url(), "-compare", origin.url(),
		"-connections", "2,5", "-repeat", "2", "-duration", "150ms", "-warmup", "0s", "-clients", "20")
	took := time.Since(start)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstderr: %s\nstdout:\n%s", code, stderr, stdout)
	}
	if took < 2*reps*time.Duration(len(levels))*150*time.Millisecond {
		t.Errorf("run took %v, less than 8 runs of 150ms one after the other", took)
	}

	// The runs' reports, in order: repetition 1 at 2 then 6 connections,
	// repetition 2 likewise.
	title := regexp.MustCompile(`(?m)^throughput, repetition (\d) of 2, level (\d) of 2: GET /api/bench, (\d+) connections, 20 client addresses, 150ms measured per target after a 0s warm-up$`)
	summaryAt := strings.Index(stdout, "\nsummary: ")
	if summaryAt < 0 {
		t.Fatalf("no summary:\n%s", stdout)
	}
	heads := title.FindAllStringSubmatchIndex(stdout, -1)
	if len(heads) != reps*len(levels) {
		t.Fatalf("got %d run reports, want %d:\n%s", len(heads), reps*len(levels), stdout)
	}
	type run struct {
		requests, ok, errors, dials [2]int64 // target, compare
		rate                        [2]string
	}
	runs := make([]run, len(heads))
	row := func(block, re string) []string {
		m := regexp.MustCompile(`(?m)^` + re + `$`).FindStringSubmatch(block)
		if m == nil {
			t.Fatalf("run report lacks %s:\n%s", re, block)
		}
		return m[1:]
	}
	for i, hd := range heads {
		end := summaryAt
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		block := stdout[hd[0]:end]
		rep, level, conns := stdout[hd[2]:hd[3]], stdout[hd[4]:hd[5]], atoi(t, stdout[hd[6]:hd[7]])
		if want := strconv.Itoa(i/len(levels) + 1); rep != want {
			t.Errorf("report %d: repetition %s, want %s", i, rep, want)
		}
		if want := strconv.Itoa(i%len(levels) + 1); level != want || conns != levels[i%len(levels)] {
			t.Errorf("report %d: level %s at %d connections, want level %s at %d", i, level, conns, want, levels[i%len(levels)])
		}
		if strings.Contains(block, "| target |") {
			t.Errorf("report %d has a Markdown table; only the summary should:\n%s", i, block)
		}
		r := &runs[i]
		for k, v := range row(block, `requests +(\d+) +(\d+)`) {
			r.requests[k] = atoi(t, v)
		}
		copy(r.rate[:], row(block, `requests/s +(\d+) +(\d+)`))
		for k, v := range row(block, `200 +(\d+) +(\d+)`) {
			r.ok[k] = atoi(t, v)
		}
		for k, v := range row(block, `errors +(\d+)(?: \([^)]*\))? +(\d+)(?: \([^)]*\))?`) {
			r.errors[k] = atoi(t, v)
		}
		for k, v := range row(block, `connections +(\d+) opened +(\d+) opened`) {
			r.dials[k] = atoi(t, v)
		}
	}

	// Interleaved: edge, origin, edge, origin, …, one stretch of requests
	// per run, each as many as the run measured plus one per connection
	// (the request that opened it).
	segs := log.segments()
	if len(segs) != 2*len(runs) {
		t.Fatalf("the servers saw %d stretches of requests, want %d (edge and origin alternating): %v", len(segs), 2*len(runs), segs)
	}
	var accepted [2]int64
	for i, r := range runs {
		conns := levels[i%len(levels)]
		for k, name := range []string{"edge", "origin"} {
			seg := segs[2*i+k]
			if seg.server != name || seg.n != r.requests[k]+conns {
				t.Errorf("run %d, %s: the servers saw %d requests at %s, want %s and %d measured + %d opening",
					i, name, seg.n, seg.server, name, r.requests[k], conns)
			}
			accepted[k] += r.dials[k]
		}
	}
	// Every connection the reports count as opened reached the server,
	// plus the one each target is probed with before the first run.
	for k, s := range []*benchServer{edge, origin} {
		if got := s.accepted.Load(); got != accepted[k]+1 {
			t.Errorf("target %d: server accepted %d connections, want the reports' %d + 1 probe", k, got, accepted[k])
		}
	}

	// The summary: per level, each repetition's figure as its report
	// printed it, a median between them, and the sums of non-2xx and
	// errors.
	summary := stdout[summaryAt+1:]
	medians := make([][2]int64, len(levels))
	for l, conns := range levels {
		for k, label := range []string{"target", "compare"} {
			// The level's number opens its first row only.
			lead := ` +`
			if k == 0 {
				lead = `(\d+) +`
			}
			m := regexp.MustCompile(`(?m)^`+lead+label+` +(\d+) +(\d+), (\d+) +\d+\.\d{3}ms +\d+\.\d{3}ms +(\d+) +(\d+)$`).FindAllStringSubmatch(summary, -1)
			if len(m) != len(levels) {
				t.Fatalf("summary: %d %s rows, want %d:\n%s", len(m), label, len(levels), summary)
			}
			got := m[l]
			if k == 0 {
				if atoi(t, got[1]) != conns {
					t.Errorf("summary: row %d is at %s connections, want %d", l, got[1], conns)
				}
				got = got[1:]
			}
			r1, r2 := runs[l], runs[len(levels)+l]
			if got[2] != r1.rate[k] || got[3] != r2.rate[k] {
				t.Errorf("summary, %d connections, %s: repetitions %s, %s; want the reports' %s, %s", conns, label, got[2], got[3], r1.rate[k], r2.rate[k])
			}
			// The median of two is their mean, computed before rounding:
			// within 1 of the mean of the rounded figures.
			med, a, b := atoi(t, got[1]), atoi(t, got[2]), atoi(t, got[3])
			if 2*med < a+b-2 || 2*med > a+b+2 {
				t.Errorf("summary, %d connections, %s: median %d, want about (%d + %d) / 2", conns, label, med, a, b)
			}
			medians[l][k] = med
			var non2xx, errs int64
			for _, r := range []run{r1, r2} {
				non2xx += r.requests[k] - r.errors[k] - r.ok[k] // the servers answer only 200 in 2xx
				errs += r.errors[k]
			}
			if atoi(t, got[4]) != non2xx || atoi(t, got[5]) != errs {
				t.Errorf("summary, %d connections, %s: non-2xx %s, errors %s; want the reports' sums %d and %d", conns, label, got[4], got[5], non2xx, errs)
			}
			if errs == 0 || non2xx == 0 {
				t.Errorf("summary, %d connections, %s: non-2xx %d, errors %d; the servers hand out both", conns, label, non2xx, errs)
			}
		}
	}
	if n := len(regexp.MustCompile(`(?m)^ +target/compare +\d+\.\d\d× +\d+\.\d\d× +\d+\.\d\d×$`).FindAllString(summary, -1)); n != len(levels) {
		t.Errorf("summary: %d ratio rows, want %d:\n%s", n, len(levels), summary)
	}

	// The peak of each target is its highest median, at its level.
	m := regexp.MustCompile(`(?m)^peak: target (\d+) req/s at (\d+) connections, compare (\d+) req/s at (\d+) connections; peak ratio \(target/compare\): (\d+\.\d\d)×$`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("summary has no peak line:\n%s", summary)
	}
	for k := range 2 {
		best := 0
		for l := range levels {
			if medians[l][k] > medians[best][k] {
				best = l
			}
		}
		if atoi(t, m[1+2*k]) != medians[best][k] || atoi(t, m[2+2*k]) != levels[best] {
			t.Errorf("peak %d: %s req/s at %s connections, want %d at %d", k, m[1+2*k], m[2+2*k], medians[best][k], levels[best])
		}
	}

	// And the same as Markdown: a row per level and target, a ratio row
	// per level, and the peaks.
	for _, re := range []string{
		`(?m)^\| connections \| target \| req/s \| each repetition \| p50 ms \| p99 ms \| non-2xx \| errors \|$`,
		`(?m)^\| 2 \| ` + regexp.QuoteMeta(edge.url()) + ` \| \d+ \| \d+, \d+ \| \d+\.\d{3} \| \d+\.\d{3} \| \d+ \| \d+ \|$`,
		`(?m)^\| 5 \| ` + regexp.QuoteMeta(origin.url()) + ` \| \d+ \| \d+, \d+ \| \d+\.\d{3} \| \d+\.\d{3} \| \d+ \| \d+ \|$`,
		`(?m)^\| 5 \| target/compare \| \d+\.\d\d× \|  \|`,
		`(?m)^\| ` + regexp.QuoteMeta(edge.url()) + ` \| ` + m[1] + ` \| ` + m[2] + ` \|$`,
		`(?m)^\| ` + regexp.QuoteMeta(origin.url()) + ` \| ` + m[3] + ` \| ` + m[4] + ` \|$`,
		`(?m)^\| target/compare \| ` + regexp.QuoteMeta(m[5]) + `× \|  \|$`,
	} {
		if !regexp.MustCompile(re).MatchString(summary) {
			t.Errorf("summary does not match %s:\n%s", re, summary)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", stdout)
	}
}

// usageError is a command line the tool must refuse, with the message.
type usageError struct {
	name    string
	args    []string
	wantErr string
}

// runUsageErrors runs the tool on prefix followed by each case's args and
// checks that it exits with a usage error naming the problem, and prints
// nothing on stdout. Nothing listens on port 1: the cases must fail before
// dialling.
func runUsageErrors(t *testing.T, prefix []string, tests []usageError) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTool(t, append(slices.Clone(prefix), tt.args...)...)
			if code != exitError || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitError, tt.wantErr)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
		})
	}
}
