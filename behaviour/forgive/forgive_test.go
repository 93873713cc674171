package forgive_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/forgive"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// onEachStore runs test as a subtest on each store the forgive tests run
// on: the memory store (nil: rulestest.NewEngine's), and a real Redis
// deciding at the caller's clock when EDGE_REDIS_ADDR is set.
func onEachStore(t *testing.T, test func(t *testing.T, store rules.Store)) {
	t.Run("memstore", func(t *testing.T) { test(t, nil) })
	t.Run("redis", func(t *testing.T) {
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
		test(t, st)
	})
}

// onePerIP is a policy of one rule, per-ip: 1 an hour per client
// address, on every route.
const onePerIP = `
rule "per-ip" {
  key    = ["ip"]
  limit  = 1
  period = "1h"
}`

// TestForgiveClearsAndExempts: on the memory store and on Redis, a forgive
// clears the key's counter and its ban, its exemption lets the key past
// the rule without charging it, the exemption ends by itself at its time,
// and another key of the rule is held to the limit all along.
func TestForgiveClearsAndExempts(t *testing.T) { onEachStore(t, forgiveClearsAndExempts) }

func forgiveClearsAndExempts(t *testing.T, store rules.Store) {
	p := rulestest.Load(t, `
rule "per-ip" {
  paths = ["/login"]
  key   = ["ip"]
  limit = 2
  period = "1h"
  ban   = "30m"
}`)
	e := rulestest.NewEngine(t, store)
	s := rules.NewScratch(2)
	at := func(now time.Time, client string) rules.Verdict {
		r := rulestest.Req{Method: "POST", Path: "/login", Client: client}
		return e.Check(context.Background(), now, p, r.Build(), s).Verdict
	}
	const alice, mallory = "203.0.113.7", "198.51.100.9"
	for range 2 {
		at(rulestest.T0, alice)
		at(rulestest.T0, mallory)
	}
	if v := at(rulestest.T0, alice); v != rules.RefuseLimit {
		t.Fatalf("third request: got verdict %d, want refused (and banned)", v)
	}
	at(rulestest.T0, mallory)
	r := p.Rule("per-ip")
	f, err := forgive.Forgive(context.Background(), e, rulestest.T0, p, r, map[string]string{"ip": alice}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !f.ExemptUntil.IsZero() {
		t.Errorf("a clear alone: got exempt until %v, want none", f.ExemptUntil)
	}
	// Cleared: counter and ban. Two more fit, then the limit holds again.
	for i := range 2 {
		if v := at(rulestest.T0, alice); v != rules.Forward {
			t.Fatalf("request %d after the clear: got verdict %d, want forward", i+1, v)
		}
	}
	if v := at(rulestest.T0, alice); v != rules.RefuseLimit {
		t.Fatalf("third request after the clear: got verdict %d, want refused", v)
	}
	// Exempt for 10 minutes: passes however often, is not charged.
	f, err = forgive.Forgive(context.Background(), e, rulestest.T0, p, r, map[string]string{"ip": alice}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := rulestest.T0.Add(10 * time.Minute); !f.ExemptUntil.Equal(want) {
		t.Errorf("got exempt until %v, want %v", f.ExemptUntil, want)
	}
	if got := forgive.Exempting(e, p, rulestest.T0); len(got) != 1 || got[0] != "per-ip" {
		t.Errorf("Exempting: got %v, want [per-ip]", got)
	}
	for i := range 20 {
		if v := at(rulestest.T0.Add(time.Duration(i)*time.Second), alice); v != rules.Forward {
			t.Fatalf("exempt request %d: got verdict %d, want forward", i+1, v)
		}
	}
	if v := at(rulestest.T0, mallory); v != rules.RefuseLimit {
		t.Errorf("another key during the exemption: got verdict %d, want refused", v)
	}
	// The exemption ends by itself; the key was not charged meanwhile.
	end := rulestest.T0.Add(10 * time.Minute)
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
	if got := forgive.Exempting(e, p, end); len(got) != 0 {
		t.Errorf("Exempting after the end: got %v, want none", got)
	}
}

// TestForgiveLatestDurationHolds: a second, shorter forgive sets the
// exemption's end; it does not add to the first.
func TestForgiveLatestDurationHolds(t *testing.T) { onEachStore(t, forgiveLatestDurationHolds) }

func forgiveLatestDurationHolds(t *testing.T, store rules.Store) {
	p := rulestest.Load(t, onePerIP)
	e := rulestest.NewEngine(t, store)
	s := rules.NewScratch(2)
	r := p.Rule("per-ip")
	client := map[string]string{"ip": "203.0.113.7"}
	for _, d := range []time.Duration{time.Hour, time.Minute} {
		if _, err := forgive.Forgive(context.Background(), e, rulestest.T0, p, r, client, d); err != nil {
			t.Fatal(err)
		}
	}
	rq := rulestest.Req{Method: "GET", Path: "/", Client: "203.0.113.7"}
	now := rulestest.T0.Add(2 * time.Minute)
	e.Check(context.Background(), now, p, rq.Build(), s)
	if d := e.Check(context.Background(), now, p, rq.Build(), s); d.Verdict != rules.RefuseLimit {
		t.Errorf("after the second forgive's minute: got verdict %d, want refused", d.Verdict)
	}
}
