package rules_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// forgivePolicy keys one rule on each characteristic an operator can name.
const forgivePolicy = `
edge {
  nat64_prefixes = ["2001:db8:64::/96"]
}
identity {
  account      = ["json:username"]
  phone        = ["json:phone"]
  phone_region = "US"
}
rule "account-ip" {
  paths = ["/login"]
  key   = ["account", "ip"]
  limit = 5
  period = "15m"
}
rule "network" {
  paths       = ["/login"]
  key         = ["ip"]
  ipv4_prefix = 24
  ipv6_prefix = 48
  limit       = 50
  period      = "1m"
}
rule "phone" {
  paths = ["/login"]
  key   = ["phone", "phone_country"]
  limit = 3
  period = "1h"
}
rule "fields" {
  paths = ["/login"]
  key   = ["header:X-Api-Key", "query:client_id", "cookie:sid", "json:device"]
  limit = 3
  period = "1h"
}
rule "route-global" {
  paths = ["/login"]
  key   = ["route", "global"]
  limit = 1000
  period = "1m"
}
rule "visitor" {
  paths = ["/login"]
  key   = ["visitor"]
  limit = 10
  period = "1m"
}
visitor {}
`

// TestKeyFromTextIsTheRequestsKey: the key forgive computes from an
// operator's values has the bytes Check made for a real request carrying
// them, whatever spelling the operator uses (the account's case and white
// space, a national phone number, an IPv4 address embedded in a NAT64
// one, another address of the same /24).
func TestKeyFromTextIsTheRequestsKey(t *testing.T) {
	p := load(t, forgivePolicy)
	e := newEngine(t, nil)
	s := rules.NewScratch(8)
	r := req{method: "POST", path: "/Login", client: "203.0.113.7", f: fields{
		header:      map[string]string{"X-Api-Key": "k-123"},
		query:       map[string]string{"client_id": "app"},
		cookie:      map[string]string{"sid": "s1"},
		contentType: "application/json",
		body:        `{"username":"Alice@Example.com","phone":"+1 415 555 2671","device":"d-9"}`,
	}}
	check(e, p, r, s)
	got := map[string]rules.Key{}
	for _, m := range s.Matches {
		if m.Op >= 0 {
			got[m.Rule.Name] = s.Ops[m.Op].Key
		}
	}
	tests := []struct {
		rule   string
		values map[string]string
	}{
		{"account-ip", map[string]string{"account": "  ALICE@example.COM", "ip": "203.0.113.7"}},
		{"network", map[string]string{"ip": "2001:db8:64::203.0.113.99"}}, // same /24, embedded
		{"phone", map[string]string{"phone": "(415) 555-2671", "phone_country": "+14155552671"}},
		{"fields", map[string]string{"header:X-Api-Key": "k-123", "query:client_id": "app", "cookie:sid": "s1", "json:device": "d-9"}},
		{"route-global", map[string]string{"route": "/LOGIN"}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			want, ok := got[tt.rule]
			if !ok {
				t.Fatalf("the request made no op for %s", tt.rule)
			}
			k, err := e.KeyFromText(p, p.Rule(tt.rule), tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if k != want {
				t.Errorf("got key %x, want the request's %x", k, want)
			}
		})
	}
}

func TestKeyFromTextRefusals(t *testing.T) {
	p := load(t, forgivePolicy)
	e := newEngine(t, nil)
	tests := []struct {
		rule   string
		values map[string]string
		want   string
	}{
		{"account-ip", map[string]string{"account": "alice@example.com"}, `missing "ip"`},
		{"account-ip", map[string]string{"account": "alice@example.com", "ip": "203.0.113.7", "phone": "x"}, `no "phone" in its key`},
		{"account-ip", map[string]string{"account": "alice@example.com", "ip": "not-an-ip"}, "ip: not an IP address"},
		{"account-ip", map[string]string{"account": " ", "ip": "203.0.113.7"}, "account:"},
		{"phone", map[string]string{"phone": "12", "phone_country": "+14155552671"}, "phone:"},
		{"fields", map[string]string{"header:X-Api-Key": "", "query:client_id": "a", "cookie:sid": "s", "json:device": "d"}, "empty value"},
		{"visitor", map[string]string{"visitor": "v1"}, "visitor: not a visitor: give its cookie's value"},
	}
	for _, tt := range tests {
		_, err := e.KeyFromText(p, p.Rule(tt.rule), tt.values)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v: got error %v, want one containing %q", tt.rule, tt.values, err, tt.want)
		}
	}
}

