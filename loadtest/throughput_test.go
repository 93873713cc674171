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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
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
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"-scenario", "throughput", "-target", "http://127.0.0.1:1"}, tt.args...)
			code, stdout, stderr := runTool(t, args...)
			if code != exitError || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitError, tt.wantErr)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
		})
	}
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
	closed   sync.Once

	mu      sync.Mutex
	clients map[string]bool
}

var benchPrefix = netip.MustParsePrefix("198.18.0.0/15")

func startBenchServer(t *testing.T, method, uri string, closeAfter int64) *benchServer {
	t.Helper()
	s := &benchServer{t: t, method: method, uri: uri, closeAfter: closeAfter, clients: make(map[string]bool)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.srv = &fasthttp.Server{Handler: s.handle, IdleTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = s.srv.Shutdown()
		<-done
	})
	return s
}

func (s *benchServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *benchServer) handle(ctx *fasthttp.RequestCtx) {
	n := s.received.Add(1)
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := "http://" + ln.Addr().String()
	ln.Close()

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
