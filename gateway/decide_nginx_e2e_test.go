package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The decision-only mode behind Debian's real NGINX (issue 14, item 7):
// deploy/nginx-auth-request.conf as shipped, its addresses replaced by
// free loopback ports, auth_request to the edge's decide listener and the
// edge's demo origin behind NGINX. The policy is decidePolicy
// (decide_e2e_test.go): NGINX (127.0.0.1, as the edge sees it) is the one
// trusted proxy; clients reach NGINX from 127.0.0.2 and 127.0.0.3.

// startAuthNginx runs deploy/nginx-auth-request.conf with its edge and
// application addresses replaced by decide and app, listening on a free
// loopback port it returns. Only what a test needs is added: a pid file,
// logs and temporary directories in the test's directory, one worker.
func startAuthNginx(t *testing.T, decide, app string) (addr, errorLog string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "nginx-auth-request.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr = freeAddr(t)
	conf := string(src)
	for _, r := range [][2]string{
		{"worker_processes auto;", nginxMain(dir)},
		{"listen 80;", "listen " + addr + ";"},
		{"server 127.0.0.1:8081;", "server " + decide + ";"},
		{"server 127.0.0.1:9000;", "server " + app + ";"},
		{"http {\n", "http {\n" + nginxHTTP(dir)},
	} {
		if strings.Count(conf, r[0]) != 1 {
			t.Fatalf("deploy/nginx-auth-request.conf has %d of %q, want 1", strings.Count(conf, r[0]), r[0])
		}
		conf = strings.Replace(conf, r[0], r[1], 1)
	}
	return addr, runNginx(t, dir, conf, addr)
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip: NGINX's $remote_addr.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// seen is an answer as compared between NGINX and the edge.
type seen struct {
	status                                       int
	retryAfter, rateLimit, rateLimitPolicy, cctl string
	body                                         string // the refusal's body, on the sensitive route
}

func call(t *testing.T, c *http.Client, method, url string, header ...string) seen {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		// Of unknown length, so sent chunked: NGINX's subrequest must not
		// carry the client's framing (it sends no body).
		body = io.MultiReader(strings.NewReader(`{"username":"alice","password":"wrong!"}`))
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "example.com"
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := seen{status: resp.StatusCode, cctl: resp.Header.Get("Cache-Control"), retryAfter: resp.Header.Get("Retry-After"), rateLimit: resp.Header.Get("RateLimit"), rateLimitPolicy: resp.Header.Get("RateLimit-Policy")}
	if resp.StatusCode == 429 && strings.HasPrefix(req.URL.Path, "/login") {
		s.body = string(b)
	}
	return s
}

// TestNginxAuthRequestRefusesAsTheEdge: a login flood and an API flood
// through NGINX with deploy/nginx-auth-request.conf are refused by NGINX
// on the edge's word exactly as the edge's own proxy listener refuses them
// (a second node, same policy, same instant): the same statuses; on the
// sensitive route a bare 429 (no Retry-After, no RateLimit, the edge's
// body); on the ordinary route Retry-After and RateLimit, the same values.
// The client address NGINX sees keys the counters: two loopback sources
// get two budgets, and a client's own X-Forwarded-For does not move it.
// Refused requests never reach the origin, and each request is decided
// once (NGINX's error_page does not ask again).
func TestNginxAuthRequestRefusesAsTheEdge(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := loadDecidePolicy(t)
	behind := startNode(t, p, nodeOptions{clock: &fakeClock{t: at}})
	daddr := serveDecide(t, behind)
	nginx, errorLog := startAuthNginx(t, daddr, behind.oaddr)
	direct := startNode(t, loadDecidePolicy(t), nodeOptions{clock: &fakeClock{t: at}})

	a, b := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	type req struct {
		c      *http.Client
		from   string
		method string
		path   string
		spoof  string // the client's own X-Forwarded-For
	}
	script := []req{
		{a, "127.0.0.2", "POST", "/login", ""},
		{a, "127.0.0.2", "POST", "/login", ""},
		{a, "127.0.0.2", "POST", "/login", ""},
		{a, "127.0.0.2", "POST", "/login", ""},
		{a, "127.0.0.2", "POST", "/login", ""},
		{b, "127.0.0.3", "POST", "/login", ""},
		{a, "127.0.0.2", "POST", "/login", "203.0.113.9"},
		{b, "127.0.0.3", "POST", "/login", "127.0.0.2"},
		{a, "127.0.0.2", "GET", "/api/items", ""},
		{a, "127.0.0.2", "GET", "/api/items", ""},
		{a, "127.0.0.2", "GET", "/api/items?page=2", ""},
		{a, "127.0.0.2", "GET", "/api/items", ""},
		{a, "127.0.0.2", "GET", "/api/items", ""},
		{b, "127.0.0.3", "GET", "/api/items", ""},
		{a, "127.0.0.2", "GET", "/keyed", ""},    // no X-Api-Key: 400
		{a, "127.0.0.2", "GET", "/admin", ""},    // deny: 403
		{a, "127.0.0.2", "GET", "/ADMIN/./", ""}, // the same route, spelt otherwise
		{b, "127.0.0.3", "GET", "/nothing", ""},  // no rule: the origin's 404
	}
	want := []int{401, 401, 401, 429, 429, 401, 429, 401, 200, 200, 200, 429, 429, 200, 400, 403, 403, 404}
	var got []int
	for i, r := range script {
		var via, edge seen
		if r.spoof != "" {
			via = call(t, r.c, r.method, "http://"+nginx+r.path, "X-Forwarded-For", r.spoof)
			edge = call(t, client, r.method, "http://"+direct.addr+r.path, "X-Forwarded-For", r.spoof+", "+r.from)
		} else {
			via = call(t, r.c, r.method, "http://"+nginx+r.path)
			edge = call(t, client, r.method, "http://"+direct.addr+r.path, "X-Forwarded-For", r.from)
		}
		got = append(got, via.status)
		if via != edge {
			t.Errorf("step %d %s %s from %s:\nthrough NGINX %+v\nthe edge      %+v", i, r.method, r.path, r.from, via, edge)
		}
		if via.status == 429 && r.path == "/login" && (via.retryAfter != "" || via.rateLimit != "" || via.rateLimitPolicy != "" || via.body != bareBody) {
			t.Errorf("step %d: the sensitive route's refusal through NGINX is not bare: %+v", i, via)
		}
		if via.status == 429 && strings.HasPrefix(r.path, "/api") && (via.retryAfter == "" || !strings.Contains(via.rateLimit, `"api-per-ip";r=0`)) {
			t.Errorf("step %d: the ordinary route's 429 through NGINX lacks Retry-After or RateLimit: %+v", i, via)
		}
		if via.status == 200 && via.rateLimit == "" {
			t.Errorf("step %d: a pass on the ordinary route through NGINX has no RateLimit header", i)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses through NGINX %v, want %v", got, want)
	}
	hits := behind.hits(t)
	if hits["/login"] != 5 || hits["/api/items"] != 4 {
		t.Errorf("origin behind NGINX saw %v, want 5 /login and 4 /api/items (the passes only)", hits)
	}
	if deny, allow := behind.decisions("login-per-ip", "deny"), behind.decisions("login-per-ip", "allow"); deny != 3 || allow != 5 {
		t.Errorf("login decisions behind NGINX: %d deny, %d allow; want 3 and 5 (one decision per request)", deny, allow)
	}
	if t.Failed() {
		log, _ := os.ReadFile(errorLog)
		t.Logf("nginx error log:\n%s", log)
	}
}

// TestNginxAuthRequestFailsClosed: with the edge's decide listener down,
// NGINX refuses (503) rather than letting requests through.
func TestNginxAuthRequestFailsClosed(t *testing.T) {
	behind := startNode(t, loadDecidePolicy(t), nodeOptions{})
	nginx, _ := startAuthNginx(t, freeAddr(t), behind.oaddr) // nothing listens there
	if s := call(t, clientFrom("127.0.0.2"), "POST", "http://"+nginx+"/login"); s.status != 503 {
		t.Fatalf("edge down: %d, want 503", s.status)
	}
	if hits := behind.hits(t); hits["/login"] != 0 {
		t.Fatalf("the origin saw %v with the edge down", hits)
	}
}
