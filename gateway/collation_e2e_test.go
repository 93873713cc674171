package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// loginJSON is loginRaw with the body encoded by encoding/json, which
// writes every code point an account may hold (%q would write a
// supplementary one as \U…, which JSON has not).
func loginJSON(t *testing.T, n *node, client, username, password string) string {
	t.Helper()
	body, err := json.Marshal(map[string]string{"username": username, "password": password})
	if err != nil {
		t.Fatal(err)
	}
	return raw(t, n.addr, "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: "+client+
		"\r\nContent-Type: application/json\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\nConnection: close\r\n\r\n"+string(body))
}

// TestCollationSpellingsShareOneFailureCounter (issue 24 §2): through the
// real server on the shipped policy, spellings of alice@example.com that
// Unicode collation at primary strength (MySQL 8's utf8mb4_0900_ai_ci, SQL
// Server's _CI_AI) reads as it, and that NFKC, case folding and a table
// of accented letters kept apart (an enclosing keycap, the ypogegrammeni,
// a supplementary variation selector, a Mongolian variation selector, a
// combining small i, a negative squared L, stacked marks), share one
// failure counter: five failures over five of them lock the account for
// that client in the others (before, each had a counter of its own, and
// every login reached the origin); another client is not locked.
func TestCollationSpellingsShareOneFailureCounter(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: clk})
	const client = "203.0.113.21"
	failures := []string{
		"ali\u20e3ce@example.com",     // an enclosing keycap
		"alic\u0345e@example.com",     // the ypogegrammeni, NFKC's ι
		"ali\U000e0100ce@example.com", // a supplementary variation selector
		"al\u0365ce@example.com",      // a combining small i for the i
		"ALI\u180dCE@example.com",     // a Mongolian free variation selector
	}
	for i, account := range failures {
		if got := rawStatus(t, loginJSON(t, n, client, account, "wrong")); got != http.StatusUnauthorized {
			t.Fatalf("failure %d (%+q): got %d, want the origin's 401", i+1, account, got)
		}
		clk.Advance(13 * time.Second) // login-per-visitor: one more every 12 s
	}
	for _, account := range []string{
		"alice@example.com",
		"a\U0001f15bice@example.com",          // a negative squared L
		"a\u0328\u0330\u20e3lice@example.com", // stacked marks
	} {
		if got := rawStatus(t, loginJSON(t, n, client, account, "letmein-demo")); got != http.StatusTooManyRequests {
			t.Errorf("%+q after five failures over other spellings: got %d, want 429", account, got)
		}
		clk.Advance(13 * time.Second)
	}
	if got := n.decisions("login-failures-account-client", "deny"); got != 3 {
		t.Errorf("login-failures-account-client refused %d logins, want the 3 after the failures", got)
	}
	if got := n.hits(t)["/login"]; got != 5 {
		t.Errorf("the origin saw %d logins, want the 5 failures", got)
	}
	if got := rawStatus(t, loginJSON(t, n, "198.51.100.21", "ali\u20e3ce@example.com", "letmein-demo")); got != http.StatusOK {
		t.Errorf("another client: got %d, want 200", got)
	}
}
