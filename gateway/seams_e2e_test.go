package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The seams between what the edge matches and what an origin acts on
// (docs/host-and-path.md): one host for matching and forwarding, override
// and X-Edge-* headers in every spelling an origin reads, path segments
// that Windows origins strip, and the client's own Content-Type. Every test
// here goes through the real server on loopback in front of the demo
// origin.

// seamsNode is the foundation policy with login-per-ip scoped to
// login.example.com and the IPv6 literal [::1], and a deny rule on /.git/*.
func seamsNode(t *testing.T) *node {
	t.Helper()
	p := loadPolicy(t, foundation, `rule "login-per-ip" {`, `rule "git-denied" {
  paths  = ["/.git/*"]
  key    = ["ip"]
  action = "deny"
}

rule "login-per-ip" {
  hosts     = ["login.example.com", "[::1]"]`)
	return startNode(t, p, nodeOptions{})
}

// counted is how many requests rule has decided, whatever the decision.
func (n *node) counted(rule string) int {
	total := 0
	for _, d := range []string{"allow", "deny", "dry_run_deny", "store_error_allow", "store_error_deny", "invalid_identity", "missing_identity"} {
		total += int(testutil.ToFloat64(n.srv.m.decisions.WithLabelValues(rule, d)))
	}
	return total
}

// originTotal is the number of requests the demo origin has served.
func (n *node) originTotal(t *testing.T) int64 {
	t.Helper()
	var total int64
	for _, c := range n.hits(t) {
		total += c
	}
	return total
}

