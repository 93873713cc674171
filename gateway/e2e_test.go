package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/internal/testnet"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// fakeClock is a settable clock for scripting time through the handler.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// node is an edge node and its demo origin on loopback, for end-to-end
// tests through real sockets.
type node struct {
	srv    *Server
	origin *demo.Origin
	reg    *prometheus.Registry
	clock  *fakeClock
	addr   string // the edge's public HOST:PORT
	admin  string
	oaddr  string // the demo origin's HOST:PORT
}

func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// loadPolicy loads a repo file, with optional textual replacements applied
// to its source first.
func loadPolicy(t testing.TB, rel string, replace ...string) *rules.Policy {
	t.Helper()
	path := filepath.Join(repoRoot(t), rel)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s does not contain %q", rel, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	p, diags := builtin.Load(path, []byte(s))
	if diags.HasErrors() {
		t.Fatalf("loading %s: %s", rel, diags.Error())
	}
	return p
}

type nodeOptions struct {
	dryRun     bool
	clock      *fakeClock
	logs       io.Writer   // JSON logs at info level, when set
	health     Health      // the store's health for /readyz, when set
	store      rules.Store // the counter store, when set (the test closes it); a 10000-key memstore otherwise
	adminToken string      // Options.AdminToken
	// secret and prevSecret are Options.KeySecret and
	// PreviousKeySecret; formats, when set, the engine's key formats.
	secret, prevSecret []byte
	formats            *rules.KeyFormats
	// wrap, when set, wraps the public listener Serve is given.
	wrap func(net.Listener) net.Listener
	// writeTimeout, when set, is the public listener's write timeout
	// (Server.writeTimeout) instead of writeTimeout's 10 s.
	writeTimeout time.Duration
	// origin, when set, wraps the demo origin's handler: the upstream
	// serves what it returns (an origin that reads requests another way),
	// the demo origin still counting what reaches it.
	origin func(fasthttp.RequestHandler) fasthttp.RequestHandler
}

func startNode(t testing.TB, p *rules.Policy, o nodeOptions) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	n := &node{origin: demo.New(), reg: prometheus.NewRegistry(), clock: o.clock}
	oln := listen(t)
	n.oaddr = oln.Addr().String()
	if o.origin != nil {
		srv := &fasthttp.Server{Handler: o.origin(n.origin.Handler)}
		wg.Add(2)
		go func() { defer wg.Done(); _ = srv.Serve(oln) }()
		go func() { defer wg.Done(); <-ctx.Done(); _ = srv.Shutdown() }()
	} else {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.origin.Serve(ctx, oln) }()
	}

	st := o.store
	if st == nil {
		ms, err := memstore.New(memstore.Options{MaxKeys: 10000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ms.Close() })
		st = ms
	}
	var err error
	opts := Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://" + n.oaddr, Registry: n.reg, DryRun: o.dryRun}
	if o.clock != nil {
		opts.Clock = o.clock
	}
	if o.logs != nil {
		opts.Logger = slog.New(slog.NewJSONHandler(o.logs, nil))
	}
	opts.Health = o.health
	opts.AdminToken = o.adminToken
	opts.KeySecret, opts.PreviousKeySecret = o.secret, o.prevSecret
	n.srv, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if o.writeTimeout > 0 {
		n.srv.writeTimeout = o.writeTimeout
	}
	if o.formats != nil {
		n.srv.Engine().SetKeyFormats(*o.formats)
	}
	ln, aln := listen(t), listen(t)
	n.addr, n.admin = ln.Addr().String(), aln.Addr().String()
	wg.Add(2)
	if o.wrap != nil {
		ln = o.wrap(ln)
	}
	go func() { defer wg.Done(); _ = n.srv.Serve(ctx, ln) }()
	go func() { defer wg.Done(); _ = n.srv.ServeAdmin(ctx, aln) }()
	return n
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// client is a plain net/http client that never follows redirects and keeps
// connections alive.
var client = &http.Client{Timeout: 10 * time.Second}

