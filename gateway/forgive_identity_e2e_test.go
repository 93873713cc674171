package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	forgivebehaviour "github.com/edge-gateway/edge/behaviour/forgive"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
)

// identityPolicy is login.hcl with a rule keyed on the account alone, and
// the store given.
func identityPolicy(t testing.TB, store string) *rules.Policy {
	t.Helper()
	return loadPolicy(t, loginFixture, "\nidentity {", store+"\nidentity {", "# ---- Tests (edge test)", `rule "login-failures-account" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["account"]
  count     = "failures"
  algorithm = "sliding_window"
  limit     = 8
  period    = "15m"
  sensitive = true
}

# ---- Tests (edge test)`)
}

// forgiveAs sends POST /admin/forgive to admin with token as actor.
func forgiveAs(t testing.TB, admin, token, body string) (reply, identityAnswer) {
	t.Helper()
	r := do(t, "POST", "http://"+admin+"/admin/forgive", body, "Authorization", "Bearer "+token, "X-Edge-Actor", "support-jane")
	var ans identityAnswer
	if r.status == http.StatusOK {
		if err := json.Unmarshal([]byte(r.body), &ans); err != nil {
			t.Fatalf("%v: %s", err, r.body)
		}
	}
	return r, ans
}

func forgivenRules(a identityAnswer) []string {
	var out []string
	for _, f := range a.Forgiven {
		out = append(out, f.Rule)
	}
	slices.Sort(out)
	return out
}

// loginAt sends one login to addr, as loginRaw does to a node.
func loginAt(t *testing.T, addr, client, username, password string) int {
	t.Helper()
	return rawStatus(t, loginRaw(t, &node{addr: addr}, client, username, password))
}

// TestForgiveIdentityOnEveryRule: through the real server with the memory
// store, one forgive of an identity clears it on every rule keyed on it:
// the account alone clears the account's rule and names the account and
// address rule it skipped (it needs the address); the account and the
// address clear every rule keyed on either, and the customer logs in; one
// audit line per call holds the actor, the reason and the keys' hashes,
// never the account or the address. Bad identities are 400s that clear
// nothing.
func TestForgiveIdentityOnEveryRule(t *testing.T) {
	logs := &syncBuffer{}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := identityPolicy(t, "")
	n := startNode(t, p, nodeOptions{clock: clock, adminToken: forgiveToken, logs: logs})
	const client, account = "203.0.113.7", "alice@example.com"
	for i := range 5 {
		if got := loginAt(t, n.addr, client, account, "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("failure %d: got %d, want 401", i+1, got)
		}
	}
	if got := loginAt(t, n.addr, client, account, "letmein-demo"); got != http.StatusTooManyRequests {
		t.Fatalf("after five failures: got %d, want 429", got)
	}

	r, ans := forgiveAs(t, n.admin, forgiveToken, `{"identity": {"account": " Alice@Example.COM"}, "reason": "ticket 1"}`)
	if r.status != http.StatusOK || !slices.Equal(forgivenRules(ans), []string{"login-failures-account"}) ||
		len(ans.Skipped) != 1 || ans.Skipped[0].Rule != "login-failures-account-client" || !slices.Equal(ans.Skipped[0].Missing, []string{"ip"}) || ans.Scope != "node" {
		t.Fatalf("forgive the account alone: got %d %s, want login-failures-account forgiven, login-failures-account-client skipped for its ip", r.status, r.body)
	}
	if got := loginAt(t, n.addr, client, account, "letmein-demo"); got != http.StatusTooManyRequests {
		t.Fatalf("after forgiving the account alone: got %d, want 429 (the pair's rule was skipped)", got)
	}

	r, ans = forgiveAs(t, n.admin, forgiveToken, `{"identity": {"account": "alice@example.com", "ip": "203.0.113.7"}, "reason": "ticket 2"}`)
	want := []string{"login-accounts-per-ip", "login-failures-account", "login-failures-account-client", "login-per-client", "signup-per-network"}
	if r.status != http.StatusOK || !slices.Equal(forgivenRules(ans), want) || len(ans.Skipped) != 0 {
		t.Fatalf("forgive the account and the address: got %d %s, want %v", r.status, r.body, want)
	}
	if got := loginAt(t, n.addr, client, account, "letmein-demo"); got != http.StatusOK {
		t.Fatalf("after forgiving the account and the address: got %d, want 200", got)
	}

	out := logs.String()
	var audits []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, `"audit":"forgive"`) {
			audits = append(audits, line)
		}
	}
	k, err := n.srv.ext.pardoner.KeyFromText(n.srv.engine, p, p.Rule("login-failures-account-client"), map[string]string{"account": account, "ip": client})
	if err != nil {
		t.Fatal(err)
	}
	if len(audits) != 2 || !strings.Contains(audits[1], `"actor":"support-jane"`) || !strings.Contains(audits[1], `"reason":"ticket 2"`) ||
		!strings.Contains(audits[1], `"identity":"account,ip"`) || !strings.Contains(audits[1], fmt.Sprintf(`"login-failures-account-client:%x"`, k[9:])) ||
		!strings.Contains(audits[0], `"skipped":["login-failures-account-client"]`) {
		t.Errorf("want two audit lines, the second with the actor, reason, identity names and the keys' hashes:\n%s", strings.Join(audits, ""))
	}
	for _, raw := range []string{client, account, "Alice@Example.COM", "lice@example"} {
		if strings.Contains(out, raw) {
			t.Errorf("the logs hold %q:\n%s", raw, out)
		}
	}

	for _, tt := range []struct{ body, want string }{
		{`{"identity": {"account": "alice@example.com", "ip": "nope"}, "reason": "r"}`, "unable to parse IP; nothing forgiven"},
		{`{"identity": {"header:X-Api-Key": "k"}, "reason": "r"}`, "nothing to forgive"},
		{`{"identity": {"visitor": "abc", "visitor_ip": "203.0.113.7"}, "reason": "r"}`, "no visitor block"},
		{`{"identity": {"ip": "203.0.113.7", "visitor_ip": "203.0.113.7"}, "reason": "r"}`, `\"visitor_ip\" goes with \"visitor\" only`},
		{`{"identity": {"account": ""}, "reason": "r"}`, "is empty"},
		{`{"rule": "login-per-client", "identity": {"ip": "203.0.113.7"}, "reason": "r"}`, "not both"},
	} {
		if r, _ := forgiveAs(t, n.admin, forgiveToken, tt.body); r.status != http.StatusBadRequest || !strings.Contains(r.body, tt.want) {
			t.Errorf("%s: got %d %s, want 400 with %q", tt.body, r.status, r.body, tt.want)
		}
	}
}

