package gateway

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// Issue 24, §1b: a ban (and a known visitor) is a marker the memory store
// never evicts while it lasts, whatever its rule's budget
// (docs/memory-store.md, "Markers"). Through the real server on the
// shipped policy, with a rule's budget cut so that a flood of new keys is
// quick, and a clock the test moves.

// shippedWith is the shipped policy with attrs inserted at the top of each
// block they name by its header (`rule "api-per-ip"`, `store "memory"`:
// attributes it does not set), each named rule's max_keys replaced, and
// then each of edits applied to the source.
func shippedWith(t *testing.T, attrs map[string]string, ruleKeys map[string]int, edits ...func(string) string) *rules.Policy {
	t.Helper()
	path := filepath.Join(repoRoot(t), "policies.hcl")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for block, a := range attrs {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(block) + ` \{\n`)
		if n := len(re.FindAllStringIndex(s, -1)); n != 1 {
			t.Fatalf("policies.hcl: %d blocks %s, want 1", n, block)
		}
		s = re.ReplaceAllLiteralString(s, block+" {\n"+a+"\n")
	}
	for name, keys := range ruleKeys {
		s = replaceOnce(t, s, regexp.MustCompile(`(?s)(rule "`+regexp.QuoteMeta(name)+`" \{[^}]*?max_keys\s*=\s*)\d+`), fmt.Sprint(keys))
	}
	for _, edit := range edits {
		s = edit(s)
	}
	p, diags := builtin.Load(path, []byte(s))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// startAt serves p on a memory store made as cmd/edge makes it, on clk.
