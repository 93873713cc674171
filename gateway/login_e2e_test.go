package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

const loginFixture = "testdata/fixtures/policies/login.hcl"

// loginRaw sends one POST /login with a JSON body for username from client
// (through the trusted loopback proxy) on a connection of its own, and
// returns the raw response.
func loginRaw(t *testing.T, n *node, client, username, password string) string {
	t.Helper()
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, password)
	return raw(t, n.addr, "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: "+client+
		"\r\nContent-Type: application/json\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\nConnection: close\r\n\r\n"+body)
}

// TestAccountSpellingsShareOneFailureCounter: through the real server on
// login.hcl, five failures on one account from one client lock it for that
// client whatever the spelling (case, white space, full-width and other
// compatibility characters, ß): login-failures-account-client keys on the
// normalised account. A success resets the counter when it names the
// account as counted; a success under another spelling gives back its own
// charge and clears nothing (at an origin that keeps spellings apart it
// may be another account's: docs/policy.md, "reset_on_success").
func TestAccountSpellingsShareOneFailureCounter(t *testing.T) {
	n := startNode(t, loadPolicy(t, loginFixture), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	const client = "203.0.113.7"
	for i, spelling := range []string{"Straße@Example.com", "STRASSE@EXAMPLE.COM", " strasse@example.com\u00a0", "ｓｔｒａｓｓｅ@ｅｘａｍｐｌｅ.ｃｏｍ", "strasse@example.com"} {
		if got := rawStatus(t, loginRaw(t, n, client, spelling, "wrong")); got != http.StatusUnauthorized {
			t.Fatalf("failure %d (%q): got %d, want 401 from the origin", i+1, spelling, got)
		}
	}
	if got := rawStatus(t, loginRaw(t, n, client, "StrAsse@example.com", "letmein-demo")); got != http.StatusTooManyRequests {
		t.Fatalf("a sixth attempt under another spelling: got %d, want 429", got)
	}
	// Another client is not locked out; its success resets its own key.
	const other = "198.51.100.9"
	for range 3 {
		loginRaw(t, n, other, "strasse@example.com", "wrong")
	}
	if got := rawStatus(t, loginRaw(t, n, other, "Strasse@example.com", "letmein-demo")); got != http.StatusOK {
		t.Fatalf("the other client's success under another spelling after three failures: got %d, want 200", got)
	}
	if got := rawStatus(t, loginRaw(t, n, other, "strasse@example.com", "wrong")); got != http.StatusUnauthorized {
		t.Fatalf("the fourth failure: got %d, want 401 (the success's own charge given back)", got)
	}
	if got := rawStatus(t, loginRaw(t, n, other, "strasse@example.com", "letmein-demo")); got != http.StatusOK {
		t.Fatalf("the other client's success as counted after four failures: got %d, want 200", got)
	}
	for i := range 5 {
		if got := rawStatus(t, loginRaw(t, n, other, "strasse@example.com", "wrong")); got != http.StatusUnauthorized {
			t.Fatalf("failure %d after the success reset the key: got %d, want 401", i+1, got)
		}
	}
	if got := rawStatus(t, loginRaw(t, n, other, "strasse@example.com", "wrong")); got != http.StatusTooManyRequests {
		t.Errorf("the sixth failure since the success: got %d, want 429", got)
	}
}

// TestRefusalIsTheSameBytesForAnyAccount: the refusal an attacker gets
// tells nothing about the account: the bare 429 for an account the origin
// knows and for one it has never heard of are the same bytes (the Date
// line aside, which is the time), whichever rule refused.
func TestRefusalIsTheSameBytesForAnyAccount(t *testing.T) {
	n := startNode(t, loadPolicy(t, loginFixture), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	refusal := func(client, account string) string {
		t.Helper()
		for range 5 {
			loginRaw(t, n, client, account, "wrong")
		}
		resp := loginRaw(t, n, client, account, "wrong")
		if rawStatus(t, resp) != http.StatusTooManyRequests {
			t.Fatalf("%s: got %q, want a 429", account, resp)
		}
		return dateLine.ReplaceAllString(resp, "")
	}
	known := refusal("203.0.113.7", "alice@example.com") // the demo origin takes any account
	unknown := refusal("203.0.113.8", "no-such-user-7f3a9@example.com")
	if known != unknown {
		t.Errorf("refusals differ:\nknown account:\n%q\nunknown account:\n%q", known, unknown)
	}
	for _, leak := range []string{"RateLimit", "Retry-After", "login-", "account"} {
		if strings.Contains(known, leak) {
			t.Errorf("the bare 429 mentions %q:\n%s", leak, known)
		}
	}
}

// TestDistributedBruteForceSparesTheKnownBrowser: on the shipped policy,
// 200 addresses guessing one account are held to login-failures-account's
// 50 failures, and the account is then locked for everyone, but not for
// the real user's browser, which logged in successfully before the attack
// (known_visitors, keyed on its visitor cookie): the lockout cannot be
// turned against the user. The same user on a new device is held to it,
// and so is anyone sending from the browser's IP without its cookie.
func TestDistributedBruteForceSparesTheKnownBrowser(t *testing.T) {
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	login := func(client, password string, header ...string) reply {
		t.Helper()
		return do(t, "POST", "http://"+n.addr+"/login", `{"username":"alice@example.com","password":"`+password+`"}`,
			append([]string{"X-Forwarded-For", client}, header...)...)
	}
	// The browser got its visitor cookie loading the login page, then
	// logged in with it: that success makes it known.
	browser := withCookie(cookieOf(do(t, "GET", "http://"+n.addr+"/login", "", "X-Forwarded-For", "203.0.113.7")))
	if len(browser) == 0 {
		t.Fatal("no visitor cookie minted")
	}
	if got := login("203.0.113.7", "letmein-demo", browser...).status; got != http.StatusOK {
		t.Fatalf("the real user's first login: got %d", got)
	}
	through := 0
	for i := range 200 {
		if login(fmt.Sprintf("198.18.%d.%d", i/200, i%200+1), fmt.Sprintf("guess-%d", i)).status == http.StatusUnauthorized {
			through++
		}
	}
	if through != 50 {
		t.Errorf("200 addresses got %d guesses to the origin, want login-failures-account's 50", through)
	}
	if got := login("203.0.113.8", "letmein-demo").status; got != http.StatusTooManyRequests {
		t.Errorf("the user on a new device during the attack: got %d, want 429", got)
	}
	if got := login("203.0.113.7", "letmein-demo", browser...).status; got != http.StatusOK {
		t.Errorf("the user's known browser during the attack: got %d, want 200", got)
	}
	if got := login("203.0.113.7", "guess-x").status; got != http.StatusTooManyRequests {
		t.Errorf("the browser's IP without its cookie during the attack: got %d, want 429", got)
	}
}
