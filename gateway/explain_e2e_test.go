package gateway

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

const explainPolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32"]
}
identity {
  account = ["json:username", "form:username"]
}
visitor {
  cookie      = "__edge_vid"
  mint_limit  = 2
  mint_period = "1h"
  secure      = false
}
rule "login-per-ip" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 3
  period    = "1m"
  sensitive = true
  ban       = "15m"
}
rule "login-failures-account" {
  methods        = ["POST"]
  paths          = ["/login"]
  key            = ["account"]
  count          = "failures"
  algorithm      = "sliding_window"
  limit          = 50
  period         = "15m"
  known_visitors = "30d"
  known_by       = ["visitor"]
  sensitive      = true
}
`

const explainToken = "explain-test-token"

// explainNode starts a node on explainPolicy with its own memory store
// under clk.
func explainNode(t *testing.T, clk *fakeClock) *node {
	t.Helper()
	p, diags := builtin.Load("explain.hcl", []byte(explainPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return startNode(t, p, nodeOptions{clock: clk, store: ms, adminToken: explainToken})
}

// explained is an explain answer as a client decodes it: the gateway's
// fields and the extensions' (botscore's bot_score and bot_reasons).
type explained struct {
	explainAnswer
	BotScore   *int     `json:"bot_score"`
	BotReasons []string `json:"bot_reasons"`
}

// explain posts body to n's /admin/explain and returns the answer, decoded
// and as sent.
func explain(t *testing.T, n *node, body string) (explained, string) {
	t.Helper()
	r := do(t, "POST", "http://"+n.admin+"/admin/explain", body, "Authorization", "Bearer "+explainToken)
	if r.status != http.StatusOK {
		t.Fatalf("explain %s: got %d %s", body, r.status, r.body)
	}
	var a explained
	if err := json.Unmarshal([]byte(r.body), &a); err != nil {
		t.Fatalf("explain answer %q: %v", r.body, err)
	}
	return a, r.body
}

func (a explainAnswer) match(t *testing.T, rule string) explainMatch {
	t.Helper()
	for _, m := range a.Matches {
		if m.Rule == rule {
			return m
		}
	}
	t.Fatalf("no match for %s in %+v", rule, a)
	return explainMatch{}
}

func explainLogin(client, account, password string) string {
	return fmt.Sprintf(`{"method": "POST", "path": "/login", "host": "example.com", "from": %q, "json": {"username": %q, "password": %q}}`,
		client, account, password)
}

// TestExplainConsumesNothing: two nodes on one policy and one clock see
// the same real traffic; one of them also answers explains of the next
// request, many times, at every step up to and past login-per-ip's limit.
// The real requests that follow get on it exactly the decisions they get
// on the control node, and explain reports each of them before it
// happens: forward with the counter's remaining while under the limit,
// then deny naming the refusing rule with its retry time. Nor does
// explaining a refused request start the rule's ban: with the counter
// recovered, the explained node admits the client, while the control node,
// whose real refusal started the ban, refuses it.
func TestExplainConsumesNothing(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	explained, control := explainNode(t, clk), explainNode(t, clk)
	const client, account = "198.51.100.7", "alice@example.com"
	login := func(n *node) int {
		t.Helper()
		return do(t, "POST", "http://"+n.addr+"/login", `{"username":"`+account+`","password":"wrong"}`, "X-Forwarded-For", client).status
	}
	for i := range 3 {
		for range 5 {
			a, _ := explain(t, explained, explainLogin(client, account, "wrong"))
			m := a.match(t, "login-per-ip")
			if a.Verdict != "forward" || m.Outcome != "allow" || m.Remaining == nil || *m.Remaining != int64(3-i) {
				t.Fatalf("explain before login %d: verdict %s, %+v; want forward, allow, remaining %d", i+1, a.Verdict, m, 3-i)
			}
		}
		got, want := login(explained), login(control)
		if got != want || got != http.StatusUnauthorized {
			t.Fatalf("login %d: got %d on the explained node, %d on the control node, want both 401 from the origin", i+1, got, want)
		}
	}
	for range 5 {
		a, _ := explain(t, explained, explainLogin(client, account, "wrong"))
		m := a.match(t, "login-per-ip")
		if a.Verdict != "deny" || a.Status != http.StatusTooManyRequests || a.Refusing != "login-per-ip" || m.Outcome != "deny" || m.RetryAfter == "" {
			t.Fatalf("explain of the 4th login: %+v; want deny (429) refused by login-per-ip with a retry_after", a)
		}
		if ra, err := time.ParseDuration(m.RetryAfter); err != nil || ra <= 0 || ra > 20*time.Second {
			t.Errorf("retry_after %q, want GCRA's 20s emission interval at most", m.RetryAfter)
		}
	}
	if got := login(control); got != http.StatusTooManyRequests {
		t.Fatalf("the control node's 4th login: got %d, want 429", got)
	}
	clk.Advance(2 * time.Minute) // login-per-ip's counter is full again; the control node's ban lasts
	if got := login(control); got != http.StatusTooManyRequests {
		t.Errorf("the control node, banned by its real refusal: got %d, want 429", got)
	}
	if got := login(explained); got != http.StatusUnauthorized {
		t.Errorf("the explained node after explains of a refused request: got %d, want 401 (no ban was written)", got)
	}
	// A ban is reported as what refuses: the control node's explain sees it.
	a, _ := explain(t, control, explainLogin(client, account, "wrong"))
	if a.Verdict != "deny" || a.Refusing != "login-per-ip" || a.RetryAfter == "" {
		t.Errorf("explain on the banned node: %+v, want deny by login-per-ip with the ban's time left", a)
	}
}

// TestExplainShowsHashesOnly: the answer names keys as hex of the 24-byte
// counter keys, never the account or the address (in any spelling the
// answer could carry them: as sent, folded, or hex-encoded); one account
// has one key whatever the client, and another account another key under
// the same rule prefix.
func TestExplainShowsHashesOnly(t *testing.T) {
	n := explainNode(t, &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	const client, account = "203.0.113.7", "Alice@Example.com"
	a, body := explain(t, n, explainLogin(client, account, "hunter2"))
	for _, leak := range []string{client, account, strings.ToLower(account), "hunter2",
		hex.EncodeToString([]byte(client)), hex.EncodeToString([]byte(strings.ToLower(account)))} {
		if strings.Contains(strings.ToLower(body), strings.ToLower(leak)) {
			t.Errorf("the answer carries %q:\n%s", leak, body)
		}
	}
	acct := a.match(t, "login-failures-account").Key
	ip := a.match(t, "login-per-ip").Key
	for _, k := range []string{acct, ip} {
		if b, err := hex.DecodeString(k); err != nil || len(b) != len(rules.Key{}) {
			t.Errorf("key %q: want hex of %d bytes", k, len(rules.Key{}))
		}
	}
	b, _ := explain(t, n, explainLogin("203.0.113.99", account, "x"))
	if got := b.match(t, "login-failures-account").Key; got != acct {
		t.Errorf("the account from another client: key %s, want %s", got, acct)
	}
	if got := b.match(t, "login-per-ip").Key; got == ip {
		t.Errorf("another client has the first one's IP key %s", got)
	}
	c, _ := explain(t, n, explainLogin(client, "bob@example.com", "x"))
	other := c.match(t, "login-failures-account").Key
	if other == acct || other[:16] != acct[:16] {
		t.Errorf("bob's key %s beside alice's %s: want another key under the same rule prefix", other, acct)
	}
}

// TestExplainLeavesMintBudgetAndMarkers: explaining cookieless requests
// spends none of the IP's mint budget (two real requests then get the two
// cookies mint_limit allows, the third none); explaining a login never
// records the known-visitor marker (no origin answer, no settle), while a
// real successful login does, and explain then reports the visitor known.
func TestExplainLeavesMintBudgetAndMarkers(t *testing.T) {
	n := explainNode(t, &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	const client = "192.0.2.10"
	for range 10 {
		explain(t, n, `{"method": "GET", "path": "/login", "from": "`+client+`"}`)
	}
	var cookies []string
	for range 3 {
		cookies = append(cookies, cookieOf(do(t, "GET", "http://"+n.addr+"/login", "", "X-Forwarded-For", client)))
	}
	if cookies[0] == "" || cookies[1] == "" || cookies[2] != "" {
		t.Fatalf("cookies after 10 explains: %q, want two minted (mint_limit) and then none", cookies)
	}

	withVID := func(password string) string {
		return fmt.Sprintf(`{"method": "POST", "path": "/login", "host": "example.com", "from": %q, "headers": {"Cookie": "__edge_vid=%s"}, "json": {"username": "alice@example.com", "password": %q}}`,
			client, cookies[0], password)
	}
	for range 5 {
		a, _ := explain(t, n, withVID("letmein-demo"))
		if m := a.match(t, "login-failures-account"); m.Known {
			t.Fatalf("explain made the visitor known: %+v", m)
		}
	}
	if got := do(t, "POST", "http://"+n.addr+"/login", `{"username":"alice@example.com","password":"letmein-demo"}`,
		"X-Forwarded-For", client, "Cookie", "__edge_vid="+cookies[0]).status; got != http.StatusOK {
		t.Fatalf("the real login: got %d, want 200", got)
	}
	a, _ := explain(t, n, withVID("anything"))
	if m := a.match(t, "login-failures-account"); !m.Known {
		t.Errorf("after a real successful login explain does not see the marker: %+v", m)
	}
}

// TestExplainBotScoreIsTheRealOne: on bots.hcl, explain's bot score and
// reasons for a described request are those the origin receives
// (X-Edge-Bot-Score, X-Edge-Bot-Reasons) for the same request sent on the
// wire, header order included; and the explained signup does not spend
// signup-bots' one an hour.
func TestExplainBotScoreIsTheRealOne(t *testing.T) {
	n := startNode(t, loadPolicy(t, botsFixture), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, adminToken: explainToken})
	const client = "198.51.100.7"
	a, _ := explain(t, n, `{"method": "POST", "path": "/signup", "host": "example.com", "from": "127.0.0.1",
		"headers": {"X-Forwarded-For": "`+client+`", "User-Agent": "python-requests/2.31.0", "Accept-Encoding": "gzip, deflate", "Accept": "*/*", "Connection": "close"}}`)
	if a.BotScore == nil || *a.BotScore >= 30 {
		t.Fatalf("explain's bot score %v, want one under 30 for python-requests", a.BotScore)
	}
	if m := a.match(t, "signup-bots"); a.Verdict != "forward" || m.Outcome != "allow" {
		t.Fatalf("explain of the first signup: %+v", a)
	}
	resp := raw(t, n.addr, "POST /signup HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: "+client+
		"\r\nUser-Agent: python-requests/2.31.0\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	if got := rawStatus(t, resp); got != http.StatusOK {
		t.Fatalf("the real first signup: got %d, want 200 (the explain spent nothing)", got)
	}
	last := n.last(t)
	if got := strconv.Itoa(*a.BotScore); last.Headers["X-Edge-Bot-Score"] != got {
		t.Errorf("explain's score %s, the origin got X-Edge-Bot-Score %q", got, last.Headers["X-Edge-Bot-Score"])
	}
	if got := strings.Join(a.BotReasons, ","); last.Headers["X-Edge-Bot-Reasons"] != got {
		t.Errorf("explain's reasons %q, the origin got X-Edge-Bot-Reasons %q", got, last.Headers["X-Edge-Bot-Reasons"])
	}
	b, _ := explain(t, n, `{"method": "POST", "path": "/signup", "host": "example.com", "from": "127.0.0.1",
		"headers": {"X-Forwarded-For": "`+client+`", "User-Agent": "python-requests/2.31.0", "Accept-Encoding": "gzip, deflate", "Accept": "*/*", "Connection": "close"}}`)
	if b.Verdict != "deny" || b.Refusing != "signup-bots" {
		t.Errorf("explain of the second signup: %+v, want deny by signup-bots", b)
	}
}

// TestExplainRefusesBadInput: a described request that is not one (two
// bodies, a header value with a line break, a missing address) is a 400
// naming the field, never a request built another way.
func TestExplainRefusesBadInput(t *testing.T) {
	n := explainNode(t, &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	for _, body := range []string{
		`{"path": "/login", "from": "192.0.2.1", "json": {}, "body": "x"}`,
		`{"path": "/login", "from": "192.0.2.1", "headers": {"X-A": "a\r\nX-Forwarded-For: 1.2.3.4"}}`,
		`{"path": "/login"}`,
		`{"path": "login", "from": "192.0.2.1"}`,
		`{"path": "/login", "from": "192.0.2.1", "headers": {"Content-Length": "5"}}`,
		`{"path": "/login", "from": "192.0.2.1", "headers": {"X-A": 1}}`,
	} {
		r := do(t, "POST", "http://"+n.admin+"/admin/explain", body, "Authorization", "Bearer "+explainToken)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: got %d %s, want 400", body, r.status, r.body)
		}
	}
}
