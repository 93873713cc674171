package ban_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// TestBanOnEveryTag: a ban's marker key never meets the rule's own counter
// key, whatever the first characteristic's tag (global's, 16, once shared
// the ban flag's bit): after a trip the key stays refused for the ban,
// though its counter recovers, and is allowed again after it.
func TestBanOnEveryTag(t *testing.T) {
	for _, key := range []string{`["global"]`, `["ip"]`, `["route"]`, `["ip", "route"]`} {
		p := rulestest.Load(t, `
rule "r" {
  key    = `+key+`
  limit  = 2
  period = "1m"
  ban    = "10m"
}
`)
		e := rulestest.NewEngine(t, nil)
		s := rules.NewScratch(1)
		r := rulestest.Req{Method: "GET", Path: "/x", Client: "192.0.2.1"}
		at := func(d time.Duration) rules.Verdict {
			return e.Check(context.Background(), rulestest.T0.Add(d), p, r.Build(), s).Verdict
		}
		for i, want := range []rules.Verdict{rules.Forward, rules.Forward, rules.RefuseLimit} {
			if got := at(0); got != want {
				t.Fatalf("key %s, request %d: verdict %d, want %d", key, i+1, got, want)
			}
		}
		if got := at(5 * time.Minute); got != rules.RefuseLimit {
			t.Errorf("key %s: 5 minutes into the ban (the counter long recovered): verdict %d, want RefuseLimit", key, got)
		}
		if got := at(10*time.Minute + time.Second); got != rules.Forward {
			t.Errorf("key %s: after the ban: verdict %d, want Forward", key, got)
		}
	}
}

// banned is who (a visitor, "" none) and the verdict it must get.
type banned struct {
	who, visitor string
	want         rules.Verdict
}

// TestBanByVisitorFallsOnTheGuilty: with a visitor { } block, a ban
// (ban_by's default, ["visitor"]) refuses the key's cookieless clients and
// the visitors that are guilty of it, not the other visitors behind the
// key: on a rule counting failures, the visitors whose failures it counted
// (the visitor that trips it on a new account is refused by the rule, not
// made guilty); on a rule counting requests, the visitor it refused.
// ban_by = [] bans the whole key, as before ban_by.
func TestBanByVisitorFallsOnTheGuilty(t *testing.T) {
	const src = rulestest.AccountVisitors + `
rule "stuffing" {
  methods        = ["POST"]
  paths          = ["/login"]
  key            = ["ip"]
  count          = "failures"
  count_distinct = "account"
  limit          = 3
  period         = "1h"
  sensitive      = true
  ban            = "15m"
  ban_scope      = "sensitive"
  BAN_BY
}
rule "signup" {
  methods   = ["POST"]
  paths     = ["/signup"]
  key       = ["ip"]
  limit     = 100
  period    = "1m"
  sensitive = true
}
rule "api" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 2
  period = "1m"
  ban    = "10m"
  BAN_BY
}
`
	for _, tt := range []struct {
		banBy     string
		bystander rules.Verdict // a visitor behind the banned address that did nothing
	}{
		{"", rules.Forward},
		{`ban_by = ["visitor"]`, rules.Forward},
		{`ban_by = []`, rules.RefuseLimit},
	} {
		t.Run(tt.banBy, func(t *testing.T) {
			p := rulestest.Load(t, strings.ReplaceAll(src, "BAN_BY", tt.banBy))
			k := &rulestest.Run{T: t, E: rulestest.NewEngine(t, nil), P: p, Now: rulestest.T0, S: rules.NewScratch(4)}
			const addr = "198.51.100.7"
			for i, acct := range []string{"a1", "a2", "a3"} {
				if v := k.Do("POST", "/login", acct, addr, "stuffer", 401); v != rules.Forward {
					t.Fatalf("failure %d: verdict %d", i+1, v)
				}
			}
			if v := k.Do("POST", "/login", "a4", addr, "fresh-stuffer", 401); v != rules.RefuseLimit {
				t.Fatalf("a fourth account: verdict %d, want RefuseLimit (the ban starts)", v)
			}
			// during checks, five minutes into a ban, who method path from
			// addr gets refused.
			during := func(method, path, addr string, cases []banned) {
				t.Helper()
				k.Now = k.Now.Add(5 * time.Minute)
				for _, c := range cases {
					if v := k.Do(method, path, "", addr, c.visitor, 200); v != c.want {
						t.Errorf("%s on %s during the ban: verdict %d, want %d", c.who, path, v, c.want)
					}
				}
			}
			during("POST", "/signup", addr, []banned{
				{"the visitor whose failures were counted", "stuffer", rules.RefuseLimit},
				{"the address's cookieless clients", "", rules.RefuseLimit},
				{"the visitor that tripped it on a new account", "fresh-stuffer", tt.bystander},
				{"a visitor that did nothing", "bystander", tt.bystander},
			})
			if v := k.Do("POST", "/signup", "", "203.0.113.9", "stuffer", 200); v != rules.Forward {
				t.Errorf("the guilty visitor from another address: verdict %d, want Forward (the address is banned, not the visitor)", v)
			}

			// A rule counting requests: the visitor it refuses is guilty.
			const api = "192.0.2.40"
			for _, v := range []string{"first", "first"} {
				k.Do("GET", "/api/x", "", api, v, 200)
			}
			if v := k.Do("GET", "/api/x", "", api, "second", 200); v != rules.RefuseLimit {
				t.Fatalf("the third API call: verdict %d, want RefuseLimit", v)
			}
			// Five minutes on, the counter has recovered; the ban has not.
			during("GET", "/api/x", api, []banned{
				{"the visitor it refused", "second", rules.RefuseLimit},
				{"the visitor whose calls filled it", "first", tt.bystander},
				{"the address's cookieless clients", "", rules.RefuseLimit},
			})
		})
	}
}

