package gateway

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// The key-secret rotation of issue 25 (section 6), through the real
// server: a lockout, a ban and an OTP phone limit refused under the old
// secret are still refused under the new one, right after the rotation
// and once the window has closed (docs/operations.md, "Rotating the key
// secret").

const rotationPolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32"]
}
identity {
  account = ["json:username"]
  phone   = ["json:phone"]
  phone_region = "US"
}
rule "login-failures-account" {
  methods        = ["POST"]
  paths          = ["/login"]
  key            = ["account"]
  count          = "failures"
  failure_status = [401]
  algorithm      = "sliding_window"
  limit          = 3
  period         = "15m"
  sensitive      = true
}
rule "signup-per-ip" {
  methods   = ["POST"]
  paths     = ["/signup"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 2
  period    = "1m"
  sensitive = true
  ban       = "30m"
}
rule "otp-send-per-phone" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["phone"]
  algorithm = "sliding_log"
  limit     = 3
  period    = "15m"
  sensitive = true
}
`

var (
	oldSecret = []byte("the fleet's old key secret, 32+ bytes long")
	newSecret = []byte("the fleet's new key secret, 32+ bytes long")
)

const (
	lockedClient = "203.0.113.7"
	bannedClient = "198.51.100.7"
	limitedPhone = "+1 202 555 0123"
)

// rotationProbe sends one request of each of the three refusals: a login
// for the locked account, a signup from the banned client and a code to
// the limited phone, and returns their statuses.
func rotationProbe(t *testing.T, n *node) [3]int {
	t.Helper()
	return [3]int{
		do(t, "POST", "http://"+n.addr+"/login", `{"username":"alice","password":"letmein-demo"}`, "X-Forwarded-For", lockedClient).status,
		do(t, "POST", "http://"+n.addr+"/signup", `{}`, "X-Forwarded-For", bannedClient).status,
		do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"`+limitedPhone+`"}`, "X-Forwarded-For", "192.0.2.50").status,
	}
}

var allRefused = [3]int{http.StatusTooManyRequests, http.StatusTooManyRequests, http.StatusTooManyRequests}

