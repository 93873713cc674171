package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules/memstore"
)

// A tester's findings F2 and F3 on issue 24's network shares
// (docs/memory-store.md, "Network shares"), through the real server on the
// shipped policy: api-per-ip (an ordinary token bucket, 20 a burst) given
// ban = "10m" (falling, by the shipped visitor block's default ban_by, on
// the cookieless bucket and the guilty visitors), a budget of 20 keys and
// network_share = "10%" of it: one IPv4 /24 makes at most 2 keys, and 2
// markers.

// shareBanNode serves that policy on a clock the test moves; get sends a
// GET /api/items from client with the extra headers.
func shareBanNode(t *testing.T) (n *node, clk *fakeClock, get func(client string, header ...string) reply) {
	t.Helper()
	p := shippedWith(t, map[string]string{`rule "api-per-ip"`: "  ban           = \"10m\"\n  max_keys      = 20\n  network_share = \"10%\""}, nil)
	clk = &fakeClock{t: time.Unix(1_800_000_000, 0)}
	// One shard: its recency list is the budget's, so a flood evicts the
	// least recently used keys of the whole budget (with 64, each new
	// key evicts its own shard's).
	st, err := memstore.New(memstore.Options{MaxKeys: nodecfg.Of(p).Store.MaxKeys, Shards: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n = startNode(t, p, nodeOptions{clock: clk, store: st})
	get = func(client string, header ...string) reply {
		t.Helper()
		return do(t, "GET", "http://"+n.addr+"/api/items", "", append([]string{"X-Forwarded-For", client}, header...)...)
	}
	return n, clk, get
}

// evictShare floods api-per-ip with 20 new clients from other /24s: the
// budget of 20 evicts its least recently used keys, those of the network
// under test, whose share is free again (its markers stay).
func evictShare(t *testing.T, get func(string, ...string) reply) {
	t.Helper()
	for i := range 20 {
		if r := get(fmt.Sprintf("10.%d.0.1", i+1)); r.status != http.StatusOK {
			t.Fatalf("flood client %d: got %d, want 200", i+1, r.status)
		}
	}
}

// trip sends requests from client until api-per-ip refuses one (at most
// 25), and fails the test if none is refused.
func trip(t *testing.T, get func(string, ...string) reply, client string, header ...string) {
	t.Helper()
	for range 25 {
		if get(client, header...).status == http.StatusTooManyRequests {
			return
		}
	}
	t.Fatalf("%s: 25 requests, none refused", client)
}

// TestNetworkFullBansNoOne (F2): a refusal because the client's network
// holds its share says "your network is at its share", not "this key is
// abusive". Two clients of 203.0.113.0/24 hold the network's 2 keys; a
// bystander at 203.0.113.3, cookieless and with a visitor cookie, is
// refused (429, the share). Before, that refusal tripped the ban like a
// limit's: the bystander's address was banned for 10 minutes (its
// cookieless bucket) and its visitor made guilty, so that once the share
// was free again it still got 429, and a later ban of the address by an
// attacker behind it refused the innocent visitor too. Now it writes no
// ban and no guilt. The control: a client of the address that trips the
// limit itself is banned, and its visitor, not guilty, is not.
func TestNetworkFullBansNoOne(t *testing.T) {
	n, clk, get := shareBanNode(t)
	const bystander = "203.0.113.3"
	visitor := withCookie(cookieOf(do(t, "GET", "http://"+n.addr+"/login", "", "X-Forwarded-For", bystander)))
	if len(visitor) == 0 {
		t.Fatal("no visitor cookie minted for the bystander")
	}
	for _, c := range []string{"203.0.113.1", "203.0.113.2"} {
		if r := get(c); r.status != http.StatusOK {
			t.Fatalf("%s: got %d, want 200", c, r.status)
		}
	}
	for _, h := range [][]string{nil, visitor} {
		if r := get(bystander, h...); r.status != http.StatusTooManyRequests {
			t.Fatalf("the bystander (cookie %v) while its network holds its share: got %d, want 429", h != nil, r.status)
		}
	}
	if got := metric(t, n.reg, "edge_store_network_full_total", "api-per-ip"); got != 2 {
		t.Errorf("edge_store_network_full_total{api-per-ip}: got %v, want 2", got)
	}
	if got := metric(t, n.reg, "edge_store_marker_keys", "api-per-ip"); got > 0 { // -1: no marker budget yet
		t.Errorf("edge_store_marker_keys{api-per-ip}: got %v, want 0 (no ban)", got)
	}
	evictShare(t, get)
	for _, h := range [][]string{nil, visitor} {
		if r := get(bystander, h...); r.status != http.StatusOK {
			t.Errorf("the bystander (cookie %v) once its network's share is free: got %d Retry-After %q, want 200 (banned by the share's refusal)", h != nil, r.status, r.header.Get("Retry-After"))
		}
	}

	// The control: an attacker behind the bystander's address trips the
	// limit (cookieless) and is banned; the visitor, refused only by the
	// share, is not guilty of it.
	trip(t, get, bystander)
	clk.Advance(11 * time.Second) // the bucket holds 11 tokens again
	if r := get(bystander); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "589" {
		t.Errorf("the attacker's cookieless requests 11 s into its ban: got %d Retry-After %q, want 429 with 589", r.status, r.header.Get("Retry-After"))
	}
	if r := get(bystander, visitor...); r.status != http.StatusOK {
		t.Errorf("the bystander's visitor during the attacker's ban: got %d, want 200 (made guilty by the share's refusal)", r.status)
	}
}

// TestBanIgnoresTheMarkerShare (F3): a ban is never refused by its
// network's share of the marker budget. Two clients of 203.0.113.0/24 trip
// api-per-ip and are banned: 2 bans, the network's share of the marker
// budget. A flood from other networks evicts their counters (the bans
// stay), and a third client of the network trips the rule. Before, its ban
// was refused by the full marker share: 11 s later its bucket had refilled
// and it got 200, never banned. Now it is banned, and the first two still
// are.
func TestBanIgnoresTheMarkerShare(t *testing.T) {
	n, clk, get := shareBanNode(t)
	for _, c := range []string{"203.0.113.1", "203.0.113.2"} {
		trip(t, get, c)
	}
	evictShare(t, get)
	trip(t, get, "203.0.113.3")
	clk.Advance(11 * time.Second)
	for _, c := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		if r := get(c); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "589" {
			t.Errorf("%s 11 s after it tripped the rule: got %d Retry-After %q, want 429 with 589 (banned)", c, r.status, r.header.Get("Retry-After"))
		}
	}
	if got := metric(t, n.reg, "edge_store_marker_keys", "api-per-ip"); got != 3 {
		t.Errorf("edge_store_marker_keys{api-per-ip}: got %v, want 3 (the three bans)", got)
	}
}