// TestBanDiagnostics: ban, ban_scope and ban_by are refused where they
// cannot apply, at the value written (an adaptive rule's ban moved here
// from rules' TestAdaptiveConfig with the ban).
func TestBanDiagnostics(t *testing.T) {
	rule := func(body string) string {
		return "rule \"r\" {\n  paths = [\"/login\"]\n" + body + "\n}\n"
	}
	for _, tc := range []struct{ name, src, want string }{
		{"adaptive", rule(`algorithm = "concurrency"
  ban = "1m"
  adaptive {}`), "rule \"r\" is adaptive: a request it sheds says the origin is saturated, not that the caller misbehaved; remove ban"},
		{"invalid", rule(`key = ["ip"]
  limit = 5
  period = "1m"
  ban = "soon"`), `test.hcl:6,9-15: Invalid ban; "soon" is not a positive duration such as "15m"`},
		{"too long", rule(`key = ["ip"]
  limit = 5
  period = "1m"
  ban = "31d"`), `test.hcl:6,9-14: ban too long; "31d": a ban lasts at most 30d`},
		{"deny", rule(`action = "deny"
  ban = "1m"`), `test.hcl:4,9-13: ban not used; a rule that counts nothing (action = "deny" or "skip") never trips; remove ban`},
		{"scope without ban", rule(`key = ["ip"]
  limit = 5
  period = "1m"
  ban_scope = "sensitive"`), `test.hcl:6,15-26: ban_scope without ban; ban_scope says where a ban refuses; set ban, such as "15m", too`},
		{"invalid scope", rule(`key = ["ip"]
  limit = 5
  period = "1m"
  ban = "1m"
  ban_scope = "everywhere"`), `test.hcl:7,15-27: Invalid ban_scope; "everywhere" is not a ban scope; want "rule" (the rule that tripped) or "sensitive" (every sensitive route)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := builtin.Load("test.hcl", []byte(tc.src))
			if !diags.HasErrors() {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("diagnostics %q do not say %q", diags.Error(), tc.want)
			}
		})
	}
}

// TestBanKeyLifetime: Policy.LongestKeyLifetime, the length of a key-secret
// rotation's and a key format migration's window (docs/operations.md),
// covers what a ban writes: its marker, the ban's length, and under ban_by
// a visitor's guilt marker, the rule's period and the ban after the act.
// A window shorter than a guilt marker would read it under the old secret
// no more while it still holds a guilty visitor to the ban.
func TestBanKeyLifetime(t *testing.T) {
	for _, tt := range []struct {
		banBy string
		want  time.Duration
	}{
		{"", 15 * time.Minute},
		{`ban_by = ["visitor"]`, 16 * time.Minute},
	} {
		p, diags := builtin.Load("ban.hcl", []byte(rulestest.AccountVisitors+`
rule "stuffing" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  count     = "failures"
  limit     = 3
  period    = "1m"
  sensitive = true
  ban       = "15m"
  `+tt.banBy+`
}
`))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		if got := p.LongestKeyLifetime(); got < tt.want {
			t.Errorf("%q: LongestKeyLifetime %v, want at least %v", tt.banBy, got, tt.want)
		}
	}
}