// TestOneHostForMatchingAndForwarding: the host the rules match is the host
// the origin receives (RFC 9112 §3.2.2: an absolute-form target's host
// replaces Host), in one normalised spelling; a host an origin could read
// another way is refused with 400 before any rule or the origin sees it.
func TestOneHostForMatchingAndForwarding(t *testing.T) {
	n := seamsNode(t)
	const upstream = "UPSTREAM" // the origin's own address, for HTTP/1.0 without Host
	tests := []struct {
		name    string
		target  string // request-target
		proto   string // "HTTP/1.1" unless set
		headers string // header lines, each ending in \r\n
		host    string // the Host the origin must receive; "" for a 400
		matched bool   // whether login-per-ip must count the request
	}{
		// The bypass: matched as "other", forwarded as login.
		{"absolute-form target replaces Host", "http://other/login", "", "Host: login.example.com\r\n", "other", false},
		{"absolute-form target matched", "http://login.example.com/login", "", "Host: other\r\n", "login.example.com", true},
		{"absolute-form scheme in capitals", "HTTP://login.example.com/login", "", "Host: other\r\n", "login.example.com", true},
		{"absolute-form userinfo, case, trailing dot, port", "http://u:p@LOGIN.example.com.:0080/login", "", "Host: other\r\n", "login.example.com:80", true},
		{"absolute-form without Host", "http://login.example.com/login", "", "", "", false},

		// Every spelling README and policies.hcl say is ignored: case, a
		// port, a trailing dot, userinfo.
		{"plain", "/login", "", "Host: login.example.com\r\n", "login.example.com", true},
		{"case", "/login", "", "Host: LOGIN.Example.COM\r\n", "login.example.com", true},
		{"port", "/login", "", "Host: login.example.com:8080\r\n", "login.example.com:8080", true},
		{"port with leading zeros", "/login", "", "Host: login.example.com:00443\r\n", "login.example.com:443", true},
		{"empty port", "/login", "", "Host: login.example.com:\r\n", "login.example.com", true},
		{"trailing dot", "/login", "", "Host: login.example.com.\r\n", "login.example.com", true},
		{"userinfo", "/login", "", "Host: x@login.example.com\r\n", "login.example.com", true},
		{"all of them", "/login", "", "Host: a:b@Login.Example.Com.:80\r\n", "login.example.com:80", true},
		{"another host", "/login", "", "Host: other.example\r\n", "other.example", false},

		// IPv6 literals in their canonical form.
		{"ipv6", "/login", "", "Host: [::1]\r\n", "[::1]", true},
		{"ipv6 long form", "/login", "", "Host: [0:0:0::0001]\r\n", "[::1]", true},
		{"ipv6 with port", "/login", "", "Host: [::1]:8080\r\n", "[::1]:8080", true},
		{"ipv4-mapped ipv6 is the ipv4", "/login", "", "Host: [::ffff:127.0.0.1]\r\n", "127.0.0.1", false},
		{"ipv4", "/login", "", "Host: 127.0.0.1:8080\r\n", "127.0.0.1:8080", false},

		// Refused: spellings origins resolve differently.
		{"two trailing dots", "/login", "", "Host: login.example.com..\r\n", "", false},
		{"empty label", "/login", "", "Host: login..example.com\r\n", "", false},
		{"leading dot", "/login", "", "Host: .login.example.com\r\n", "", false},
		{"comma", "/login", "", "Host: login.example.com,other\r\n", "", false},
		{"encoded dot", "/login", "", "Host: login%2Eexample.com\r\n", "", false},
		{"encoded non-ascii", "/login", "", "Host: l%C3%B6gin.example.com\r\n", "", false},
		{"raw non-ascii", "/login", "", "Host: l\xc3\xb6gin.example.com\r\n", "", false},
		{"fullwidth letter", "/login", "", "Host: \xef\xbd\x8cogin.example.com\r\n", "", false},
		{"ipv6 zone", "/login", "", "Host: [fe80::1%25eth0]\r\n", "", false},
		{"ipv4 in brackets", "/login", "", "Host: [127.0.0.1]\r\n", "", false},
		{"short ipv4", "/login", "", "Host: 127.1\r\n", "", false},
		{"hex ipv4", "/login", "", "Host: 0x7f.0.0.1\r\n", "", false},
		{"decimal ipv4", "/login", "", "Host: 2130706433\r\n", "", false},
		{"ipv4 with leading zero", "/login", "", "Host: 127.0.0.01\r\n", "", false},
		{"port out of range", "/login", "", "Host: login.example.com:65536\r\n", "", false},
		{"port not a number", "/login", "", "Host: login.example.com:8a\r\n", "", false},
		{"two Host headers", "/login", "", "Host: other\r\nHost: login.example.com\r\n", "", false},
		{"empty Host", "/login", "", "Host: \r\n", "", false},
		{"no Host", "/login", "", "", "", false},

		// HTTP/1.0 may leave Host out: the origin's own address is matched
		// and forwarded.
		{"HTTP/1.0 without Host", "/login", "HTTP/1.0", "", upstream, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proto := tt.proto
			if proto == "" {
				proto = "HTTP/1.1"
			}
			before, served := n.counted("login-per-ip"), n.originTotal(t)
			// A fresh client per case, so the limit never answers.
			req := fmt.Sprintf("POST %s %s\r\n%sX-Forwarded-For: 198.51.100.%d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", tt.target, proto, tt.headers, i+1)
			st := rawStatus(t, raw(t, n.addr, req))
			counted := n.counted("login-per-ip") - before
			if tt.host == "" {
				if st != 400 {
					t.Errorf("got %d, want 400", st)
				}
				if counted != 0 || n.originTotal(t) != served {
					t.Errorf("a refused request was counted %d times or reached the origin", counted)
				}
				return
			}
			if st != 401 {
				t.Fatalf("got %d, want the origin's 401", st)
			}
			want := tt.host
			if want == upstream {
				want = n.oaddr
			}
			last := n.last(t)
			if got := last.Headers["Host"]; got != want {
				t.Errorf("origin received Host %q, want %q", got, want)
			}
			if a, ok := last.Headers["Authorization"]; ok {
				t.Errorf("origin received Authorization %q made from the target's userinfo", a)
			}
			if wantCounted := map[bool]int{true: 1}[tt.matched]; counted != wantCounted {
				t.Errorf("login-per-ip counted it %d times, want %d", counted, wantCounted)
			}
		})
	}
}

// TestHostScopedLoginLimitHoldsAgainstAbsoluteForm is the attack:
// the absolute-form target names another host while Host names the login
// host. No more than the limit of 5 logins may reach the origin as
// login.example.com.
func TestHostScopedLoginLimitHoldsAgainstAbsoluteForm(t *testing.T) {
	n := seamsNode(t)
	asLogin := 0
	for range 8 {
		resp := raw(t, n.addr, "POST http://other/login HTTP/1.1\r\nHost: login.example.com\r\nX-Forwarded-For: 203.0.113.9\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		if rawStatus(t, resp) == 401 && n.last(t).Headers["Host"] == "login.example.com" {
			asLogin++
		}
	}
	if asLogin > 5 {
		t.Errorf("%d logins reached the origin as login.example.com, past the limit of 5", asLogin)
	}
}