// TestForgiveIdentityVisitor: a visitor locked out of login-per-visitor is
// forgiven by its cookie's value and the address it was at; another
// visitor behind the same address stays locked; a cookie that does not
// verify is a 400.
func TestForgiveIdentityVisitor(t *testing.T) {
	t.Setenv("EDGE_VISITOR_SECRETS", secretA+","+secretB)
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startNode(t, loadPolicy(t, visitorsPolicy), nodeOptions{clock: clk, adminToken: forgiveToken})
	login := func(cookie string) int {
		return do(t, "POST", "http://"+n.addr+"/login", `{"username":"bob","password":"x"}`, withCookie(cookie)...).status
	}
	mint := func() string {
		clk.Advance(time.Minute) // the mint budget refills
		c := cookieOf(do(t, "GET", "http://"+n.addr+"/api/x", ""))
		if c == "" {
			t.Fatal("no visitor cookie minted")
		}
		return c
	}
	alice, bob := mint(), mint()
	for _, c := range []string{alice, bob} {
		for range 5 {
			login(c)
		}
		if got := login(c); got != http.StatusTooManyRequests {
			t.Fatalf("a visitor's sixth login: got %d, want 429", got)
		}
	}
	r, ans := forgiveAs(t, n.admin, forgiveToken, fmt.Sprintf(`{"identity": {"visitor": %q, "visitor_ip": "127.0.0.1"}, "reason": "ticket 3"}`, alice))
	if r.status != http.StatusOK || !slices.Equal(forgivenRules(ans), []string{"api-per-visitor", "login-per-visitor"}) {
		t.Fatalf("forgive the visitor: got %d %s, want its two rules", r.status, r.body)
	}
	if got := login(alice); got == http.StatusTooManyRequests {
		t.Errorf("the forgiven visitor: got 429, want its login through")
	}
	if got := login(bob); got != http.StatusTooManyRequests {
		t.Errorf("another visitor at the same address: got %d, want 429 still", got)
	}
	// One rule, by the cookie at its address.
	for range 6 {
		login(bob)
	}
	if r := do(t, "POST", "http://"+n.admin+"/admin/forgive", fmt.Sprintf(`{"rule": "login-per-visitor", "key": {"visitor": %q, "visitor_ip": "127.0.0.1"}, "reason": "ticket 5"}`, bob),
		"Authorization", "Bearer "+forgiveToken); r.status != http.StatusOK {
		t.Fatalf("forgive one rule of a visitor: got %d %s, want 200", r.status, r.body)
	}
	if got := login(bob); got == http.StatusTooManyRequests {
		t.Errorf("the visitor forgiven on one rule: got 429, want its login through")
	}
	if r, _ := forgiveAs(t, n.admin, forgiveToken, `{"identity": {"visitor": "`+alice[:len(alice)-2]+`xx", "visitor_ip": "127.0.0.1"}, "reason": "r"}`); r.status != http.StatusBadRequest || !strings.Contains(r.body, "does not verify") {
		t.Errorf("a tampered cookie: got %d %s, want 400", r.status, r.body)
	}
	if r, _ := forgiveAs(t, n.admin, forgiveToken, fmt.Sprintf(`{"identity": {"visitor": %q}, "reason": "r"}`, alice)); r.status != http.StatusBadRequest || !strings.Contains(r.body, "visitor_ip") {
		t.Errorf("a visitor without its address: got %d %s, want 400", r.status, r.body)
	}
}

