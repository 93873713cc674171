package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
)

// Exemptions through the real server (docs/policy.md, "action"): the
// office network is never refused by the login rules it skips, a
// monitoring probe is exempt from the API limit only with its header and
// only from its network, and skip = ["*"] passes over every rule, the
// sensitive and deny rules too. The clock is injected and stands still, so
// no counter refills during a test. Clients are named by X-Forwarded-For from
// the trusted loopback peer, as a load balancer in front of the edge would.

const exemptE2EPolicy = `
edge {
  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}

rule "login-per-ip" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 5
  period    = "15m"
  sensitive = true
}

rule "api-per-ip" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 3
  period = "1m"
}

rule "no-admin" {
  paths  = ["/admin"]
  action = "deny"
}

# Written after the rules they skip: skipping does not depend on order.
rule "office" {
  action = "skip"
  skip   = ["login-per-ip"]
  when { ip_in = ["10.0.0.0/8", "2001:db8::/32"] }
}

rule "monitoring" {
  action = "skip"
  skip   = ["api-per-ip"]
  paths  = ["/api/health"]
  when {
    ip_in          = ["198.51.100.0/24"]
    header_present = ["X-Monitoring"]
  }
}

rule "partner" {
  action = "skip"
  skip   = ["*"]
  when {
    ip_in         = ["192.0.2.0/24"]
    header_equals = { "X-Partner-Key" = "pk-7f3a9c2e" }
  }
}
`

// loginBody is a login the demo origin accepts (200).
const loginBody = `{"username":"alice","password":"letmein-demo"}`

func startExemptNode(t *testing.T) *node {
	t.Helper()
	p, diags := builtin.Load("exempt.hcl", []byte(exemptE2EPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return startNode(t, p, nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
}

func TestExemptOfficeIsNeverRefusedByTheLoginRules(t *testing.T) {
	n := startExemptNode(t)
	login := func(client string) reply {
		return do(t, "POST", "http://"+n.addr+"/login", loginBody, "X-Forwarded-For", client)
	}
	for _, office := range []string{"10.20.30.40", "2001:db8:5::1"} {
		for i := range 20 {
			if r := login(office); r.status != http.StatusOK {
				t.Fatalf("office %s login %d: got %d, want 200", office, i+1, r.status)
			}
		}
	}
	if got := n.decisions("login-per-ip", "skip"); got != 40 {
		t.Errorf("edge_decisions_total{rule=login-per-ip,decision=skip}: got %d, want 40", got)
	}
	if got := n.decisions("office", "allow"); got != 40 {
		t.Errorf("edge_decisions_total{rule=office,decision=allow}: got %d, want 40", got)
	}
	// Another address gets its five, then the bare 429.
	for i := range 5 {
		if r := login("203.0.113.9"); r.status != http.StatusOK {
			t.Fatalf("outside login %d: got %d, want 200", i+1, r.status)
		}
	}
	r := login("203.0.113.9")
	if r.status != http.StatusTooManyRequests || r.body != "Too Many Requests\n" {
		t.Fatalf("sixth outside login: got %d %q, want the bare 429", r.status, r.body)
	}
	// The office's logins never counted: an address just outside it is a
	// stranger, and one inside is still exempt after the outsider was refused.
	if r := login("11.0.0.1"); r.status != http.StatusOK {
		t.Errorf("11.0.0.1 (outside 10.0.0.0/8): got %d, want 200 (its first login)", r.status)
	}
	if r := login("10.20.30.40"); r.status != http.StatusOK {
		t.Errorf("office after the outsider's refusal: got %d, want 200", r.status)
	}
	if got := n.hits(t)["/login"]; got != 40+5+2 {
		t.Errorf("origin saw %d logins, want %d", got, 40+5+2)
	}
}

func TestExemptMonitoringNeedsItsHeaderAndItsNetwork(t *testing.T) {
	n := startExemptNode(t)
	health := func(client string, header ...string) int {
		return do(t, "GET", "http://"+n.addr+"/api/health", "", append([]string{"X-Forwarded-For", client}, header...)...).status
	}
	for i := range 10 {
		if st := health("198.51.100.7", "X-Monitoring", "probe-eu-1"); st != http.StatusOK {
			t.Fatalf("probe %d: got %d, want 200", i+1, st)
		}
	}
	// The header alone, from elsewhere, exempts nobody: anyone can send it.
	for i, want := range []int{200, 200, 200, 429} {
		if st := health("203.0.113.50", "X-Monitoring", "probe-eu-1"); st != want {
			t.Fatalf("header from outside %d: got %d, want %d", i+1, st, want)
		}
	}
	// The network without the header is an ordinary client.
	for i, want := range []int{200, 200, 200, 429} {
		if st := health("198.51.100.8"); st != want {
			t.Fatalf("probe network without header %d: got %d, want %d", i+1, st, want)
		}
	}
	// The exemption covers /api/health only: the probe's other calls count.
	for i, want := range []int{200, 200, 200, 429} {
		if st := do(t, "GET", "http://"+n.addr+"/api/items", "", "X-Forwarded-For", "198.51.100.7", "X-Monitoring", "1").status; st != want {
			t.Fatalf("probe on /api/items %d: got %d, want %d", i+1, st, want)
		}
	}
}

func TestExemptSkipAllPassesOverEveryRule(t *testing.T) {
	n := startExemptNode(t)
	const key = "pk-7f3a9c2e"
	for i := range 20 {
		// The demo origin has no /admin: its 404 shows the request got there.
		for _, c := range []struct {
			method, path string
			want         int
		}{{"POST", "/login", 200}, {"GET", "/api/items", 200}, {"GET", "/admin", 404}} {
			body := ""
			if c.method == "POST" {
				body = loginBody
			}
			r := do(t, c.method, "http://"+n.addr+c.path, body, "X-Forwarded-For", "192.0.2.10", "X-Partner-Key", key)
			if r.status != c.want {
				t.Fatalf("partner %s %s %d: got %d, want the origin's %d", c.method, c.path, i+1, r.status, c.want)
			}
			if r.header.Get("RateLimit") != "" {
				t.Fatalf("partner %s: got RateLimit %q, want none (no rule counted it)", c.path, r.header.Get("RateLimit"))
			}
		}
	}
	// A wrong key, or the right key from another network, is no partner.
	if st := do(t, "GET", "http://"+n.addr+"/admin", "", "X-Forwarded-For", "192.0.2.10", "X-Partner-Key", key+"x").status; st != http.StatusForbidden {
		t.Errorf("wrong key on /admin: got %d, want 403", st)
	}
	if st := do(t, "GET", "http://"+n.addr+"/admin", "", "X-Forwarded-For", "203.0.113.1", "X-Partner-Key", key).status; st != http.StatusForbidden {
		t.Errorf("right key from outside on /admin: got %d, want 403", st)
	}
	for _, rule := range []string{"login-per-ip", "api-per-ip", "no-admin"} {
		if got := n.decisions(rule, "skip"); got != 20 {
			t.Errorf("edge_decisions_total{rule=%s,decision=skip}: got %d, want 20", rule, got)
		}
	}
}
