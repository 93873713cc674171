package known_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/known"
	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
)

const knownPolicy = rulestest.AccountVisitors + `
rule "login-failures-account" {
  methods          = ["POST"]
  paths            = ["/login"]
  key              = ["account"]
  count            = "failures"
  algorithm        = "sliding_window"
  limit            = 20
  period           = "15m"
  known_visitors   = "30d"
  known_by         = ["visitor"]
  sensitive        = true
}
`

// TestKnownVisitorsDefeatTheLockoutWeapon: a distributed brute force on
// one account from 200 addresses is held to the account-wide rule's 20
// failures, and that rule locks out everyone else, but not the real
// user's browser, which logged in successfully before: the lockout cannot
// be turned against the real user. A new device of the user, or the
// user's browser once known_visitors has passed, is held to the rule.
func TestKnownVisitorsDefeatTheLockoutWeapon(t *testing.T) {
	p := rulestest.Load(t, knownPolicy)
	k := &rulestest.Run{T: t, E: rulestest.NewEngine(t, nil), P: p, Now: rulestest.T0, S: rules.NewScratch(4)}

	// The real user logs in from its browser: it becomes known.
	if v := k.Login("alice", "203.0.113.7", "alice-browser", 200); v != rules.Forward {
		t.Fatalf("the real user's first login: verdict %d", v)
	}
	// 200 addresses guess alice's password, each once, with a 401 each.
	through := 0
	for i := range 200 {
		k.Now = k.Now.Add(time.Second)
		if k.Login("alice", fmt.Sprintf("198.18.%d.%d", i/250, i%250+1), "", 401) == rules.Forward {
			through++
		}
	}
	if through != 20 {
		t.Errorf("the distributed guessing got %d attempts through, want the rule's 20", through)
	}
	// The account is locked for everyone else: a new browser of alice's.
	if v := k.Login("alice", "203.0.113.7", "alice-new-phone", 200); v != rules.RefuseLimit {
		t.Errorf("an unknown visitor during the lockout: verdict %d, want RefuseLimit", v)
	}
	// The real user's known browser still logs in, even after a typo,
	// and is never charged: its failures leave the attackers' count alone.
	if v := k.Login("alice", "203.0.113.7", "alice-browser", 401); v != rules.Forward {
		t.Errorf("the known browser's typo: verdict %d, want Forward", v)
	}
	if v := k.Login("alice", "203.0.113.7", "alice-browser", 200); v != rules.Forward {
		t.Errorf("the known browser during the lockout: verdict %d, want Forward", v)
	}
	// Another account is not affected; an attacker reusing the known
	// browser's IP without its cookie is not known either.
	if v := k.Login("alice", "203.0.113.7", "", 401); v != rules.RefuseLimit {
		t.Errorf("the known browser's IP without its cookie: verdict %d, want RefuseLimit", v)
	}
	if v := k.Login("bob", "198.18.0.1", "", 401); v != rules.Forward {
		t.Errorf("another account: verdict %d, want Forward", v)
	}
	// known_visitors is 30 days from the last success: 29 days on, still
	// known (the failure counter has decayed by then, so refill it).
	k.Now = k.Now.Add(29 * 24 * time.Hour)
	for i := range 25 {
		k.Login("alice", fmt.Sprintf("198.19.0.%d", i+1), "", 401)
	}
	if v := k.Login("alice", "203.0.113.7", "alice-browser", 401); v != rules.Forward {
		t.Errorf("the known browser 29 days after its last success: verdict %d, want Forward", v)
	}
	// 31 days after its last success it is a stranger again.
	k.Now = k.Now.Add(2*24*time.Hour + time.Hour)
	for i := range 25 {
		k.Login("alice", fmt.Sprintf("198.20.0.%d", i+1), "", 401)
	}
	if v := k.Login("alice", "203.0.113.7", "alice-browser", 200); v != rules.RefuseLimit {
		t.Errorf("the browser 31 days after its last success: verdict %d, want RefuseLimit", v)
	}
}

// TestKnownVisitorsRefusedWhereTheyCannotWork: known_visitors needs a
// rule counting failures and known_by; known_by needs known_visitors.
func TestKnownVisitorsRefusedWhereTheyCannotWork(t *testing.T) {
	for _, tt := range []struct{ attrs, want string }{
		{`count = "failures"` + "\n" + `known_visitors = "30d"`, "Missing known_by"},
		{`known_visitors = "30d"` + "\n" + `known_by = ["visitor"]`, `known_visitors needs count = "failures"`},
		{`count = "failures"` + "\n" + `known_by = ["visitor"]`, "known_by without known_visitors"},
		{`count = "failures"` + "\n" + `known_visitors = "400d"` + "\n" + `known_by = ["visitor"]`, "known_visitors too long"},
		{`count = "failures"` + "\n" + `known_visitors = "soon"` + "\n" + `known_by = ["visitor"]`, "Invalid known_visitors"},
		{`count = "failures"` + "\n" + `known_visitors = "1d"` + "\n" + `known_by = ["vistor"]`, "Unknown characteristic"},
	} {
		src := "identity {\n  account = [\"json:username\"]\n}\nvisitor {\n}\nrule \"r\" {\n  key = [\"account\"]\n  limit = 5\n  period = \"1h\"\n" + tt.attrs + "\n}\n"
		_, diags := builtin.Load("p.hcl", []byte(src))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.attrs, diags, tt.want)
		}
	}
}

