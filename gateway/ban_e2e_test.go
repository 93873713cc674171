package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules/memstore"
)

const banPolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32"]
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
  ban_scope = "sensitive"
}
rule "signup-per-ip" {
  methods   = ["POST"]
  paths     = ["/signup"]
  key       = ["ip"]
  limit     = 100
  period    = "1m"
  sensitive = true
}
rule "api-per-ip" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 100
  period = "1m"
  ban    = "10m"
}
`

// TestBanRefusesEverySensitiveRouteUntilItEnds: a client that trips the
// login rule is refused on /login and /signup (ban_scope = "sensitive")
// for 15 minutes, though the login counter itself recovers in seconds;
// the ban survives a reload of the policy and a flood of other clients'
// keys; another client is never refused; ordinary routes are outside the
// scope. A rule banning on its own route refuses the key there only.
func TestBanRefusesEverySensitiveRouteUntilItEnds(t *testing.T) {
	p, diags := builtin.Load("ban.hcl", []byte(banPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ms, err := memstore.New(memstore.Options{MaxKeys: 300, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	n := startNode(t, p, nodeOptions{clock: clk, store: ms})
	post := func(path, client string) int {
		t.Helper()
		return do(t, "POST", "http://"+n.addr+path, `{}`, "X-Forwarded-For", client).status
	}
	const attacker, other = "198.51.100.7", "203.0.113.9"
	for i := range 3 {
		if got := post("/login", attacker); got != http.StatusUnauthorized {
			t.Fatalf("login %d: got %d, want 401 from the origin", i+1, got)
		}
	}
	if got := post("/login", attacker); got != http.StatusTooManyRequests {
		t.Fatalf("the 4th login: got %d, want 429 (the rule trips: the ban starts)", got)
	}
	clk.Advance(5 * time.Minute) // the GCRA counter is long full again
	if got := post("/login", attacker); got != http.StatusTooManyRequests {
		t.Errorf("login 5 minutes into the ban: got %d, want 429", got)
	}
	if got := post("/signup", attacker); got != http.StatusTooManyRequests {
		t.Errorf("signup during the ban: got %d, want 429 (ban_scope = \"sensitive\")", got)
	}
	if got := do(t, "GET", "http://"+n.addr+"/api/items", "", "X-Forwarded-For", attacker).status; got != http.StatusOK {
		t.Errorf("an ordinary route during the ban: got %d, want 200 (outside the scope)", got)
	}
	if got := post("/signup", other); got != http.StatusOK {
		t.Errorf("another client: got %d, want 200", got)
	}
	// A reload (the same policy, re-read) keeps the ban: it is keyed by
	// the rule's name.
	p2, diags := builtin.Load("ban.hcl", []byte(banPolicy+"\n# reloaded\n"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if err := n.srv.Reload(p2); err != nil {
		t.Fatal(err)
	}
	// A flood of other clients' keys on the login rule, past the store's
	// budget: a ban is a sensitive counter still refusing, never evicted.
	for i := range 400 {
		post("/login", fmt.Sprintf("10.9.%d.%d", i/250, i%250+1))
	}
	clk.Advance(9 * time.Minute)
	if got := post("/signup", attacker); got != http.StatusTooManyRequests {
		t.Errorf("signup 14 minutes into the ban, after a reload and a flood: got %d, want 429", got)
	}
	clk.Advance(time.Minute + time.Second)
	if got := post("/signup", attacker); got != http.StatusOK {
		t.Errorf("signup after the ban: got %d, want 200", got)
	}
	if got := post("/login", attacker); got != http.StatusUnauthorized {
		t.Errorf("login after the ban: got %d, want 401 from the origin", got)
	}

	// An own-route ban: the API rule's ban refuses the key on /api only.
	const noisy = "192.0.2.200"
	for range 100 {
		do(t, "GET", "http://"+n.addr+"/api/items", "", "X-Forwarded-For", noisy)
	}
	if got := do(t, "GET", "http://"+n.addr+"/api/items", "", "X-Forwarded-For", noisy).status; got != http.StatusTooManyRequests {
		t.Fatalf("the 101st API call: got %d, want 429", got)
	}
	clk.Advance(2 * time.Minute)
	r := do(t, "GET", "http://"+n.addr+"/api/items", "", "X-Forwarded-For", noisy)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "480" {
		t.Errorf("an API call 2 minutes into its 10-minute ban: got %d Retry-After %q, want 429 with 480", r.status, r.header.Get("Retry-After"))
	}
	if got := post("/signup", noisy); got != http.StatusOK {
		t.Errorf("signup by the API-banned client: got %d, want 200 (its ban is the API rule's own)", got)
	}
	// The trip, the login and the two signups refused during the ban are
	// login-per-ip's denies.
	if got := n.decisions("login-per-ip", "deny"); got != 4 {
		t.Errorf("login-per-ip deny count %d, want 4: the ban's refusals count as the rule's denies", got)
	}
}
