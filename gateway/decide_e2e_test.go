package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
)

// decidePolicy is the decision-only mode's test policy: a sensitive login
// rule, an ordinary API rule, a header-keyed rule that rejects a missing
// key and a deny rule; the test client (loopback) is a trusted proxy and
// speaks for many clients in X-Forwarded-For.
const decidePolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32"]
  decide_listen   = "127.0.0.1:18081"
}

rule "login-per-ip" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 3
  period    = "1m"
  sensitive = true
}

rule "api-per-ip" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 3
  period = "1m"
}

rule "keyed-per-key" {
  paths            = ["/keyed"]
  key              = ["header:X-Api-Key"]
  limit            = 2
  period           = "1m"
  missing_identity = "reject"
}

rule "no-admin" {
  paths  = ["/admin"]
  action = "deny"
}
`

func loadDecidePolicy(t testing.TB) *rules.Policy {
	t.Helper()
	p, diags := builtin.Load("decide.hcl", []byte(decidePolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// serveDecide runs n's decision-only listener on a free loopback port and
// returns its HOST:PORT.
func serveDecide(t testing.TB, n *node) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ln := listen(t)
	wg.Add(1)
	go func() { defer wg.Done(); _ = n.srv.ServeDecide(ctx, ln) }()
	return ln.Addr().String()
}

// step is one request of a scripted flood: what the client sends.
type step struct {
	method, target, client string
	header                 []string // name, value, …
}

// decideFlood is the script both listeners get. want is each step's
// verdict as the edge gives it: "pass" (forwarded, or 200 from the decide
// listener) or the refusal's status.
var decideFlood = []struct {
	step
	want string
}{
	{step{"POST", "/login", "198.51.100.1", nil}, "pass"},
	{step{"POST", "/login", "198.51.100.1", nil}, "pass"},
	{step{"POST", "/Login/", "198.51.100.1", nil}, "pass"}, // one route however spelt
	{step{"POST", "/login", "198.51.100.1", nil}, "429"},
	{step{"POST", "/login?next=/", "198.51.100.1", nil}, "429"},
	{step{"POST", "/login", "198.51.100.2", nil}, "pass"}, // another client, another budget
	{step{"GET", "/login", "198.51.100.1", []string{"X-HTTP-Method-Override", "POST"}}, "429"},
	{step{"GET", "/api/items", "198.51.100.1", nil}, "pass"},
	{step{"GET", "/api/items?page=2", "198.51.100.1", nil}, "pass"},
	{step{"POST", "/api/orders", "198.51.100.1", nil}, "pass"},
	{step{"GET", "/api/items", "198.51.100.1", nil}, "429"},
	{step{"GET", "/api/items", "198.51.100.1", nil}, "429"},
	{step{"GET", "/api/items", "198.51.100.3", nil}, "pass"},
	{step{"GET", "/keyed", "198.51.100.1", nil}, "400"},
	{step{"GET", "/keyed", "198.51.100.1", []string{"X-Api-Key", "k1"}}, "pass"},
	{step{"GET", "/keyed?x=1", "198.51.100.4", []string{"X-Api-Key", "k1"}}, "pass"},
	{step{"GET", "/keyed", "198.51.100.1", []string{"X-Api-Key", "k1"}}, "429"},
	{step{"GET", "/keyed", "198.51.100.1", []string{"X-Api-Key", "k2"}}, "pass"},
	{step{"GET", "/admin", "198.51.100.1", nil}, "403"},
	{step{"GET", "/%zz", "198.51.100.1", nil}, "400"},              // a path that cannot be read one way
	{step{"GET", "/api/caf\xc3\xa9", "198.51.100.5", nil}, "pass"}, // raw UTF-8, as NGINX's $request_uri keeps it
	{step{"GET", "/a/../api/x", "198.51.100.5", nil}, "pass"},
	{step{"GET", "/a/../api/x", "198.51.100.5", nil}, "pass"},
	{step{"GET", "/API/y/", "198.51.100.5", nil}, "429"},
}

// answer is what a client saw, reduced to what the two listeners must
// agree on.
type answer struct {
	verdict string
	headers string // the refusal's or the pass's RateLimit headers, and a refusal's framing
	body    string // a refusal's body
}

// shownHeaders are the headers compared between the listeners: the edge's
// own on a refusal, its RateLimit headers on a pass.
var shownHeaders = []string{"Retry-After", "RateLimit-Policy", "RateLimit", "Content-Type", "Cache-Control"}

func (a answer) String() string { return a.verdict + " " + a.headers + " " + a.body }

// sendRaw sends one HTTP/1.1 request on a new connection and reads the
// answer.
func sendRaw(t testing.TB, addr, method, target string, header []string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: example.com\r\n", method, target)
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("Content-Length: 0\r\nConnection: close\r\n\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func summarize(resp *http.Response, body string, pass bool) answer {
	a := answer{verdict: fmt.Sprint(resp.StatusCode)}
	if pass {
		a.verdict = "pass"
		a.headers = "RateLimit-Policy=" + resp.Header.Get("RateLimit-Policy") + " RateLimit=" + resp.Header.Get("RateLimit") + " Retry-After=" + resp.Header.Get("Retry-After")
		return a
	}
	for _, h := range shownHeaders {
		a.headers += h + "=" + strings.Join(resp.Header.Values(h), "|") + " "
	}
	a.body = body
	return a
}

// viaProxy sends s to the proxy listener; whether it passed is whether
// the origin saw it.
func viaProxy(t testing.TB, n *node, s step) answer {
	t.Helper()
	before := sum(n.hits(t))
	resp, body := sendRaw(t, n.addr, s.method, s.target, append([]string{"X-Forwarded-For", s.client}, s.header...))
	return summarize(resp, body, sum(n.hits(t)) > before)
}

// viaDecide sends s to the decision-only listener as NGINX's auth_request
// describes it: a GET subrequest with the original method and URI in
// X-Original-Method and X-Original-URI, no body.
func viaDecide(t testing.TB, addr string, s step) answer {
	t.Helper()
	h := append([]string{"X-Original-Method", s.method, "X-Original-URI", s.target, "X-Forwarded-For", s.client}, s.header...)
	resp, body := sendRaw(t, addr, "GET", "/_edge", h)
	if resp.StatusCode == 200 && body != "" {
		t.Errorf("%v: a pass has a body: %q", s, body)
	}
	return summarize(resp, body, resp.StatusCode == 200)
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestDecideListenerAnswersAsTheProxyListener: the same scripted flood
// through the proxy listener of one node and through the decision-only
// listener of another (same policy, same instant) gets the same verdicts,
// the expected ones, and the same refusals: status, headers and body (the
// bare 429 on the login route, Retry-After and RateLimit on the API's),
// the same RateLimit headers on each pass.
func TestDecideListenerAnswersAsTheProxyListener(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	proxy := startNode(t, loadDecidePolicy(t), nodeOptions{clock: &fakeClock{t: at}})
	decider := startNode(t, loadDecidePolicy(t), nodeOptions{clock: &fakeClock{t: at}})
	daddr := serveDecide(t, decider)

	for i, f := range decideFlood {
		p := viaProxy(t, proxy, f.step)
		d := viaDecide(t, daddr, f.step)
		if p.verdict != f.want {
			t.Errorf("step %d %v: the proxy listener's verdict is %s, want %s", i, f.step, p.verdict, f.want)
		}
		if d != p {
			t.Errorf("step %d %v:\ndecide listener %s\nproxy listener  %s", i, f.step, d, p)
		}
		switch {
		case f.want == "429" && strings.HasPrefix(f.target, "/api"):
			if strings.Contains(d.headers, "Retry-After= ") || !strings.Contains(d.headers, "RateLimit=\"api-per-ip\";r=0") {
				t.Errorf("step %d: no Retry-After on an ordinary route's 429: %s", i, d.headers)
			}
		case f.want == "429" && strings.HasPrefix(strings.ToLower(f.target), "/login"):
			if d.headers != "Retry-After= RateLimit-Policy= RateLimit= Content-Type=text/plain; charset=utf-8 Cache-Control=no-store " || d.body != bareBody {
				t.Errorf("step %d: the sensitive route's refusal is not bare: %s", i, d)
			}
		}
	}
	// The ordinary route's refusal tells when to come back.
	d := viaDecide(t, daddr, step{"GET", "/api/items", "198.51.100.1", nil})
	if !strings.Contains(d.headers, "Retry-After=20 ") || !strings.Contains(d.headers, `RateLimit="api-per-ip";r=0;t=20`) {
		t.Errorf("the API's 429 through the decide listener: %s", d.headers)
	}
	if got := decider.hits(t); sum(got) != 0 {
		t.Errorf("the decide listener proxied requests: origin hits %v", got)
	}
}

// TestDecideAndProxyListenersShareCounters: one node's two listeners
// count into the same counters, whichever a request came through.
func TestDecideAndProxyListenersShareCounters(t *testing.T) {
	n := startNode(t, loadDecidePolicy(t), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}})
	daddr := serveDecide(t, n)
	login := step{"POST", "/login", "198.51.100.7", nil}
	got := []string{
		viaProxy(t, n, login).verdict,
		viaDecide(t, daddr, login).verdict,
		viaProxy(t, n, login).verdict,
		viaDecide(t, daddr, login).verdict,
		viaProxy(t, n, login).verdict,
	}
	if want := "[pass pass pass 429 429]"; fmt.Sprint(got) != want {
		t.Fatalf("alternating listeners: %v, want %s", got, want)
	}
	if deny := n.decisions("login-per-ip", "deny"); deny != 2 {
		t.Errorf("%d deny decisions, want 2", deny)
	}
}

// TestDecideEnvoyShape: Envoy's ext_authz HTTP service sends the original
// method and path as the request's own (no X-Original-*): decided alike.
func TestDecideEnvoyShape(t *testing.T) {
	n := startNode(t, loadDecidePolicy(t), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}})
	daddr := serveDecide(t, n)
	var got []int
	for range 5 {
		resp, body := sendRaw(t, daddr, "POST", "/login", []string{"X-Forwarded-For", "198.51.100.9"})
		got = append(got, resp.StatusCode)
		if resp.StatusCode == 429 && body != bareBody {
			t.Errorf("refusal body %q", body)
		}
	}
	if fmt.Sprint(got) != "[200 200 200 429 429]" {
		t.Fatalf("statuses %v", got)
	}
	// A HEAD described by a GET subrequest: the answer is framed for the
	// GET (its body is read), and the HEAD is what the rules matched.
	resp, body := sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-Method", "HEAD", "X-Original-URI", "/admin", "X-Forwarded-For", "198.51.100.9"})
	if resp.StatusCode != 403 || !strings.Contains(body, "Forbidden") {
		t.Errorf("HEAD /admin described: %d %q", resp.StatusCode, body)
	}
}

// TestDecideMalformedDescriptions: a described request that is not one
// is a 400 (a header too large for the server, 431), never a panic; the
// listener keeps deciding.
func TestDecideMalformedDescriptions(t *testing.T) {
	n := startNode(t, loadDecidePolicy(t), nodeOptions{})
	daddr := serveDecide(t, n)
	for _, h := range [][]string{
		{"X-Original-URI", "login"},
		{"X-Original-URI", "/a\x01b"},
		{"X-Original-URI", "ftp://example.com/login"},
		{"X-Original-URI", "http://"},
		{"X-Original-URI", "*"},
		{"X-Original-URI", "/login", "X-Original-URI", "/api/x"},
		{"X-Original-Method", "PO ST", "X-Original-URI", "/login"},
		{"X-Original-Method", "P(ST", "X-Original-URI", "/login"},
		{"X-Original-Method", strings.Repeat("P", 33), "X-Original-URI", "/login"},
		{"X-Original-Method", "POST", "X-Original-Method", "GET", "X-Original-URI", "/login"},
		{"X-Original-URI", "/%zz"},
		{"X-Original-URI", "http://exa mple.com/"},
	} {
		resp, _ := sendRaw(t, daddr, "GET", "/_edge", h)
		if resp.StatusCode != 400 {
			t.Errorf("%q: %d, want 400", h, resp.StatusCode)
		}
	}
	resp, _ := sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-URI", "/" + strings.Repeat("a", 9<<10)})
	if resp.StatusCode != 431 {
		t.Errorf("a 9 KiB X-Original-URI: %d, want 431", resp.StatusCode)
	}
	// Absolute-form: its authority is the host, as on the proxy listener.
	resp, _ = sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-URI", "http://Example.COM/admin"})
	if resp.StatusCode != 403 {
		t.Errorf("absolute-form /admin: %d, want 403", resp.StatusCode)
	}
	resp, _ = sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-URI", "/api/ok"})
	if resp.StatusCode != 200 {
		t.Errorf("after the malformed ones: %d, want 200", resp.StatusCode)
	}
}

// FuzzDecideDescribed: whatever X-Original-Method and X-Original-URI say,
// the decide handler answers a status (never a panic, never a 5xx without
// a store outage).
func FuzzDecideDescribed(f *testing.F) {
	for _, s := range [][2]string{{"POST", "/login"}, {"GET", "/api/x?y=1"}, {"", ""}, {"P", "http://h/"}, {"GET", "/%00"}, {"x", "//a/../b"}, {"GET", "http://[::1/"}} {
		f.Add(s[0], s[1])
	}
	p := loadDecidePolicy(f)
	n := startNode(f, p, nodeOptions{})
	f.Fuzz(func(t *testing.T, method, uri string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetHost("example.com")
		ctx.Request.SetRequestURI("/_edge")
		if method != "" {
			ctx.Request.Header.Set("X-Original-Method", method)
		}
		if uri != "" {
			ctx.Request.Header.Set("X-Original-URI", uri)
		}
		n.srv.DecideHandler(&ctx)
		if st := ctx.Response.StatusCode(); st >= 500 || st < 200 {
			t.Fatalf("%q %q: %d", method, uri, st)
		}
	})
}

// TestDecideNeedsACheckedPolicy: the decision-only listener serves only a
// policy that sets decide_listen (its rules were checked for what a
// described request carries); one reloaded without it answers 503.
func TestDecideNeedsACheckedPolicy(t *testing.T) {
	unchecked, diags := builtin.Load("plain.hcl", []byte(strings.Replace(decidePolicy, `decide_listen   = "127.0.0.1:18081"`, "", 1)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	n := startNode(t, unchecked, nodeOptions{})
	if err := n.srv.ServeDecide(context.Background(), listen(t)); err == nil {
		t.Fatal("ServeDecide served a policy without decide_listen")
	}
	if err := n.srv.Reload(loadDecidePolicy(t)); err != nil {
		t.Fatal(err)
	}
	daddr := serveDecide(t, n)
	if resp, _ := sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-URI", "/api/x"}); resp.StatusCode != 200 {
		t.Fatalf("checked policy: %d", resp.StatusCode)
	}
	if err := n.srv.Reload(unchecked); err != nil {
		t.Fatal(err)
	}
	if resp, _ := sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-URI", "/api/x"}); resp.StatusCode != 503 {
		t.Fatalf("reloaded without decide_listen: %d, want 503", resp.StatusCode)
	}
}

// TestDecideTellsWhatTheProxyListenerTellsTheOrigin: on a pass the decide
// listener answers the headers the proxy listener would add to the
// request it forwards (X-Edge-Visitor, X-Edge-Bot-Score and -Reasons),
// for the proxy to copy, and a Set-Cookie for a new visitor; a cookie it
// minted verifies on the proxy listener as the same visitor.
func TestDecideTellsWhatTheProxyListenerTellsTheOrigin(t *testing.T) {
	p := loadPolicy(t, "testdata/fixtures/policies/bots.hcl",
		`trusted_proxies = ["127.0.0.1/32", "::1/128"]`, `trusted_proxies = ["127.0.0.1/32", "::1/128"]
  decide_listen   = "127.0.0.1:18081"`,
		`rule "signup-per-network" {`, `visitor {
  secure = false
}

rule "login-per-visitor" {
  paths  = ["/login"]
  key    = ["visitor"]
  limit  = 100
  period = "1m"
}

rule "signup-per-network" {`)
	n := startNode(t, p, nodeOptions{})
	daddr := serveDecide(t, n)
	ua := "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"

	resp, _ := sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-Method", "POST", "X-Original-URI", "/login", "X-Forwarded-For", "81.2.69.160", "User-Agent", ua})
	cookie := resp.Header.Get("Set-Cookie")
	visitor := resp.Header.Get("X-Edge-Visitor")
	if resp.StatusCode != 200 || cookie == "" || visitor == "" || resp.Header.Get("X-Edge-Bot-Score") == "" {
		t.Fatalf("first pass: %d, Set-Cookie %q, X-Edge-Visitor %q, X-Edge-Bot-Score %q", resp.StatusCode, cookie, visitor, resp.Header.Get("X-Edge-Bot-Score"))
	}
	pair, _, _ := strings.Cut(cookie, ";")

	// The same request, cookie and all, through the proxy listener: the
	// origin hears what the decide listener said.
	resp, _ = sendRaw(t, daddr, "GET", "/_edge", []string{"X-Original-Method", "POST", "X-Original-URI", "/login", "X-Forwarded-For", "81.2.69.160", "User-Agent", ua, "Cookie", pair})
	if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Edge-Visitor") != visitor {
		t.Errorf("with its cookie: Set-Cookie %q, X-Edge-Visitor %q, want none and %q", resp.Header.Get("Set-Cookie"), resp.Header.Get("X-Edge-Visitor"), visitor)
	}
	sendRaw(t, n.addr, "POST", "/login", []string{"X-Forwarded-For", "81.2.69.160", "User-Agent", ua, "Cookie", pair})
	last := n.last(t)
	for _, h := range []string{"X-Edge-Visitor", "X-Edge-Bot-Score", "X-Edge-Bot-Reasons"} {
		if got, want := resp.Header.Get(h), last.Headers[h]; got != want || want == "" && h != "X-Edge-Bot-Reasons" {
			t.Errorf("%s: the decide listener says %q, the origin heard %q from the proxy listener", h, got, want)
		}
	}
}