// TestHostHeadersOfOriginsAreNotForwarded: headers from which origins
// behind a proxy take the host (X-Forwarded-Host: Express with trust
// proxy, Django's USE_X_FORWARDED_HOST, Werkzeug's ProxyFix) or the path
// (X-Original-URL, X-Rewrite-URL: IIS URL Rewrite, older Symfony) never
// reach the origin from a client, in any spelling.
func TestHostHeadersOfOriginsAreNotForwarded(t *testing.T) {
	n := seamsNode(t)
	before := n.counted("login-per-ip")
	headers := []string{
		"X-Forwarded-Host", "X_Forwarded_Host", "X-Host", "X-Forwarded-Server", "X-Original-Host",
		"X-Original-URL", "X-Rewrite-URL", "x.original.url",
	}
	var b strings.Builder
	for _, h := range headers {
		b.WriteString(h + ": login.example.com\r\n")
	}
	resp := raw(t, n.addr, "POST /login HTTP/1.1\r\nHost: other\r\n"+b.String()+"Content-Length: 0\r\nConnection: close\r\n\r\n")
	if st := rawStatus(t, resp); st != 401 {
		t.Fatalf("got %d, want the origin's 401", st)
	}
	if got := n.counted("login-per-ip") - before; got != 0 {
		t.Errorf("login-per-ip counted %d, want 0 (the host is other)", got)
	}
	for k, v := range n.last(t).Headers {
		if cgiName(k) != "HOST" && strings.Contains(v, "login.example.com") {
			t.Errorf("origin received %s: %q", k, v)
		}
	}
}

