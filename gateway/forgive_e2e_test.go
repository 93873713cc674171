package gateway

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
)

const forgiveToken = "forgive-token"

// forgive sends POST /admin/forgive as actor and returns the reply.
func forgive(t *testing.T, n *node, actor, body string) reply {
	t.Helper()
	return do(t, "POST", "http://"+n.admin+"/admin/forgive", body,
		"Authorization", "Bearer "+forgiveToken, "X-Edge-Actor", actor)
}

// TestForgiveUnlocksALockedAccount: through the real server on login.hcl,
// an account locked by five failures from one client logs in again after
// a forgive; a forgive "for" 1h lets the customer fail without locking
// them out, and ends by itself an hour later (the fake clock), when five
// failures lock them again. Each forgive is in the audit log with its
// actor and reason, and no log line holds the account or the address,
// while the refusals carry their keyed hashes.
func TestForgiveUnlocksALockedAccount(t *testing.T) {
	logs := &syncBuffer{}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// JSON logs at info: refusals, would-be refusals and audit records.
	n := startNode(t, loadPolicy(t, loginFixture), nodeOptions{clock: clock, adminToken: forgiveToken, logs: logs})
	const client, account = "203.0.113.7", "alice@example.com"
	lockOut := func(phase string) {
		t.Helper()
		for i := range 5 {
			if got := rawStatus(t, loginRaw(t, n, client, account, "wrong")); got != http.StatusUnauthorized {
				t.Fatalf("%s: failure %d: got %d, want 401 from the origin", phase, i+1, got)
			}
		}
		if got := rawStatus(t, loginRaw(t, n, client, account, "letmein-demo")); got != http.StatusTooManyRequests {
			t.Fatalf("%s: the right password after five failures: got %d, want 429 (locked)", phase, got)
		}
	}
	lockOut("first lockout")

	// The operator knows the account as the customer spells it, and the
	// customer's address.
	r := forgive(t, n, "support-jane", `{"rule": "login-failures-account-client",
		"key": {"account": " Alice@Example.COM", "ip": "203.0.113.7"}, "reason": "ticket 4711: customer locked out"}`)
	if r.status != http.StatusOK {
		t.Fatalf("forgive: got %d %s, want 200", r.status, r.body)
	}
	var ans forgiveAnswer
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || !ans.Cleared || ans.ExemptUntil != "" || ans.Rule != "login-failures-account-client" {
		t.Fatalf("forgive answered %s (%v), want cleared with no exemption", r.body, err)
	}
	if got := rawStatus(t, loginRaw(t, n, client, account, "letmein-demo")); got != http.StatusOK {
		t.Fatalf("login after the forgive: got %d, want 200", got)
	}

	clock.Advance(time.Minute) // login-per-client's burst refills
	lockOut("second lockout")
	r = forgive(t, n, "support-omar", `{"rule": "login-failures-account-client",
		"key": {"account": "alice@example.com", "ip": "203.0.113.7"}, "for": "1h", "reason": "ticket 4712: travelling, many retries"}`)
	if r.status != http.StatusOK {
		t.Fatalf("forgive for 1h: got %d %s, want 200", r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || ans.ExemptUntil != clock.Now().Add(time.Hour).Format(time.RFC3339) {
		t.Fatalf("forgive for 1h answered %s (%v), want exempt_until an hour from now", r.body, err)
	}
	for i := range 8 {
		if got := rawStatus(t, loginRaw(t, n, client, account, "wrong")); got != http.StatusUnauthorized {
			t.Fatalf("exempt failure %d: got %d, want 401 (the rule does not hold an exempt key)", i+1, got)
		}
	}
	// The exemption ends by itself; its failures were never charged.
	clock.Advance(time.Hour)
	lockOut("after the exemption")

	out := logs.String()
	for _, want := range []string{
		`"audit":"forgive"`, `"actor":"support-jane"`, `"reason":"ticket 4711: customer locked out"`,
		`"actor":"support-omar"`, `"reason":"ticket 4712: travelling, many retries"`, `"for":"1h0m0s"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the logs lack %s:\n%s", want, out)
		}
	}
	// The refusals name the rule and carry the keyed hashes.
	p := n.srv.state.Load().policy
	k, err := n.srv.ext.pardoner.KeyFromText(n.srv.engine, p, p.Rule("login-failures-account-client"), map[string]string{"account": account, "ip": client})
	if err != nil {
		t.Fatal(err)
	}
	ch := n.srv.engine.HashClient(netip.MustParseAddr(client))
	refusals := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `"msg":"refused"`) || !strings.Contains(line, `"rule":"login-failures-account-client"`) {
			continue
		}
		refusals++
		if !strings.Contains(line, `"key":"`+hex.EncodeToString(k[9:])+`"`) || !strings.Contains(line, `"client":"`+hex.EncodeToString(ch[:])+`"`) {
			t.Errorf("a refusal without the key's and the client's hashes: %s", line)
		}
	}
	if refusals != 3 {
		t.Errorf("got %d refusal lines of the rule, want 3 (one per lockout)", refusals)
	}
	for _, raw := range []string{client, account, "Alice@Example.COM", "lice@example"} {
		if strings.Contains(out, raw) {
			t.Errorf("the logs hold %q:\n%s", raw, out)
		}
	}
}

func TestForgiveRefusesBadInput(t *testing.T) {
	n := startNode(t, loadPolicy(t, loginFixture), nodeOptions{adminToken: forgiveToken})
	tests := []struct{ body, want string }{
		{`{"rule": "nope", "key": {"ip": "203.0.113.7"}, "reason": "r"}`, "no rule named nope"},
		{`{"rule": "login-per-client", "key": {"ip": "203.0.113.7"}}`, `\"reason\" is required`},
		{`{"rule": "login-per-client", "key": {"ip": "203.0.113.7"}, "for": "25h", "reason": "r"}`, `\"for\" must be`},
		{`{"rule": "login-per-client", "key": {"ip": "nope"}, "reason": "r"}`, "not an IP address"},
		{`{"rule": "login-failures-account-client", "key": {"ip": "203.0.113.7"}, "reason": "r"}`, `missing \"account\"`},
	}
	for _, tt := range tests {
		r := forgive(t, n, "x", tt.body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, tt.want) {
			t.Errorf("%s: got %d %s, want 400 with %q", tt.body, r.status, r.body, tt.want)
		}
	}
}

// TestRefusedListsTheFloodingClientAndStaysBounded: a client flooding one
// rule tops GET /admin/refused with its key's and its address's keyed
// hashes and its exact count; a flood of distinct keys afterwards leaves
// at most 32 keys listed and the flooder on top; the list covers only the
// minutes asked for, and forgets a rule whose refusals are older than five
// minutes.
func TestRefusedListsTheFloodingClientAndStaysBounded(t *testing.T) {
	p, diags := builtin.Load("refused.hcl", []byte(`
edge {
  trusted_proxies = ["127.0.0.1/32"]
}
rule "per-ip" {
  key    = ["ip"]
  limit  = 1
  period = "1h"
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)}
	n := startNode(t, p, nodeOptions{clock: clock, adminToken: "refused-token"})
	const flooder = "198.51.100.66"
	get := func(client string) int {
		return do(t, "GET", "http://"+n.addr+"/", "", "X-Forwarded-For", client).status
	}
	if got := get(flooder); got == http.StatusTooManyRequests {
		t.Fatalf("the flooder's first request: got %d, want it forwarded", got)
	}
	for i := range 99 {
		if got := get(flooder); got != http.StatusTooManyRequests {
			t.Fatalf("flood request %d: got %d, want 429", i+2, got)
		}
	}
	clock.Advance(time.Minute) // another bucket
	for i := range 600 {
		c := fmt.Sprintf("10.%d.%d.1", i/250, i%250)
		get(c)
		if got := get(c); got != http.StatusTooManyRequests {
			t.Fatalf("distinct client %s's second request: got %d, want 429", c, got)
		}
	}
	type listing struct {
		Rules []refusedRuleTop `json:"rules"`
	}
	refused := func(q string) listing {
		t.Helper()
		r := do(t, "GET", "http://"+n.admin+"/admin/refused"+q, "", "Authorization", "Bearer refused-token")
		if r.status != http.StatusOK {
			t.Fatalf("GET /admin/refused%s: got %d %s", q, r.status, r.body)
		}
		var l listing
		if err := json.Unmarshal([]byte(r.body), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	k, err := n.srv.ext.pardoner.KeyFromText(n.srv.engine, p, p.Rule("per-ip"), map[string]string{"ip": flooder})
	if err != nil {
		t.Fatal(err)
	}
	ch := n.srv.engine.HashClient(netip.MustParseAddr(flooder))
	l := refused("")
	if len(l.Rules) != 1 || l.Rules[0].Name != "per-ip" {
		t.Fatalf("got rules %+v, want per-ip alone", l.Rules)
	}
	top := l.Rules[0].Top
	if len(top) == 0 || len(top) > refusedPerBucket {
		t.Fatalf("got %d keys, want 1 to %d", len(top), refusedPerBucket)
	}
	want := refusedTop{Key: hex.EncodeToString(k[9:]), Client: hex.EncodeToString(ch[:]), Count: 99}
	if top[0] != want {
		t.Errorf("got top %+v, want the flooder %+v", top[0], want)
	}
	var rest uint64
	for _, e := range top[1:] {
		rest += e.Count
	}
	if rest > 600 {
		t.Errorf("the distinct keys count %d refusals, more than the 600 made", rest)
	}
	// Memory: one minute of one rule holds at most 32 keys.
	r := n.srv.refused.rules["per-ip"]
	r.mu.Lock()
	for i := range r.buckets {
		if b := &r.buckets[i]; b.n > refusedPerBucket {
			t.Errorf("bucket %d holds %d keys", i, b.n)
		}
	}
	r.mu.Unlock()

	// The last minute alone holds the distinct flood, not the flooder.
	for _, e := range refused("?minutes=1").Rules[0].Top {
		if e.Key == want.Key {
			t.Errorf("minutes=1 lists the flooder, whose refusals are a minute older")
		}
	}
	if r := do(t, "GET", "http://"+n.admin+"/admin/refused?minutes=6", "", "Authorization", "Bearer refused-token"); r.status != http.StatusBadRequest {
		t.Errorf("minutes=6: got %d, want 400", r.status)
	}
	clock.Advance(5 * time.Minute)
	if l := refused(""); len(l.Rules) != 0 {
		t.Errorf("five minutes later: got %+v, want no rules", l.Rules)
	}
}