// stores returns the stores the forgive tests run on: the memory store,
// and a real Redis deciding at the caller's clock when EDGE_REDIS_ADDR is
// set.
func stores(t *testing.T) map[string]func(t *testing.T) rules.Store {
	return map[string]func(t *testing.T) rules.Store{
		"memstore": func(t *testing.T) rules.Store { return nil },
		"redis": func(t *testing.T) rules.Store {
			addr := os.Getenv("EDGE_REDIS_ADDR")
			if addr == "" {
				t.Skip("EDGE_REDIS_ADDR is not set: no real Redis to test against")
			}
			st, err := redisstore.New(redisstore.Options{
				URL: "redis://" + addr, UseCallerClock: true, Timeout: time.Second,
				Prefix: fmt.Sprintf("edgetest:forgive:%x:", rand.Uint64()),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// TestForgiveClearsAndExempts: on the memory store and on Redis, a forgive
// clears the key's counter and its ban, its exemption lets the key past
// the rule without charging it, the exemption ends by itself at its time,
// and another key of the rule is held to the limit all along.
func TestForgiveClearsAndExempts(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) { forgiveClearsAndExempts(t, store(t)) })
	}
}

func forgiveClearsAndExempts(t *testing.T, store rules.Store) {
	p := load(t, `
rule "per-ip" {
  paths = ["/login"]
  key   = ["ip"]
  limit = 2
  period = "1h"
  ban   = "30m"
}`)
	e := newEngine(t, store)
	s := rules.NewScratch(2)
	at := func(now time.Time, client string) rules.Verdict {
		r := req{method: "POST", path: "/login", client: client}
		return e.Check(context.Background(), now, p, r.build(), s).Verdict
	}
	const alice, mallory = "203.0.113.7", "198.51.100.9"
	for range 2 {
		at(t0, alice)
		at(t0, mallory)
	}
	if v := at(t0, alice); v != rules.RefuseLimit {
		t.Fatalf("third request: got verdict %d, want refused (and banned)", v)
	}
	at(t0, mallory)
	r := p.Rule("per-ip")
	f, err := e.Forgive(context.Background(), t0, p, r, map[string]string{"ip": alice}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !f.ExemptUntil.IsZero() {
		t.Errorf("a clear alone: got exempt until %v, want none", f.ExemptUntil)
	}
	// Cleared: counter and ban. Two more fit, then the limit holds again.
	for i := range 2 {
		if v := at(t0, alice); v != rules.Forward {
			t.Fatalf("request %d after the clear: got verdict %d, want forward", i+1, v)
		}
	}
	if v := at(t0, alice); v != rules.RefuseLimit {
		t.Fatalf("third request after the clear: got verdict %d, want refused", v)
	}
	// Exempt for 10 minutes: passes however often, is not charged.
	f, err = e.Forgive(context.Background(), t0, p, r, map[string]string{"ip": alice}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(10 * time.Minute); !f.ExemptUntil.Equal(want) {
		t.Errorf("got exempt until %v, want %v", f.ExemptUntil, want)
	}
	if got := e.Exempting(p, t0); len(got) != 1 || got[0] != "per-ip" {
		t.Errorf("Exempting: got %v, want [per-ip]", got)
	}
	for i := range 20 {
		if v := at(t0.Add(time.Duration(i)*time.Second), alice); v != rules.Forward {
			t.Fatalf("exempt request %d: got verdict %d, want forward", i+1, v)
		}
	}
	if v := at(t0, mallory); v != rules.RefuseLimit {
		t.Errorf("another key during the exemption: got verdict %d, want refused", v)
	}
	// The exemption ends by itself; the key was not charged meanwhile.
	end := t0.Add(10 * time.Minute)
	if v := at(end.Add(-time.Millisecond), alice); v != rules.Forward {
		t.Errorf("just before the end: got verdict %d, want forward", v)
	}
	for i := range 2 {
		if v := at(end.Add(time.Duration(i)*time.Millisecond), alice); v != rules.Forward {
			t.Errorf("request %d after the exemption: got verdict %d, want forward (never charged while exempt)", i+1, v)
		}
	}
	if v := at(end.Add(time.Second), alice); v != rules.RefuseLimit {
		t.Errorf("the limit after the exemption: got verdict %d, want refused", v)
	}
	if got := e.Exempting(p, end); len(got) != 0 {
		t.Errorf("Exempting after the end: got %v, want none", got)
	}
}

// TestForgiveLatestDurationHolds: a second, shorter forgive sets the
// exemption's end; it does not add to the first.
func TestForgiveLatestDurationHolds(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) { forgiveLatestDurationHolds(t, store(t)) })
	}
}

func forgiveLatestDurationHolds(t *testing.T, store rules.Store) {
	p := load(t, `
rule "per-ip" {
  key   = ["ip"]
  limit = 1
  period = "1h"
}`)
	e := newEngine(t, store)
	s := rules.NewScratch(2)
	r := p.Rule("per-ip")
	client := map[string]string{"ip": "203.0.113.7"}
	for _, d := range []time.Duration{time.Hour, time.Minute} {
		if _, err := e.Forgive(context.Background(), t0, p, r, client, d); err != nil {
			t.Fatal(err)
		}
	}
	rq := req{method: "GET", path: "/", client: "203.0.113.7"}
	now := t0.Add(2 * time.Minute)
	e.Check(context.Background(), now, p, rq.build(), s)
	if d := e.Check(context.Background(), now, p, rq.build(), s); d.Verdict != rules.RefuseLimit {
		t.Errorf("after the second forgive's minute: got verdict %d, want refused", d.Verdict)
	}
}

func TestHashClientIsKeyedAndStable(t *testing.T) {
	a, b := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("203.0.113.8")
	e1, e2 := newEngine(t, nil), newEngine(t, nil)
	if e1.HashClient(a) != e2.HashClient(a) {
		t.Error("one secret: the hashes of one address differ")
	}
	if e1.HashClient(a) == e1.HashClient(b) {
		t.Error("two addresses hash alike")
	}
	other, err := rules.NewEngine(rules.EngineOptions{Store: e1.Store(), Secret: []byte("another secret")})
	if err != nil {
		t.Fatal(err)
	}
	if other.HashClient(a) == e1.HashClient(a) {
		t.Error("another secret: the hash is the same (not keyed)")
	}
	// The Scratch's hash, after a Check, is the Engine's.
	p := load(t, `
rule "r" {
  key   = ["ip"]
  limit = 1
  period = "1h"
}`)
	s := rules.NewScratch(1)
	check(e1, p, req{method: "GET", path: "/", client: a.String()}, s)
	if s.HashClient(a) != e1.HashClient(a) {
		t.Error("Scratch.HashClient differs from Engine.HashClient")
	}
}