// tripRefusals locks alice out (3 failures), bans bannedClient (a third
// signup within the GCRA's minute) and uses limitedPhone's 3 codes, on n,
// and checks that each is then refused.
func tripRefusals(t *testing.T, n *node) {
	t.Helper()
	for i := range 3 {
		if got := do(t, "POST", "http://"+n.addr+"/login", `{"username":"alice","password":"wrong"}`, "X-Forwarded-For", lockedClient).status; got != http.StatusUnauthorized {
			t.Fatalf("failure %d: got %d, want 401 from the origin", i+1, got)
		}
	}
	for i := range 2 {
		if got := do(t, "POST", "http://"+n.addr+"/signup", `{}`, "X-Forwarded-For", bannedClient).status; got != http.StatusOK {
			t.Fatalf("signup %d: got %d, want 200", i+1, got)
		}
	}
	for i := range 3 {
		if got := do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"`+limitedPhone+`"}`, "X-Forwarded-For", "192.0.2.50").status; got != http.StatusOK {
			t.Fatalf("code %d: got %d, want 200", i+1, got)
		}
	}
	if got := rotationProbe(t, n); got != allRefused {
		t.Fatalf("under the old secret: got %v, want %v (locked out, banned, the phone's codes used)", got, allRefused)
	}
}

// snapshotOf is a copy of ms's counters in a new memory store, as a
// binary upgrade hands them to the next process (cmd/edge/upgrade.go).
func snapshotOf(t *testing.T, ms *memstore.Store, clk rules.Clock) *memstore.Store {
	t.Helper()
	var buf bytes.Buffer
	if _, err := ms.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	next, err := memstore.New(memstore.Options{MaxKeys: 1000, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	if _, err := next.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	return next
}

// TestKeySecretRotationKeepsRefusalsOnTheMemoryStore: a node on the old
// secret locks an account out, bans a client and uses up a phone's
// codes; its counters go to the next process (a snapshot, as a binary
// upgrade hands them over). Started with the new secret alone (what
// -rotate-key-secret did), that process lets all three through. Started
// with the new secret and the old one as the previous, in a rotation
// window of the policy's longest key lifetime, it refuses all three right
// after the rotation; and once the previous secret is dropped (the next
// process, with the new secret alone, on this one's counters) all three
// are still refused until they end on their own.
func TestKeySecretRotationKeepsRefusalsOnTheMemoryStore(t *testing.T) {
	p, diags := builtin.Load("rotation.hcl", []byte(rotationPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	old := startNode(t, p, nodeOptions{clock: clk, store: ms, secret: oldSecret})
	tripRefusals(t, old)

	// The reset the rotation window prevents: the new secret alone.
	reset := startNode(t, p, nodeOptions{clock: clk, store: snapshotOf(t, ms, clk), secret: newSecret})
	want := [3]int{http.StatusOK, http.StatusOK, http.StatusOK}
	if got := rotationProbe(t, reset); got != want {
		t.Fatalf("the new secret alone: got %v, want %v (every counter afresh)", got, want)
	}

	window := p.LongestKeyLifetime()
	if window != 30*time.Minute {
		t.Fatalf("the policy's longest key lifetime: got %v, want 30m (the ban)", window)
	}
	formats := rules.KeyFormats{RotateUntil: clk.Now().Add(window)}
	rotated := snapshotOf(t, ms, clk)
	rot := startNode(t, p, nodeOptions{clock: clk, store: rotated, secret: newSecret, prevSecret: oldSecret, formats: &formats})
	if got := rotationProbe(t, rot); got != allRefused {
		t.Fatalf("right after the rotation: got %v, want %v", got, allRefused)
	}
	clk.Advance(time.Minute)
	if got := rotationProbe(t, rot); got != allRefused {
		t.Fatalf("a minute into the rotation window: got %v, want %v", got, allRefused)
	}

	// The window closes: the previous secret dropped, on the counters the
	// rotating node held (2 minutes in: the lockout, the ban and the
	// phone's log all still run).
	clk.Advance(time.Minute)
	closed := startNode(t, p, nodeOptions{clock: clk, store: snapshotOf(t, rotated, clk), secret: newSecret})
	if got := rotationProbe(t, closed); got != allRefused {
		t.Fatalf("after the window closed: got %v, want %v (nothing that was refusing forgotten)", got, allRefused)
	}
	// And they end as they would have: the phone's log after 15 minutes,
	// the ban and the lockout (a sliding_window's count weighs until the
	// end of the window after its own) by 30.
	clk.Advance(14 * time.Minute)
	if got := rotationProbe(t, closed); got[1] != http.StatusTooManyRequests || got[2] != http.StatusOK {
		t.Fatalf("16 minutes on: got %v, want the ban still refusing and the phone's codes back", got)
	}
	clk.Advance(15 * time.Minute)
	want = [3]int{http.StatusOK, http.StatusOK, http.StatusOK}
	if got := rotationProbe(t, closed); got != want {
		t.Fatalf("31 minutes on: got %v, want %v (each ended on its own)", got, want)
	}
}

// TestKeySecretRotationKeepsRefusalsOnRedis is the rotation on a real
// redis-server shared by a fleet, deciding at the test's clock
// (UseCallerClock): a node on the old secret locks an account out, bans
// a client and uses up a phone's codes. A node started with the new
// secret and the old one as the previous refuses all three right after
// the rotation, beside the old node, which goes on refusing them too; the
// two count a new phone's codes together (neither resets the other).
// Once the previous secret is dropped (a node on the new secret alone)
// all three are still refused, carried over by the script on the
// rotating node's first touch, until they end on their own.
func TestKeySecretRotationKeepsRefusalsOnRedis(t *testing.T) {
	p, diags := builtin.Load("rotation.hcl", []byte(rotationPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	url := testredis.Start(t).URL()
	store := func() rules.Store {
		rs, err := redisstore.New(redisstore.Options{URL: url, Timeout: time.Second, UseCallerClock: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		return rs
	}
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	old := startNode(t, p, nodeOptions{clock: clk, store: store(), secret: oldSecret})
	tripRefusals(t, old)

	formats := rules.KeyFormats{RotateUntil: clk.Now().Add(p.LongestKeyLifetime())}
	rot := startNode(t, p, nodeOptions{clock: clk, store: store(), secret: newSecret, prevSecret: oldSecret, formats: &formats})
	if got := rotationProbe(t, rot); got != allRefused {
		t.Fatalf("right after the rotation: got %v, want %v", got, allRefused)
	}
	clk.Advance(time.Minute)
	if got := rotationProbe(t, old); got != allRefused {
		t.Fatalf("the node still on the old secret, beside the rotating one: got %v, want %v", got, allRefused)
	}
	if got := rotationProbe(t, rot); got != allRefused {
		t.Fatalf("a minute into the rotation window: got %v, want %v", got, allRefused)
	}
	// A new phone's codes, two through the rotating node and one through
	// the old: the fourth is refused by either.
	send := func(n *node) int {
		return do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"+1 202 555 0188"}`, "X-Forwarded-For", "192.0.2.51").status
	}
	for i, n := range []*node{rot, rot, old} {
		if got := send(n); got != http.StatusOK {
			t.Fatalf("the new phone's code %d: got %d, want 200", i+1, got)
		}
	}
	if got := send(old); got != http.StatusTooManyRequests {
		t.Fatalf("the new phone's 4th code through the old node: got %d, want 429 (the rotating node's 2 counted)", got)
	}
	if got := send(rot); got != http.StatusTooManyRequests {
		t.Fatalf("the new phone's 4th code through the rotating node: got %d, want 429 (the old node's counted)", got)
	}

	// The window closes: a node on the new secret alone.
	clk.Advance(time.Minute)
	closed := startNode(t, p, nodeOptions{clock: clk, store: store(), secret: newSecret})
	if got := rotationProbe(t, closed); got != allRefused {
		t.Fatalf("after the window closed: got %v, want %v (nothing that was refusing forgotten)", got, allRefused)
	}
	// The bound of a mixed fleet (docs/operations.md): what the old node
	// counted after the rotating node first touched the phone's key is in
	// the previous secret's key only, so once that is dropped the phone
	// gets that one code again, and no more.
	if got := send(closed); got != http.StatusOK {
		t.Fatalf("the new phone after the window closed: got %d, want 200 (the old node's code, counted under the old secret alone)", got)
	}
	if got := send(closed); got != http.StatusTooManyRequests {
		t.Fatalf("the new phone's next code after the window closed: got %d, want 429", got)
	}
	clk.Advance(29 * time.Minute)
	want := [3]int{http.StatusOK, http.StatusOK, http.StatusOK}
	if got := rotationProbe(t, closed); got != want {
		t.Fatalf("31 minutes on: got %v, want %v (each ended on its own)", got, want)
	}
}
