package redisstore

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
)

// upgradePolicy has a budget (per-ip) and a lockout: a rule whose refusal
// bans the IP for 15 minutes, far longer than its own period.
const upgradePolicy = `
rule "per-ip" {
  paths  = ["/api"]
  key    = ["ip"]
  limit  = 6
  period = "1m"
}
rule "login" {
  paths  = ["/login"]
  key    = ["ip"]
  limit  = 2
  period = "1m"
  ban    = "15m"
}
`

// upgradeNode is one node of a fleet on one Redis: its own Store and
// Engine, both keyed by the fleet's secret.
type upgradeNode struct {
	e *rules.Engine
	s *rules.Scratch
}

func newUpgradeNode(t *testing.T, prefix string, f rules.KeyFormats) *upgradeNode {
	t.Helper()
	st := mustNew(t, Options{URL: "redis://" + redisAddr(t), Prefix: prefix, Timeout: time.Second, UseCallerClock: true})
	t.Cleanup(func() { st.Close() })
	e, err := rules.NewEngine(rules.EngineOptions{Store: st, Secret: []byte("the fleet's secret, 32 bytes or more"), KeyFormats: f})
	if err != nil {
		t.Fatal(err)
	}
	return &upgradeNode{e: e, s: rules.NewScratch(4)}
}

// allowed decides one request from client on path at now.
func (n *upgradeNode) allowed(t *testing.T, p *rules.Policy, now time.Time, client, path string) bool {
	t.Helper()
	req := &rules.Request{Method: []byte("POST"), Path: route.AppendMatchPath(nil, []byte(path), true), Client: netip.MustParseAddr(client)}
	d := n.e.Check(context.Background(), now, p, req, n.s)
	if d.StoreErr != nil {
		t.Fatalf("store: %v", d.StoreErr)
	}
	return d.Verdict == rules.Forward
}