// cgiName is a header name as CGI, PHP ($_SERVER), WSGI (Django's META)
// and Rack name it: upper case, every byte but a letter or digit as "_"
// (RFC 3875 §4.1.18; PHP also maps "." and " " to "_").
func cgiName(k string) string {
	b := []byte(strings.ToUpper(k))
	for i, c := range b {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// TestMethodOverrideSpellings: an override header the edge did not match
// under never reaches the origin, whatever its spelling; PHP, Django and
// Rack read X_HTTP_Method_Override as X-HTTP-Method-Override.
func TestMethodOverrideSpellings(t *testing.T) {
	n := seamsNode(t)
	overrides := map[string]bool{"X_HTTP_METHOD_OVERRIDE": true, "X_HTTP_METHOD": true, "X_METHOD_OVERRIDE": true}
	tests := []struct {
		name   string
		header string
	}{
		{"canonical", "X-HTTP-Method-Override"},
		{"lower case", "x-http-method-override"},
		{"underscores", "X_HTTP_Method_Override"},
		{"underscores lower", "x_http_method_override"},
		{"one underscore", "X-HTTP_Method-Override"},
		{"dots", "X.HTTP.Method.Override"},
		{"x-http-method underscores", "X_HTTP_METHOD"},
		{"x-method-override underscores", "X_Method_Override"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.counted("login-per-ip")
			resp := raw(t, n.addr, fmt.Sprintf("GET /login HTTP/1.1\r\nHost: login.example.com\r\n%s: POST\r\nX-Forwarded-For: 198.51.100.%d\r\nConnection: close\r\n\r\n", tt.header, i+1))
			rawStatus(t, resp)
			matched := n.counted("login-per-ip") - before
			for k := range n.last(t).Headers {
				if overrides[cgiName(k)] && matched == 0 {
					t.Errorf("origin received %s, which the edge did not match as POST", k)
				}
			}
		})
	}
}

// TestEdgeHeadersInEverySpellingAreRemoved: no client-sent header an origin
// reads as X-Edge-* reaches it, however long its name and however spelled.
func TestEdgeHeadersInEverySpellingAreRemoved(t *testing.T) {
	n := seamsNode(t)
	names := []string{
		"X-Edge-Visitor", "x-edge-bot-score", "X_Edge_Visitor", "X.Edge.Visitor", "X-Edge_Bot-Reasons",
		"X-Edge-" + strings.Repeat("a", 58), "X-Edge-" + strings.Repeat("b", 200), "X_EDGE_" + strings.Repeat("C", 100),
		"X.Forwarded.For", "X-Real_IP",
	}
	var b strings.Builder
	for _, h := range names {
		b.WriteString(h + ": spoofed\r\n")
	}
	resp := raw(t, n.addr, "GET /api/x HTTP/1.1\r\nHost: x\r\n"+b.String()+"Connection: close\r\n\r\n")
	if st := rawStatus(t, resp); st != 200 {
		t.Fatalf("got %d, want 200", st)
	}
	for k, v := range n.last(t).Headers {
		if v == "spoofed" || strings.Contains(v, "spoofed") {
			t.Errorf("origin received client-sent %s", k)
		}
	}
}

// TestNoContentTypeIsAddedToABody: the origin sees the client's
// Content-Type exactly: none when none was sent (fasthttp's client would
// add application/octet-stream).
func TestNoContentTypeIsAddedToABody(t *testing.T) {
	n := seamsNode(t)
	tests := []struct {
		name, header, want string // want "" for no Content-Type at all
	}{
		{"none", "", ""},
		{"json", "Content-Type: application/json\r\n", "application/json"},
		{"odd", "Content-Type: text/x-odd; a=b\r\n", "text/x-odd; a=b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := raw(t, n.addr, "POST /api/x HTTP/1.1\r\nHost: x\r\n"+tt.header+"Content-Length: 5\r\nConnection: close\r\n\r\nhello")
			if st := rawStatus(t, resp); st != 200 {
				t.Fatalf("got %d, want 200", st)
			}
			got, ok := n.last(t).Headers["Content-Type"]
			if tt.want == "" && ok {
				t.Errorf("origin received Content-Type %q; the client sent none", got)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("origin received Content-Type %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWindowsPathSpellings: a segment's trailing dots and spaces, which
// Windows origins (IIS) strip, never move a request out of its rule; a
// segment of only dots and spaces (other than "." and "..") is refused.
// The demo origin does not strip them (it answers 404); the edge must
// count them as the route a Windows origin would serve.
func TestWindowsPathSpellings(t *testing.T) {
	n := seamsNode(t)
	const (
		login   = "counted as POST /login"
		denied  = "403 from git-denied"
		refused = "400"
	)
	tests := []struct{ path, want string }{
		{"/login.", login},
		{"/login..", login},
		{"/login%2E", login},
		{"/login%2e%2E", login},
		{"/login%20", login},
		{"/login.%20.", login},
		{"/LOGIN./", login},
		{"/login.;x=1", login},
		{"/login%2E%3Bx", login},
		{"/x/../login.", login},
		{"/.git./config", denied},
		{"/.git%20/config", denied},
		{"/.git../HEAD", denied},
		{"/.GIT%2e/config", denied},
		{"/.../login", refused},
		{"/a/..%20/login", refused},
		{"/%20/login", refused},
		{"/x/.%20/login", refused},
		{"/x%2F...%2Flogin", refused},
	}
	for i, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			before, served := n.counted("login-per-ip"), n.originTotal(t)
			st := rawStatus(t, raw(t, n.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: login.example.com\r\nX-Forwarded-For: 198.51.100.%d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", tt.path, i+1)))
			counted := n.counted("login-per-ip") - before
			switch tt.want {
			case login:
				if counted != 1 {
					t.Errorf("login-per-ip counted it %d times, want 1 (status %d)", counted, st)
				}
			case denied, refused:
				if want := map[string]int{denied: 403, refused: 400}[tt.want]; st != want {
					t.Errorf("got %d, want %d", st, want)
				}
				if n.originTotal(t) != served {
					t.Errorf("a refused request reached the origin")
				}
			}
		})
	}
}

// TestBadIdentityIsNotCountedAsDeny: a 400 for an identity is counted as
// invalid_identity or missing_identity, as the outcome names it, never as
// deny (docs/policy.md, "Decisions").
func TestBadIdentityIsNotCountedAsDeny(t *testing.T) {
	n := startNode(t, loadPolicy(t, "testdata/fixtures/policies/otp.hcl"), nodeOptions{})
	tests := []struct {
		name, body, decision string
	}{
		{"invalid phone", `{"phone":"call me maybe"}`, "invalid_identity"},
		{"missing phone", `{"other":"x"}`, "missing_identity"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deny, want := n.decisions("otp-send-per-phone", "deny"), n.decisions("otp-send-per-phone", tt.decision)
			r := do(t, "POST", "http://"+n.addr+"/otp/send", tt.body, "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
			if r.status != 400 {
				t.Fatalf("got %d %q, want 400", r.status, r.body)
			}
			if got := n.decisions("otp-send-per-phone", tt.decision) - want; got != 1 {
				t.Errorf("%s counted %d, want 1", tt.decision, got)
			}
			if got := n.decisions("otp-send-per-phone", "deny") - deny; got != 0 {
				t.Errorf("deny counted %d, want 0", got)
			}
		})
	}
}