func startAt(t *testing.T, p *rules.Policy, clk *fakeClock) *node {
	t.Helper()
	st, err := memstore.New(memstore.Options{MaxKeys: nodecfg.Of(p).Store.MaxKeys, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return startNode(t, p, nodeOptions{clock: clk, store: st})
}

// TestFloodKeepsAnOrdinaryRulesBan: api-per-ip (an ordinary rule) with
// ban = "10m" and a budget of 20 keys. A client that trips it is banned:
// 429 with the ban's time left after its bucket has refilled. 60 requests
// from new clients, three times the budget, evict the rule's counters
// (ordinary rules evict) but not the ban, which still refuses with the
// same Retry-After, and ends on time. Before, the ban was a key like any
// other in the rule's budget: the flood evicted it and the banned client
// got 200. The flood's clients are each in a network of their own (IPv4
// /24s), so no share of the budget is in their way.
func TestFloodKeepsAnOrdinaryRulesBan(t *testing.T) {
	p := shippedWith(t, map[string]string{`rule "api-per-ip"`: "  ban      = \"10m\"\n  max_keys = 20"}, nil)
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startAt(t, p, clk)
	get := func(client string) reply {
		t.Helper()
		return do(t, "GET", "http://"+n.addr+"/api/items", "", "X-Forwarded-For", client)
	}
	const banned = "198.51.100.7"
	for i := range 20 {
		if r := get(banned); r.status != http.StatusOK {
			t.Fatalf("request %d in the burst: got %d, want 200", i+1, r.status)
		}
	}
	if r := get(banned); r.status != http.StatusTooManyRequests {
		t.Fatalf("the 21st request: got %d, want 429 (the rule trips: the ban starts)", r.status)
	}
	clk.Advance(11 * time.Second) // 11 tokens back in the bucket; 589 s of the ban left
	if r := get(banned); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "589" {
		t.Fatalf("11 s into the ban: got %d Retry-After %q, want 429 with 589", r.status, r.header.Get("Retry-After"))
	}
	for i := range 60 {
		if r := get(fmt.Sprintf("10.%d.0.1", i+1)); r.status != http.StatusOK {
			t.Fatalf("new client %d: got %d, want 200 (the flood is not held back)", i+1, r.status)
		}
	}
	if got := metric(t, n.reg, "edge_store_evictions_total", "api-per-ip"); got != 41 {
		t.Errorf("edge_store_evictions_total{api-per-ip}: got %v, want 41 (61 counters in a budget of 20)", got)
	}
	if r := get(banned); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "589" {
		t.Errorf("the banned client after the flood: got %d Retry-After %q, want 429 with 589 (the ban evicted)", r.status, r.header.Get("Retry-After"))
	}
	if got := metric(t, n.reg, "edge_store_marker_keys", "api-per-ip"); got != 1 {
		t.Errorf("edge_store_marker_keys{api-per-ip}: got %v, want 1 (the ban)", got)
	}
	clk.Advance(589 * time.Second)
	if r := get(banned); r.status != http.StatusOK {
		t.Errorf("the client once the ban has ended: got %d, want 200", r.status)
	}
}

// TestMarkerFloodKeepsAKnownVisitor: login-failures-account (sensitive,
// known_visitors) with a budget of 20 keys. The real user's browser logs
// in to alice, so it is known; 50 guesses from 50 addresses lock alice
// for everyone else. Then the attacker fails once on an account of its
// own (a live counter) and logs in to it successfully from 40 fresh
// browsers: each success writes a 30-day marker. Before, markers were keys
// of the rule's budget, and a marker's write evicted the least recently
// used key to make room (a marker's op was not sensitive): the real user's
// marker and alice's live counter went (23 evictions from a sensitive
// rule, which never evicts), and the budget, full of 30-day markers,
// answered every new key 503: the known browser, the user's new device and
// the guesses alike. Now markers have a budget of their own that never
// evicts: the attacker's markers beyond it are not written, the user's
// browser stays known, and the lockout still holds the user's new device
// and the guesses.
func TestMarkerFloodKeepsAKnownVisitor(t *testing.T) {
	p := shippedPolicy(t, 100000, map[string]int{"login-failures-account": 20})
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startAt(t, p, clk)
	login := func(client, account, password string, header ...string) int {
		t.Helper()
		return do(t, "POST", "http://"+n.addr+"/login", `{"username":"`+account+`","password":"`+password+`"}`,
			append([]string{"X-Forwarded-For", client}, header...)...).status
	}
	browser := func(client string) []string {
		t.Helper()
		c := withCookie(cookieOf(do(t, "GET", "http://"+n.addr+"/login", "", "X-Forwarded-For", client)))
		if len(c) == 0 {
			t.Fatalf("no visitor cookie minted for %s", client)
		}
		return c
	}
	const user = "203.0.113.7"
	known := browser(user)
	if got := login(user, "alice@example.com", "letmein-demo", known...); got != http.StatusOK {
		t.Fatalf("the real user's first login: got %d, want 200", got)
	}
	for i := range 50 {
		if got := login(fmt.Sprintf("198.18.0.%d", i+1), "alice@example.com", fmt.Sprintf("guess-%d", i)); got != http.StatusUnauthorized {
			t.Fatalf("guess %d: got %d, want 401 from the origin", i+1, got)
		}
	}
	if got := login(user, "alice@example.com", "letmein-demo", known...); got != http.StatusOK {
		t.Fatalf("the known browser before the flood: got %d, want 200", got)
	}
	if got := login("192.0.2.1", "mallory@example.com", "wrong"); got != http.StatusUnauthorized {
		t.Fatalf("the attacker's failure on its own account: got %d, want 401", got)
	}
	for i := range 40 {
		client := fmt.Sprintf("10.%d.0.1", i+1)
		if got := login(client, "mallory@example.com", "letmein-demo", browser(client)...); got != http.StatusOK {
			t.Fatalf("the attacker's login %d: got %d, want 200", i+1, got)
		}
	}
	if got := login(user, "alice@example.com", "letmein-demo", known...); got != http.StatusOK {
		t.Errorf("the known browser after 40 other browsers' markers: got %d, want 200", got)
	}
	// The control: alice is locked for everyone the rule does not know.
	if got := login("203.0.113.8", "alice@example.com", "letmein-demo"); got != http.StatusTooManyRequests {
		t.Errorf("the user on a new device: got %d, want 429", got)
	}
	if got := login("198.18.1.1", "alice@example.com", "guess-x"); got != http.StatusTooManyRequests {
		t.Errorf("another guess: got %d, want 429", got)
	}
	if got := metric(t, n.reg, "edge_store_marker_keys", "login-failures-account"); got != 20 {
		t.Errorf("edge_store_marker_keys: got %v, want 20 (the budget, full)", got)
	}
	if got := metric(t, n.reg, "edge_store_marker_full_total", "login-failures-account"); got != 21 {
		t.Errorf("edge_store_marker_full_total: got %v, want 21 (41 markers for 20 places)", got)
	}
	if got := metric(t, n.reg, "edge_store_evictions_total", "login-failures-account"); got != 0 {
		t.Errorf("edge_store_evictions_total: got %v, want 0 (a sensitive rule never evicts)", got)
	}
}