// TestRollingKeyFormatUpgrade: nodes of both formats on one real Redis,
// through every step of docs/deploying.md's upgrade, with one client's
// requests alternating between them. "old" is forced to format 1, which is
// byte for byte a node before key formats (rules' TestGoldenFormat1); "new"
// takes its formats from what Redis holds, as edge serve does. At each step
// the client gets exactly one node's budget (the same count a single node
// gives), and a lockout (a ban) started through either node refuses on the
// other, including one started in the migration window and still running
// after it.
func TestRollingKeyFormatUpgrade(t *testing.T) {
	p, diags := builtin.Load("upgrade.hcl", []byte(upgradePolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	prefix := testPrefix("keyformat")
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	fmt1 := rules.KeyFormats{Format: rules.KeyFormat1}
	fp := "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

	// The budget of one node alone, at one instant.
	solo := newUpgradeNode(t, testPrefix("keyformat-solo"), fmt1)
	budget := 0
	for range 20 {
		if solo.allowed(t, p, t0, "192.0.2.1", "/api") {
			budget++
		}
	}
	if budget == 0 || budget == 20 {
		t.Fatalf("one node allowed %d of 20: the policy does not refuse", budget)
	}

	// The old fleet: an old node claimed the fingerprint (bare, as its
	// code does); a new node reads format 1.
	claimer := mustNew(t, Options{URL: "redis://" + redisAddr(t), Prefix: prefix, Timeout: time.Second})
	defer claimer.Close()
	if _, err := claimer.ClaimKeyFingerprint(ctx, fp, false); err != nil {
		t.Fatal(err)
	}
	held, claimed, err := claimer.ClaimKeyFormat(ctx, fp, false)
	if err != nil || claimed || held.Format != rules.KeyFormat1 {
		t.Fatalf("a new node on an old fleet: got %+v, claimed %v, %v; want format 1", held, claimed, err)
	}
	old := newUpgradeNode(t, prefix, fmt1)
	nw := newUpgradeNode(t, prefix, held.KeyFormats())

	// clientN gives each step clients of its own.
	clientN := 0
	client := func() string {
		clientN++
		return netip.AddrFrom4([4]byte{198, 51, 100, byte(clientN)}).String()
	}
	// alternate sends 20 requests of one client at now, old and new in
	// turn, and checks the fleet allowed exactly one node's budget.
	alternate := func(step string, a, b *upgradeNode, now time.Time) {
		t.Helper()
		c, got := client(), 0
		for i := range 20 {
			n := a
			if i%2 == 1 {
				n = b
			}
			if n.allowed(t, p, now, c, "/api") {
				got++
			}
		}
		if got != budget {
			t.Errorf("%s: the fleet allowed %d of 20, want one node's %d", step, got, budget)
		}
	}
	// lockout trips login's ban through a (three requests at now), then,
	// two minutes on (login's own counter has recovered), checks b
	// refuses the client, and a does; a client that never tripped it is
	// allowed on b.
	lockout := func(step string, a, b *upgradeNode, now time.Time) {
		t.Helper()
		c := client()
		for range 3 {
			a.allowed(t, p, now, c, "/login")
		}
		later := now.Add(2 * time.Minute)
		if b.allowed(t, p, later, c, "/login") {
			t.Errorf("%s: a ban started on one node does not refuse on the other", step)
		}
		if a.allowed(t, p, later, c, "/login") {
			t.Errorf("%s: the ban does not refuse on its own node", step)
		}
		if !b.allowed(t, p, later, client(), "/login") {
			t.Errorf("%s: a client without a ban is refused", step)
		}
	}

	now := t0
	alternate("old fleet", old, nw, now)
	lockout("old fleet, ban via old", old, nw, now)
	lockout("old fleet, ban via new", nw, old, now)

	// Bans started before the migration, still running through it and
	// after the window.
	now = now.Add(time.Hour)
	preBan := client()
	for range 3 {
		old.allowed(t, p, now, preBan, "/login")
	}

	// The operator migrates (edge key-format migrate): a window of 20
	// minutes from now (the policy's longest lifetime is the 15m ban).
	if w := p.LongestKeyLifetime(); w != 15*time.Minute {
		t.Fatalf("LongestKeyLifetime: got %v, want the ban's 15m", w)
	}
	until := now.Add(20 * time.Minute)
	if held, err := claimer.MigrateKeyFormat(ctx, fp, until); err != nil || held.Format != rules.KeyFormat1 {
		t.Fatalf("migrate: got %+v, %v", held, err)
	}
	mig, err := claimer.ReadKeyFormat(ctx)
	if err != nil || mig.Format != rules.KeyFormat2 || !mig.DualUntil.Equal(until) {
		t.Fatalf("after migrate: got %+v, %v", mig, err)
	}
	// "old" stands for a node that has not read the migration yet (a new
	// node between two polls, or an old one the operator missed): still
	// format 1 alone, beside one in the window.
	nw.e.SetKeyFormats(mig.KeyFormats())
	now = now.Add(time.Minute)
	if nw.allowed(t, p, now, preBan, "/login") {
		t.Error("in the window: a ban from before the migration does not refuse")
	}
	alternate("window beside format 1", old, nw, now)
	lockout("window beside format 1, ban via format 1", old, nw, now)
	lockout("window beside format 1, ban via the window", nw, old, now)

	// Every node in the window.
	old.e.SetKeyFormats(mig.KeyFormats())
	now = now.Add(time.Minute)
	alternate("window", old, nw, now)
	lockout("window", old, nw, now)
	windowBan := client()
	for range 3 {
		old.allowed(t, p, until.Add(-5*time.Minute), windowBan, "/login")
	}

	// The window's end: one node past it (format 2 alone), the other
	// still in it (its clock behind), then both past it.
	ahead := until.Add(time.Second)
	behind := until.Add(-time.Second)
	c := client()
	got := 0
	for i := range 20 {
		n, at := old, behind
		if i%2 == 1 {
			n, at = nw, ahead
		}
		if n.allowed(t, p, at, c, "/api") {
			got++
		}
	}
	if got != budget {
		t.Errorf("window's end: the fleet allowed %d of 20, want one node's %d", got, budget)
	}
	lockout("window's end, ban via the window", old, nw, behind)
	now = until.Add(time.Minute)
	if old.allowed(t, p, now, windowBan, "/login") || nw.allowed(t, p, now, windowBan, "/login") {
		t.Error("after the window: a ban started in it does not refuse")
	}
	alternate("format 2", old, nw, now)
	lockout("format 2", old, nw, now)
	lockout("format 2, the other way", nw, old, now)

	// Names: format 1's exactly as before key formats, format 2's with
	// the marker, each the prefix and the Key's hex in a hash tag.
	raw := rawClient(t, redisAddr(t))
	var n1, n2 int
	iter := raw.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := strings.TrimPrefix(iter.Val(), prefix)
		switch {
		case k == fingerprintKey:
		case keyPattern("").MatchString(k):
			n1++
		case keyPattern(format2Mark).MatchString(k):
			n2++
		default:
			t.Errorf("key %q: neither format's name", iter.Val())
		}
	}
	if n1 == 0 || n2 == 0 {
		t.Errorf("got %d format 1 and %d format 2 keys, want both", n1, n2)
	}
}