// TestForgiveIdentityAcrossFleet: two nodes on a real redis-server. An
// account locked out through node b is forgiven, with an exemption, by
// one call to node a: node b lets the customer in at once (the counters
// are the fleet's), and once it has read the fleet's record, holds the
// exempt identity to no limit either (eight failures, where five lock);
// a's one audit line says "fleet" and holds hashes only.
func TestForgiveIdentityAcrossFleet(t *testing.T) {
	r := testredis.Start(t)
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	p := identityPolicy(t, fmt.Sprintf("store \"redis\" {\n  url     = %q\n  timeout = \"1s\"\n}\n", r.URL()))
	logs := &syncBuffer{}
	nodes := startDryRunFleetLogged(t, p, clk, []io.Writer{logs, nil})
	a, b := nodes[0], nodes[1]
	const client, account = "203.0.113.7", "alice@example.com"
	for range 5 {
		loginAt(t, b.addr, client, account, "wrong")
	}
	if got := loginAt(t, a.addr, client, account, "letmein-demo"); got != http.StatusTooManyRequests {
		t.Fatalf("node a after five failures on node b: got %d, want 429 (one shared count)", got)
	}
	rep, ans := forgiveAs(t, a.admin, dryToken, `{"identity": {"account": "alice@example.com", "ip": "203.0.113.7"}, "for": "1h", "reason": "ticket 4"}`)
	if rep.status != http.StatusOK || ans.Scope != "fleet" || ans.ExemptUntil != "2026-12-02T01:00:00Z" || len(ans.Forgiven) != 5 {
		t.Fatalf("forgive on node a: got %d %s, want five rules forgiven for the fleet, exempt for an hour", rep.status, rep.body)
	}
	if got := loginAt(t, b.addr, client, account, "letmein-demo"); got != http.StatusOK {
		t.Fatalf("node b right after node a's forgive: got %d, want 200", got)
	}
	eventually(t, "node b never read node a's exemptions", func() bool {
		return len(forgivebehaviour.Exempting(b.srv.engine, b.srv.Policy(), clk.Now())) == len(ans.Forgiven)
	})
	for i := range 8 {
		if got := loginAt(t, b.addr, client, account, "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("exempt failure %d on node b: got %d, want 401 (the fleet's exemption holds there)", i+1, got)
		}
	}
	clk.Advance(time.Hour) // the exemption ends, on every node
	for range 5 {
		loginAt(t, b.addr, client, account, "wrong")
	}
	if got := loginAt(t, b.addr, client, account, "letmein-demo"); got != http.StatusTooManyRequests {
		t.Errorf("node b after the exemption and five failures: got %d, want 429", got)
	}
	out := logs.String()
	if strings.Count(out, `"audit":"forgive"`) != 1 || !strings.Contains(out, `"scope":"fleet"`) || !strings.Contains(out, `"exempt_until":"2026-12-02T01:00:00Z"`) {
		t.Errorf("node a's log: want one forgive audit line, scope fleet, with its end:\n%s", out)
	}
	for _, raw := range []string{client, account} {
		if strings.Contains(out, raw) {
			t.Errorf("node a's log holds %q:\n%s", raw, out)
		}
	}
}