type reply struct {
	status int
	header http.Header
	body   string
}

func do(t testing.TB, method, url string, body string, header ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// raw sends exactly the request bytes given on a new connection and
// returns the whole raw response (the server closes: Connection: close).
func raw(t testing.TB, addr, request string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return rawOn(t, c, request)
}

// rawOn is raw over c, a new connection (plain or TLS), which it closes.
func rawOn(t testing.TB, c net.Conn, request string) string {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil && len(b) == 0 {
		t.Fatal(err)
	}
	return string(b)
}

func rawStatus(t testing.TB, resp string) int {
	t.Helper()
	r, err := http.ReadResponse(bufio.NewReader(strings.NewReader(resp)), nil)
	if err != nil {
		t.Fatalf("reading %q: %v", resp, err)
	}
	return r.StatusCode
}

var dateLine = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r\n`)

func (n *node) hits(t testing.TB) map[string]int64 {
	t.Helper()
	var h map[string]int64
	r := do(t, "GET", "http://"+n.oaddr+"/__origin/hits", "")
	if err := json.Unmarshal([]byte(r.body), &h); err != nil {
		t.Fatalf("hits %q: %v", r.body, err)
	}
	return h
}

func (n *node) last(t testing.TB) demo.Request {
	t.Helper()
	var l demo.Request
	r := do(t, "GET", "http://"+n.oaddr+"/__origin/last", "")
	if err := json.Unmarshal([]byte(r.body), &l); err != nil {
		t.Fatalf("last %q: %v", r.body, err)
	}
	return l
}

func (n *node) bodyParses() int { return int(testutil.ToFloat64(n.srv.m.bodyParses)) }

func (n *node) decisions(rule, decision string) int {
	return int(testutil.ToFloat64(n.srv.m.decisions.WithLabelValues(rule, decision)))
}

const foundation = "testdata/fixtures/policies/foundation.hcl"

func TestLoginFloodGetsFivePassesThenBare429s(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	var statuses []int
	var bare []string
	for range 9 {
		resp := raw(t, n.addr, "POST /login HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/json\r\nContent-Length: 40\r\nConnection: close\r\n\r\n"+
			`{"username":"alice","password":"wrong!"}`)
		st := rawStatus(t, resp)
		statuses = append(statuses, st)
		if st == 429 {
			bare = append(bare, dateLine.ReplaceAllString(resp, ""))
		}
	}
	want := []int{401, 401, 401, 401, 401, 429, 429, 429, 429}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Fatalf("got statuses %v, want %v", statuses, want)
	}
	if got := n.hits(t)["/login"]; got != 5 {
		t.Errorf("origin got %d /login, want 5 (the passes)", got)
	}
	wantBare := "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 18\r\nCache-Control: no-store\r\nConnection: close\r\n\r\nToo Many Requests\n"
	for i, b := range bare {
		if b != wantBare {
			t.Errorf("refusal %d:\n%q\nwant\n%q", i, b, wantBare)
		}
	}
	if got := n.decisions("login-per-ip", "deny"); got != 4 {
		t.Errorf("got %d deny decisions, want 4", got)
	}
	if got := n.decisions("login-per-ip", "allow"); got != 5 {
		t.Errorf("got %d allow decisions, want 5", got)
	}
}

// TestBare429IsIdenticalWhicheverRuleRefused floods three sensitive rules
// with different algorithms and compares their refusals byte for byte.
func TestBare429IsIdenticalWhicheverRuleRefused(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	refusals := map[string]string{}
	for _, path := range []string{"/login", "/signup", "/otp/send"} {
		for i := range 12 {
			resp := raw(t, n.addr, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			if rawStatus(t, resp) == 429 {
				refusals[path] = dateLine.ReplaceAllString(resp, "")
				break
			}
			if i == 11 {
				t.Fatalf("%s never refused", path)
			}
		}
	}
	if refusals["/login"] != refusals["/signup"] || refusals["/login"] != refusals["/otp/send"] {
		t.Errorf("bare 429s differ:\n%q\n%q\n%q", refusals["/login"], refusals["/signup"], refusals["/otp/send"])
	}
	for _, h := range []string{"RateLimit", "Retry-After", "login", "signup", "otp"} {
		if strings.Contains(refusals["/login"], h) {
			t.Errorf("bare 429 mentions %q", h)
		}
	}
}

func TestSensitiveAllowedAnswersCarryNoRateLimitHeaders(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	r := do(t, "POST", "http://"+n.addr+"/login", `{"username":"a","password":"letmein-demo"}`)
	if r.status != 200 {
		t.Fatalf("got %d, want 200", r.status)
	}
	for k := range r.header {
		if strings.Contains(strings.ToLower(k), "ratelimit") || k == "Retry-After" {
			t.Errorf("allowed sensitive answer carries %s: %v", k, r.header[k])
		}
	}
}

// TestPathSpellingsShareTheBucket sends /login spelled seven ways; they all
// count in the one login-per-ip bucket (limit 5), and the origin receives
// the canonical path.
func TestPathSpellingsShareTheBucket(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	tests := []struct {
		line       string // request line
		extra      string // extra header lines
		originPath string // what the origin receives
	}{
		{"POST /login/ HTTP/1.1", "", "/login/"},
		{"POST //login HTTP/1.1", "", "/login"},
		{"POST /LOGIN HTTP/1.1", "", "/LOGIN"},
		{"POST /./login HTTP/1.1", "", "/login"},
		{"POST /%6Cogin HTTP/1.1", "", "/login"},
	}
	for _, tt := range tests {
		resp := raw(t, n.addr, tt.line+"\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n"+tt.extra+"\r\n")
		if st := rawStatus(t, resp); st != 401 {
			t.Fatalf("%s: got %d, want 401 from the origin", tt.line, st)
		}
		if got := n.last(t).Path; got != tt.originPath {
			t.Errorf("%s: origin received %q, want %q", tt.line, got, tt.originPath)
		}
	}
	// The bucket (5) is spent: the query string and the method override do
	// not move a request out of the rule.
	for _, req := range []string{
		"POST /login?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n",
		"GET /login HTTP/1.1\r\nHost: x\r\nX-HTTP-Method-Override: POST\r\n",
		"GET /login HTTP/1.1\r\nHost: x\r\nX-Method-Override: post\r\n",
		"POST /a/../Login/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n",
	} {
		if st := rawStatus(t, raw(t, n.addr, req+"Connection: close\r\n\r\n")); st != 429 {
			t.Errorf("%q: got %d, want 429 (same bucket)", req, st)
		}
	}
	if got := n.decisions("login-per-ip", "allow"); got != 5 {
		t.Errorf("got %d allows, want 5", got)
	}
}

func TestIPv6ClientsShareTheirSlash64(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	for i := range 8 {
		addr := fmt.Sprintf("2001:db8:1:2:%x::%x", i*0x1111, i+1)
		r := do(t, "POST", "http://"+n.addr+"/login", "", "X-Forwarded-For", addr)
		want := 401
		if i >= 5 {
			want = 429
		}
		if r.status != want {
			t.Errorf("client %s (#%d): got %d, want %d", addr, i+1, r.status, want)
		}
	}
	// The next /64 has its own bucket.
	if r := do(t, "POST", "http://"+n.addr+"/login", "", "X-Forwarded-For", "2001:db8:1:3::1", "X-HTTP-Method-Override", "POST"); r.status != 401 {
		t.Errorf("next /64: got %d, want 401", r.status)
	}
	// The origin hears the client, not the loopback proxy's claim alone.
	if got := n.last(t).Headers["X-Forwarded-For"]; got != "2001:db8:1:3::1, 127.0.0.1" {
		t.Errorf("origin X-Forwarded-For %q, want %q", got, "2001:db8:1:3::1, 127.0.0.1")
	}
}

func TestForwardedForFromUntrustedPeerIsIgnored(t *testing.T) {
	p := loadPolicy(t, foundation, `trusted_proxies  = ["127.0.0.1/32", "::1/128"]`, `trusted_proxies  = ["10.0.0.0/8"]`)
	n := startNode(t, p, nodeOptions{})
	for i := range 7 {
		r := do(t, "POST", "http://"+n.addr+"/login", "",
			"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1), "X-Real-IP", "198.51.100.99", "X-Edge-Visitor", "forged",
			"X_Forwarded_For", "198.51.100.98", "True-Client-IP", "198.51.100.97", "X_Edge_Bot_Score", "99", "Forwarded", "for=198.51.100.96")
		want := 401
		if i >= 5 {
			want = 429
		}
		if r.status != want {
			t.Errorf("request %d: got %d, want %d (one bucket: the peer)", i+1, r.status, want)
		}
	}
	h := n.last(t).Headers
	if got := h["X-Forwarded-For"]; got != "127.0.0.1" {
		t.Errorf("origin X-Forwarded-For %q, want the peer only", got)
	}
	for _, k := range []string{"X-Real-Ip", "X-Edge-Visitor", "X_forwarded_for", "X_Forwarded_For", "True-Client-Ip", "X_edge_bot_score", "X_Edge_Bot_Score", "Forwarded"} {
		if v, ok := h[k]; ok {
			t.Errorf("origin received client-sent %s: %q", k, v)
		}
	}
}

func TestHostMatchingAndMissingHost(t *testing.T) {
	p := loadPolicy(t, foundation, `rule "login-per-ip" {`, `rule "login-per-ip" {
  hosts     = ["login.example.com"]`)
	n := startNode(t, p, nodeOptions{})
	// userinfo, a port, a trailing dot and case never move a request out
	// of a hosts-scoped rule.
	for i, host := range []string{"login.example.com", "x@login.example.com", "LOGIN.example.com:80", "login.example.com.", "a:b@Login.Example.Com."} {
		if st := rawStatus(t, raw(t, n.addr, "POST /login HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")); st != 401 {
			t.Errorf("%s: got %d, want 401", host, st)
		}
		if got := n.decisions("login-per-ip", "allow"); got != i+1 {
			t.Errorf("%s: rule counted %d, want %d", host, got, i+1)
		}
	}
	if st := rawStatus(t, raw(t, n.addr, "POST http://login.example.com/login HTTP/1.1\r\nHost: other.example\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")); st != 429 {
		t.Errorf("absolute-form target: got %d, want 429 (its host is the rule's)", st)
	}
	// HTTP/1.0 without Host, and a Connection header naming Host, still
	// reach the origin.
	for _, req := range []string{
		"GET /api/x HTTP/1.0\r\n\r\n",
		"GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: Host, close\r\n\r\n",
	} {
		if st := rawStatus(t, raw(t, n.addr, req)); st != 200 {
			t.Errorf("%q: got %d, want 200", req, st)
		}
	}
}

func TestRateLimitHeaderNames(t *testing.T) {
	for name, want := range map[string]bool{
		"RateLimit": true, "Ratelimit-Policy": true, "X-RateLimit-Remaining": true, "X-Rate-Limit-Reset": true,
		"X_Rate_Limit_Used": true, "Retry-After": true, "Content-Type": false, "X-Rate": false,
	} {
		if got := isRateLimitHeader([]byte(name)); got != want {
			t.Errorf("isRateLimitHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestHopByHopHeadersAreStripped(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	resp := raw(t, n.addr, "GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: close, X-Secret-Hop\r\nX-Secret-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic Zm9v\r\nTE: trailers\r\nUpgrade: h2c\r\nX-Keep: yes\r\n\r\n")
	if st := rawStatus(t, resp); st != 200 {
		t.Fatalf("got %d", st)
	}
	h := n.last(t).Headers
	for _, k := range []string{"X-Secret-Hop", "Keep-Alive", "Proxy-Authorization", "Te", "Upgrade"} {
		if _, ok := h[k]; ok {
			t.Errorf("origin received hop-by-hop %s", k)
		}
	}
	if h["X-Keep"] != "yes" {
		t.Errorf("origin lost an end-to-end header: %v", h)
	}
}

// TestShadowRuleNeverRefusesButCounts: api-shadow-tight (2 a minute, dry
// run) would refuse 8 of 10 requests; api-per-client (10 a minute) allows
// all ten and refuses the eleventh with an informative 429.
func TestShadowRuleNeverRefusesButCounts(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var logs syncBuffer
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{clock: clk, logs: &logs})
	for i := range 10 {
		r := do(t, "GET", "http://"+n.addr+"/api/orders", "")
		if r.status != 200 {
			t.Fatalf("request %d: got %d, want 200", i+1, r.status)
		}
		// t is the effective window (docs/headers.md): with r left, one
		// more unit comes back 6 s after they are spent.
		wantRL := fmt.Sprintf(`"api-per-client";r=%d;t=6`, 9-i)
		if got := r.header.Get("RateLimit"); got != wantRL {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, wantRL)
		}
		if got := r.header.Get("RateLimit-Policy"); got != `"api-per-client";q=10;w=60` {
			t.Errorf("RateLimit-Policy %q", got)
		}
	}
	if got := n.decisions("api-shadow-tight", "dry_run_deny"); got != 8 {
		t.Errorf("got %d dry_run_deny, want 8", got)
	}
	if got := n.decisions("api-shadow-tight", "allow"); got != 2 {
		t.Errorf("got %d allow, want 2", got)
	}
	if got := n.hits(t)["/api/orders"]; got != 10 {
		t.Errorf("origin got %d, want 10", got)
	}
	// Each would-be refusal is logged, with the key's hash, never the IP.
	wouldRefuse := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "would have refused" && rec["rule"] == "api-shadow-tight" && rec["decision"] == "dry_run_deny" && len(fmt.Sprint(rec["key"])) == 30 {
			wouldRefuse++
		}
	}
	if wouldRefuse != 8 {
		t.Errorf("got %d would-have-refused log lines, want 8:\n%s", wouldRefuse, logs.String())
	}
	if strings.Contains(logs.String(), "127.0.0.1") {
		t.Errorf("logs carry the raw client address:\n%s", logs.String())
	}

	clk.Advance(time.Second)
	r := do(t, "GET", "http://"+n.addr+"/api/orders", "")
	if r.status != 429 {
		t.Fatalf("11th: got %d, want 429", r.status)
	}
	// TAT is 60 s ahead; the next unit frees at 6 s after the first: 5 s
	// from now, and t says the same (not the 59 s back to full).
	checks := map[string]string{
		"Retry-After":      "5",
		"Cache-Control":    "no-store",
		"Content-Type":     "application/problem+json",
		"RateLimit-Policy": `"api-per-client";q=10;w=60`,
		"RateLimit":        `"api-per-client";r=0;t=5`,
	}
	for k, want := range checks {
		if got := r.header.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	if body["type"] != quotaExceeded || fmt.Sprint(body["violated-policies"]) != "[api-per-client]" || body["status"] != float64(429) {
		t.Errorf("problem body %v", body)
	}
}

func TestNodeDryRunRefusesNothing(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{dryRun: true})
	for i := range 8 {
		if r := do(t, "POST", "http://"+n.addr+"/login", ""); r.status != 401 {
			t.Fatalf("request %d: got %d, want 401 (forwarded)", i+1, r.status)
		}
	}
	if got := n.hits(t)["/login"]; got != 8 {
		t.Errorf("origin got %d, want 8", got)
	}
	if got := n.decisions("login-per-ip", "dry_run_deny"); got != 3 {
		t.Errorf("got %d dry_run_deny, want 3", got)
	}
}

// TestSeedTraceThroughTheHandler replays the lesson's Figure 1 trace
// through the real server with an injected clock, for all six algorithms.
func TestSeedTraceThroughTheHandler(t *testing.T) {
	var fx struct {
		Requests []float64         `json:"requests_at_seconds"`
		Allowed  map[string][]bool `json:"allowed"`
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata/fixtures/seed_trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Allowed) != 6 {
		t.Fatalf("fixture has %d algorithms, want 6", len(fx.Allowed))
	}
	base := time.Unix(1_800_000_000, 0) // a multiple of the 1 s period
	for alg, want := range fx.Allowed {
		t.Run(alg, func(t *testing.T) {
			clk := &fakeClock{}
			n := startNode(t, loadPolicy(t, foundation), nodeOptions{clock: clk})
			var got []bool
			for _, at := range fx.Requests {
				clk.Set(base.Add(time.Duration(at * float64(time.Second))))
				r := do(t, "GET", "http://"+n.addr+"/trace/"+alg, "")
				got = append(got, r.status != 429)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
			allowed := 0
			for _, a := range want {
				if a {
					allowed++
				}
			}
			if h := n.hits(t)["/trace/"+alg]; h != int64(allowed) {
				t.Errorf("origin got %d, want %d", h, allowed)
			}
		})
	}
}

func TestMalformedRequestsGet4xx(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	big := strings.Repeat("a", 10<<10)
	tests := []struct {
		name string
		req  string
		want int
	}{
		{"oversized header", "GET /api/x HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n", 431},
		{"oversized body", "POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("b", 70000), 413},
		{"bad escape", "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"encoded NUL", "GET /login%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"relative path", "GET login HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"garbage request line", "\x00\x01\x02 / HTTP/1.1\r\n\r\n", 400},
		{"bad content length", "POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := raw(t, n.addr, tt.req)
			if resp == "" {
				t.Fatal("no response")
			}
			if st := rawStatus(t, resp); st != tt.want {
				t.Errorf("got %d, want %d", st, tt.want)
			}
		})
	}
	// The node still serves.
	if r := do(t, "GET", "http://"+n.addr+"/api/x", ""); r.status != 200 {
		t.Errorf("after malformed requests: got %d", r.status)
	}
}

func TestGarbageForwardedForFallsBackToPeer(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	// Every garbage value lands in the peer's (127.0.0.1) bucket, never in a
	// shared empty one: six of them spend the peer's five.
	values := []string{"", "garbage", "unknown", "1.2.3.4.5", "[::1", "999.1.1.1"}
	got := 0
	for _, v := range values {
		if r := do(t, "POST", "http://"+n.addr+"/login", "", "X-Forwarded-For", v); r.status == 429 {
			got++
		}
	}
	if got != 1 {
		t.Errorf("got %d refusals, want 1 (six requests, one bucket of five)", got)
	}
	// A real address still has its own bucket.
	if r := do(t, "POST", "http://"+n.addr+"/login", "", "X-Forwarded-For", "192.0.2.1"); r.status != 401 {
		t.Errorf("got %d, want 401", r.status)
	}
}

func TestAdminEndpoints(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	do(t, "GET", "http://"+n.addr+"/api/x", "")
	if r := do(t, "GET", "http://"+n.admin+"/healthz", ""); r.status != 200 {
		t.Errorf("healthz %d", r.status)
	}
	r := do(t, "GET", "http://"+n.admin+"/readyz", "")
	if r.status != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("readyz %d %q", r.status, r.body)
	}
	r = do(t, "GET", "http://"+n.admin+"/metrics", "")
	for _, want := range []string{
		`edge_decisions_total{decision="allow",rule="api-per-client"} 1`,
		`edge_requests_total{verdict="forward"} 1`,
		`edge_dry_run 0`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if r := do(t, "GET", "http://"+n.admin+"/nope", ""); r.status != 404 {
		t.Errorf("unknown admin path: %d", r.status)
	}
}

func TestOriginDownAnswers502(t *testing.T) {
	p := loadPolicy(t, foundation)
	dead := testnet.DeadAddr(t)
	st, _ := memstore.New(memstore.Options{})
	defer st.Close()
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://" + dead})
	if err != nil {
		t.Fatal(err)
	}
	eln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, eln); close(done) }()
	defer func() { cancel(); <-done }()
	if r := do(t, "GET", "http://"+eln.Addr().String()+"/api/x", ""); r.status != 502 {
		t.Errorf("got %d, want 502", r.status)
	}
}

func TestCeilSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{{0, 1}, {-time.Second, 1}, {200 * time.Millisecond, 1}, {time.Second, 1}, {time.Second + 1, 2}, {59500 * time.Millisecond, 60}}
	for _, tt := range tests {
		if got := ceilSeconds(tt.d); got != tt.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDemoOriginHooksAreNotReachableThroughTheEdge(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	do(t, "GET", "http://"+n.addr+"/api/x", "", "Authorization", "Bearer victim")
	for _, path := range []string{"/__origin/last", "/__origin/hits"} {
		if r := do(t, "GET", "http://"+n.addr+path, ""); r.status != 404 || strings.Contains(r.body, "victim") {
			t.Errorf("%s through the edge: %d %q", path, r.status, r.body)
		}
	}
	if r := do(t, "POST", "http://"+n.addr+"/__origin/reset", ""); r.status != 404 {
		t.Errorf("reset through the edge: %d", r.status)
	}
	if got := n.hits(t)["/api/x"]; got != 1 {
		t.Errorf("hits after a reset attempt through the edge: %d, want 1", got)
	}
}

// sickStore is a Health that reports the store degraded.
type sickStore struct{}

func (sickStore) Degraded() (bool, string) { return true, "store unreachable: test" }
func (sickStore) Refused() (bool, string)  { return false, "" }

// TestReadyzStrictSpellings: strict readiness is asked for by every usual
// spelling, and a spelling the node does not know is a 400, never a
// silent 200 that a probe would take for ready.
func TestReadyzStrictSpellings(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{health: sickStore{}})
	tests := []struct {
		query string
		want  int
	}{
		{"", 200},
		{"?strict=1", 503},
		{"?strict=true", 503},
		{"?strict=TRUE", 503},
		{"?strict=yes", 503},
		{"?strict=on", 503},
		{"?strict", 503},
		{"?STRICT=1", 503},
		{"?strict=0", 200},
		{"?strict=false", 200},
		{"?strict=off", 200},
		{"?strict=2", 400},
		{"?strict=maybe", 400},
	}
	for _, tt := range tests {
		r := do(t, "GET", "http://"+n.admin+"/readyz"+tt.query, "")
		if r.status != tt.want {
			t.Errorf("/readyz%s: got %d, want %d", tt.query, r.status, tt.want)
		}
		if tt.want != 400 && !strings.Contains(r.body, `"status":"degraded"`) {
			t.Errorf("/readyz%s: body %q does not say degraded", tt.query, r.body)
		}
	}
}

// TestShutdownWithSilentConnection: a connection that never sends a request
// (a load balancer's TCP check, a slowloris client) holds neither the edge
// nor the demo origin past the shutdown grace, and is not an error: Serve
// returns nil once the grace has run out.
func TestShutdownWithSilentConnection(t *testing.T) {
	t.Parallel()
	p := loadPolicy(t, foundation)
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	serve := map[string]func(context.Context, net.Listener) error{
		"edge":        srv.Serve,
		"demo origin": demo.New().Serve,
	}
	var wg sync.WaitGroup
	for name, serveFn := range serve {
		wg.Go(func() {
			ln := listen(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- serveFn(ctx, ln) }()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				cancel()
				return
			}
			defer c.Close()
			time.Sleep(50 * time.Millisecond) // let the server accept it; nothing to wait on
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: Serve returned %v with a silent connection open, want nil", name, err)
				}
				t.Logf("%s: stopped %v after cancel", name, time.Since(start).Round(time.Millisecond))
			case <-time.After(shutdownGrace + 5*time.Second):
				t.Errorf("%s: Serve did not return within the grace (%v) + 5s", name, shutdownGrace)
			}
		})
	}
	wg.Wait()
}