// TestKnownBlockMarksOnlyASuccess: a known block's marker is written after
// the origin's success on its route (success_status, or X-Edge-Outcome,
// which overrides the status), and checked by exempt_known on another
// route; a failure writes none, nor a success without a valid visitor
// cookie (the address's cookieless bucket is nobody), and the marker ends
// its for after the last success.
func TestKnownBlockMarksOnlyASuccess(t *testing.T) {
	p, diags := builtin.Load("known.hcl", []byte(rulestest.AccountVisitors+`
known "verified" {
  paths = ["/verify"]
  by    = ["visitor", "account"]
  for   = "1d"
}
rule "per-network" {
  paths        = ["/send"]
  key          = ["ip"]
  ipv4_prefix  = 24
  limit        = 1
  period       = "1h"
  exempt_known = ["verified"]
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if ks := known.Blocks(p); len(ks) != 1 || ks[0].Name != "verified" || ks[0].For() != 24*time.Hour {
		t.Fatalf("known blocks %v, want one, verified, for 24h", ks)
	}
	e, s, vc := rulestest.NewEngine(t, nil), rules.NewScratch(2), nat.ConfigOf(p)
	now := rulestest.T0
	run := func(path, user, visitor string, status int, outcome string) rules.Verdict {
		t.Helper()
		s.Begin(p)
		var id nat.ID
		copy(id[:], visitor)
		vc.SetVisitor(s, id, visitor != "")
		r := rulestest.Req{Method: "POST", Path: path, Client: "192.0.2.7",
			Fields: rulestest.Fields{ContentType: "application/json", Text: fmt.Sprintf(`{"username":%q}`, user)}}
		d := e.Check(context.Background(), now, p, r.Build(), s)
		if d.Verdict == rules.Forward && d.Settle {
			var oc []byte
			if outcome != "" {
				oc = []byte(outcome)
			}
			if _, err := e.Settle(context.Background(), now, s, status, oc); err != nil {
				t.Fatal(err)
			}
		}
		return d.Verdict
	}
	run("/send", "x", "filler", 200, "") // the network's one an hour
	for _, tt := range []struct {
		name, user, visitor string
		status              int
		outcome             string
		known               bool
	}{
		{"a failure", "u1", "v1", 401, "", false},
		{"a 200 the origin says failed", "u2", "v2", 200, "failure", false},
		{"a 401 the origin says succeeded", "u3", "v3", 401, "success", true},
		{"a success", "u4", "v4", 200, "", true},
		{"a cookieless success", "u5", "", 200, "", false},
	} {
		run("/verify", tt.user, tt.visitor, tt.status, tt.outcome)
		want := rules.RefuseLimit
		if tt.known {
			want = rules.Forward
		}
		if v := run("/send", tt.user, tt.visitor, 200, ""); v != want {
			t.Errorf("%s, then a send: verdict %d, want %d", tt.name, v, want)
		}
	}
	if v := run("/send", "u1", "v4", 200, ""); v != rules.RefuseLimit {
		t.Errorf("the known visitor for another account: verdict %d, want RefuseLimit", v)
	}
	now = now.Add(23 * time.Hour)
	run("/send", "x", "filler", 200, "")
	if v := run("/send", "u4", "v4", 200, ""); v != rules.Forward {
		t.Errorf("23 hours after its success: verdict %d, want Forward", v)
	}
	now = now.Add(2 * time.Hour)
	run("/send", "x", "filler", 200, "")
	if v := run("/send", "u4", "v4", 200, ""); v != rules.RefuseLimit {
		t.Errorf("25 hours after its success (for = 1d): verdict %d, want RefuseLimit", v)
	}
}

// TestKnownBlockNetworkKeys: a known block's markers are held to the
// store's network share of the block's budget, so that one network
// logging in from many visitors cannot fill it and leave every other
// caller unknowable; a share of 100% or a Redis store bounds nothing.
func TestKnownBlockNetworkKeys(t *testing.T) {
	const src = `
visitor {}
identity {
  account = ["json:username"]
}
known "logged-in" {
  paths    = ["/login"]
  by       = ["visitor", "account"]
  for      = "30d"
  max_keys = 2000
}
rule "per-network" {
  paths        = ["/login"]
  key          = ["ip"]
  limit        = 3
  period       = "1h"
  exempt_known = ["logged-in"]
}
`
	for _, tt := range []struct {
		name, store string
		want        int
	}{
		{"default share", "", 100},
		{"no share", "store \"memory\" {\n  network_share = \"100%\"\n}\n", 0},
		{"redis", "store \"redis\" {\n  url = \"redis://127.0.0.1:6379/0\"\n}\n", 0},
	} {
		p := rulestest.Load(t, tt.store+src)
		if got := known.Blocks(p)[0].NetworkKeys(); got != tt.want {
			t.Errorf("%s: NetworkKeys %d, want %d", tt.name, got, tt.want)
		}
	}
}
