package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/internal/testnet"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// Concurrency limits through the real server (docs/policy.md,
// "Concurrency limits"): edge nodes on loopback in front of the demo
// origin, which holds requests until the test releases them and reports
// its own in-flight count and peak (demo/hold.go), on a memory store and on
// a real redis-server behind failclosed, as cmd/edge runs it. Nothing rests
// on timing: the test waits for "N held" at the origin, or for the replies.
// Each lease is an hour long, so a slot that comes back was given back by
// Settle or Release, never by its lease's end.

// concurrencyE2EPolicy: 10 logins in flight per IP (sensitive: bare 429),
// 2 exports in flight for everyone (informative 429).
const concurrencyE2EPolicy = `
edge { upstream_timeout = "%s" }
rule "login-in-flight" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 10
  lease     = "1h"
  sensitive = true
}
rule "export-in-flight" {
  paths     = ["/api/export"]
  key       = ["global"]
  algorithm = "concurrency"
  limit     = 2
  lease     = "1h"
}
`

// concStores are the stores the tests run on; new returns one store per
// node of a fleet (nodes share the counters either way).
var concStores = []struct {
	name string
	new  func(t *testing.T, nodes int) []rules.Store
}{
	{"memory", func(t *testing.T, nodes int) []rules.Store {
		ms, err := memstore.New(memstore.Options{MaxKeys: 1000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ms.Close() })
		out := make([]rules.Store, nodes)
		for i := range out {
			out[i] = ms // one process's store, shared
		}
		return out
	}},
	{"redis", func(t *testing.T, nodes int) []rules.Store {
		url := testredis.Start(t).URL()
		var out []rules.Store
		for range nodes {
			// Each node its own client and its own failclosed (its deny
			// cache, its breaker), on one redis-server, as cmd/edge.
			rs, err := redisstore.New(redisstore.Options{URL: url, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			fc, err := failclosed.New(rs, failclosed.Options{FailureSpan: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fc.Close() })
			out = append(out, fc)
		}
		return out
	}},
}

type concNode struct {
	origin *demo.Origin
	addrs  []string // the nodes' public listeners
}

// startConcNodes starts one node per store in front of one demo origin
// (upstream: when not empty, that address instead).
func startConcNodes(t *testing.T, src string, stores []rules.Store, upstream string) *concNode {
	t.Helper()
	return startConcNodesClock(t, src, stores, upstream, nil)
}

// startConcNodesClock is startConcNodes with the nodes' clock (nil: the
// system's).
func startConcNodesClock(t *testing.T, src string, stores []rules.Store, upstream string, clk rules.Clock) *concNode {
	t.Helper()
	p, diags := builtin.Load("concurrency.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	n := &concNode{origin: demo.New()}
	octx, ocancel := context.WithCancel(context.Background())
	oln := listen(t)
	odone := make(chan struct{})
	go func() { defer close(odone); _ = n.origin.Serve(octx, oln) }()
	t.Cleanup(func() { ocancel(); <-odone }) // its shutdown releases every held request
	if upstream == "" {
		upstream = oln.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { n.origin.StopHolding(); cancel(); wg.Wait() })
	t.Cleanup(concClient.CloseIdleConnections)
	for _, st := range stores {
		srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: st, KeySecret: []byte("one fleet, one secret, 32+ bytes long"), Upstream: "http://" + upstream, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		ln := listen(t)
		n.addrs = append(n.addrs, ln.Addr().String())
		wg.Add(1)
		go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	}
	return n
}

// concClient has no timeout of its own: each request's context is its
// guard, so a held request waits as long as the test holds it.
var concClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}

// send starts a request to node i in the background, under ctx; its reply
// (status 0 when it failed) arrives on the channel.
func (n *concNode) send(ctx context.Context, i int, method, path string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+n.addrs[i]+path, strings.NewReader("username=alice&password=wrong"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := concClient.Do(req)
		if err != nil {
			ch <- reply{}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- reply{resp.StatusCode, resp.Header, string(b)}
	}()
	return ch
}

// waitHeld waits until the origin holds want requests (waitOriginHeld).
func (n *concNode) waitHeld(t *testing.T, want int) {
	t.Helper()
	waitOriginHeld(t, n.origin, want)
}

// waitOriginHeld waits until o holds want requests (its own signal, under
// a generous guard) and checks it holds no more.
func waitOriginHeld(t *testing.T, o *demo.Origin, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := o.WaitHeld(ctx, want); err != nil {
		t.Fatalf("waiting for %d held at the origin: %v (held %d)", want, err, o.InFlight().Held)
	}
	if got := o.InFlight().Held; got != want {
		t.Fatalf("the origin holds %d, want %d", got, want)
	}
}

// recv waits for one reply, under a generous guard.
func recv(t *testing.T, what string, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no reply within 30s", what)
		return reply{}
	}
}

// wantBare429 checks a sensitive route's refusal: the bare 429.
func wantBare429(t *testing.T, what string, r reply) {
	t.Helper()
	if r.status != http.StatusTooManyRequests || r.body != "Too Many Requests\n" || r.header.Get("Retry-After") != "" || r.header.Get("RateLimit") != "" {
		t.Fatalf("%s: %d %q %v, want the bare 429", what, r.status, r.body, r.header)
	}
}

// sendHeld sends one request to node i and waits until either the origin
// holds it (held: ch will carry its reply once released) or its reply
// comes back first (r), under a generous guard.
func (n *concNode) sendHeld(t *testing.T, ctx context.Context, i int, method, path string) (ch <-chan reply, held bool, r reply) {
	t.Helper()
	want := n.origin.InFlight().Held + 1
	ch = n.send(ctx, i, method, path)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	heldc := make(chan error, 1)
	go func() { heldc <- n.origin.WaitHeld(wctx, want) }()
	select {
	case err := <-heldc:
		if err != nil {
			t.Fatalf("%s %s: neither held at the origin nor answered: %v", method, path, err)
		}
		return ch, true, reply{}
	case r = <-ch:
		return nil, false, r
	}
}

// admitHeld sends one request that must reach the origin and be held.
func (n *concNode) admitHeld(t *testing.T, ctx context.Context, i int, method, path string) <-chan reply {
	t.Helper()
	ch, held, r := n.sendHeld(t, ctx, i, method, path)
	if !held {
		t.Fatalf("%s %s on node %d: %d %q, want it held at the origin", method, path, i, r.status, r.body)
	}
	return ch
}

// fill fills node i's slots of method path with requests the origin holds:
// it sends one at a time, each either held (it counts) or refused with
// 429 while a slot given back a moment ago is still on its way back (it
// is sent again, polling, under a guard), until want more are held. It
// returns their reply channels. A slot that never comes back fails it.
func (n *concNode) fill(t *testing.T, ctx context.Context, i int, method, path string, want int) []<-chan reply {
	t.Helper()
	var out []<-chan reply
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < want {
		ch, held, r := n.sendHeld(t, ctx, i, method, path)
		if held {
			out = append(out, ch)
			continue
		}
		if r.status != http.StatusTooManyRequests {
			t.Fatalf("%s %s while filling: %d %q, want held at the origin or 429", method, path, r.status, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: only %d of %d slots came back within 20s (leaked)", method, path, len(out), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out
}

// TestConcurrencyHundredLoginsTenAtTheOrigin: 100 simultaneous logins
// against a limit of 10 in flight: exactly 10 reach the origin (its own
// peak says so, at every instant), the other 90 get the bare 429 at once;
// released, the 10 are answered, and every slot is back. Then clients hang
// up while their logins are held: once the origin answers those, their
// slots are back too.
func TestConcurrencyHundredLoginsTenAtTheOrigin(t *testing.T) {
	for _, st := range concStores {
		t.Run(st.name, func(t *testing.T) {
			n := startConcNodes(t, fmt.Sprintf(concurrencyE2EPolicy, "10s"), st.new(t, 1), "")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n.origin.Hold("/login")
			n.origin.ResetPeak()

			replies := make(chan reply, 100)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					replies <- <-n.send(ctx, 0, "POST", "/login") // status 0 if ctx ends first
				}()
			}
			close(start)
			for i := range 90 {
				wantBare429(t, fmt.Sprintf("refusal %d", i+1), recv(t, "refusals", replies))
			}
			n.waitHeld(t, 10)
			if r := n.origin.InFlight(); r.Peak != 10 || r.InFlight != 10 {
				t.Fatalf("the origin has %d in flight, peak %d; want 10 and 10", r.InFlight, r.Peak)
			}
			if got := n.origin.Release(-1); got != 10 {
				t.Fatalf("released %d, want 10", got)
			}
			for i := range 10 {
				if r := recv(t, "held logins", replies); r.status != http.StatusUnauthorized {
					t.Fatalf("held login %d: %d %q, want the origin's 401", i+1, r.status, r.body)
				}
			}
			wg.Wait()
			if r := n.origin.InFlight(); r.Peak != 10 {
				t.Fatalf("the origin's peak is %d, want 10", r.Peak)
			}

			// Every slot is back: exactly 10 are held again, the 11th is
			// refused. The 10 clients then hang up while held.
			cctx, hangUp := context.WithCancel(ctx)
			n.fill(t, cctx, 0, "POST", "/login", 10)
			wantBare429(t, "11th", recv(t, "11th", n.send(ctx, 0, "POST", "/login")))
			hangUp()
			// The origin still works on them (a held request stays held
			// when its client goes away): their slots are still taken.
			wantBare429(t, "while the hung-up logins are at the origin", recv(t, "probe", n.send(ctx, 0, "POST", "/login")))
			n.origin.Release(-1)
			// Answered, they give their slots back: 10 fit again.
			held := n.fill(t, ctx, 0, "POST", "/login", 10)
			wantBare429(t, "11th after the hang-ups", recv(t, "11th", n.send(ctx, 0, "POST", "/login")))
			n.origin.StopHolding()
			for i, ch := range held {
				if r := recv(t, "held", ch); r.status != http.StatusUnauthorized {
					t.Fatalf("login %d: %d, want 401", i+1, r.status)
				}
			}
			if r := n.origin.InFlight(); r.Peak > 10 {
				t.Fatalf("the origin's peak is %d, over the limit of 10", r.Peak)
			}
		})
	}
}

// TestConcurrencyInformativeRefusal: on an ordinary route the refusal is
// the informative 429 with Retry-After 1 (concurrency.RetryAfter, not
// the hour until the oldest lease ends) and no RateLimit fields: a
// concurrency rule is no quota over a window; nor does an admitted answer
// carry them.
func TestConcurrencyInformativeRefusal(t *testing.T) {
	for _, st := range concStores {
		t.Run(st.name, func(t *testing.T) {
			n := startConcNodes(t, fmt.Sprintf(concurrencyE2EPolicy, "10s"), st.new(t, 1), "")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n.origin.Hold("/api/export")
			held := n.fill(t, ctx, 0, "GET", "/api/export", 2)
			r := recv(t, "3rd export", n.send(ctx, 0, "GET", "/api/export"))
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" || !strings.Contains(r.body, `"violated-policies":["export-in-flight"]`) {
				t.Fatalf("3rd export: %d Retry-After %q %q, want 429, Retry-After 1, the rule named", r.status, r.header.Get("Retry-After"), r.body)
			}
			if r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
				t.Fatalf("3rd export: RateLimit fields %v on a concurrency refusal", r.header)
			}
			n.origin.StopHolding()
			for _, ch := range held {
				r := recv(t, "export", ch)
				if r.status != http.StatusOK || r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
					t.Fatalf("admitted export: %d %v, want 200 without RateLimit fields", r.status, r.header)
				}
			}
		})
	}
}

// TestConcurrencyTimedOutKeepsItsLease: a login the origin does not answer
// within upstream_timeout gets a 504, but the origin may still be working
// on it (a password hash under load), so its slot stays taken until its
// lease ends: a client whose logins time out cannot put another limit's
// worth at the busy origin on every timeout. Once the lease has ended (the
// nodes' clock moved past it) the slots are free again: never leaked.
func TestConcurrencyTimedOutKeepsItsLease(t *testing.T) {
	for _, st := range concStores {
		t.Run(st.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			var stores []rules.Store
			if st.name != "redis" {
				stores = st.new(t, 1)
			} else {
				// Redis decides at its own TIME in production; here at the
				// nodes' clock, so that the lease's end is the test's move.
				rs, err := redisstore.New(redisstore.Options{URL: testredis.Start(t).URL(), Timeout: time.Second, UseCallerClock: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rs.Close() })
				stores = []rules.Store{rs}
			}
			n := startConcNodesClock(t, fmt.Sprintf(concurrencyE2EPolicy, "1s"), stores, "", clk)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n.origin.Hold("/login")
			var first []<-chan reply
			for range 10 {
				first = append(first, n.send(ctx, 0, "POST", "/login"))
			}
			n.waitHeld(t, 10)
			for i, ch := range first {
				if r := recv(t, "timed out", ch); r.status != http.StatusGatewayTimeout {
					t.Fatalf("login %d: %d %q, want 504 after upstream_timeout", i+1, r.status, r.body)
				}
			}
			// The origin still holds the 10 the edge gave up on: their
			// leases stand, and the 11th is refused (bare: sensitive).
			if r := recv(t, "after the timeouts", n.send(ctx, 0, "POST", "/login")); r.status != http.StatusTooManyRequests {
				t.Fatalf("a login while 10 timed-out ones are at the origin: %d %q, want 429", r.status, r.body)
			}
			if got := n.origin.InFlight().InFlight; got != 10 {
				t.Fatalf("origin in flight %d, want the 10 it still works on", got)
			}
			// The lease ("1h") ends: all 10 slots are free again.
			clk.Advance(time.Hour + time.Second)
			var second []<-chan reply
			for range 10 {
				second = append(second, n.send(ctx, 0, "POST", "/login"))
			}
			n.waitHeld(t, 20)
			for i, ch := range second {
				if r := recv(t, "after the lease", ch); r.status != http.StatusGatewayTimeout {
					t.Fatalf("after the lease, login %d: %d %q, want 504 (a 429 is a slot the lease did not end)", i+1, r.status, r.body)
				}
			}
		})
	}
}

// TestConcurrencySlotsBackAfterOriginErrors: with the origin down, every
// login is a 502, never a 429: each gives its slot back (Release), or the
// 11th would be refused.
func TestConcurrencySlotsBackAfterOriginErrors(t *testing.T) {
	for _, st := range concStores {
		t.Run(st.name, func(t *testing.T) {
			addr := testnet.DeadAddr(t) // connection refused
			n := startConcNodes(t, fmt.Sprintf(concurrencyE2EPolicy, "10s"), st.new(t, 1), addr)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range 25 {
				if r := recv(t, "login", n.send(ctx, 0, "POST", "/login")); r.status != http.StatusBadGateway {
					t.Fatalf("login %d to a dead origin: %d %q, want 502", i+1, r.status, r.body)
				}
			}
			// And concurrently: 10 at once, all 502.
			var chs []<-chan reply
			for range 10 {
				chs = append(chs, n.send(ctx, 0, "POST", "/login"))
			}
			for i, ch := range chs {
				if r := recv(t, "login", ch); r.status != http.StatusBadGateway {
					t.Fatalf("concurrent login %d: %d, want 502", i+1, r.status)
				}
			}
		})
	}
}

// TestConcurrencySharedByTheFleet: two nodes on one store share the limit:
// with node A's two exports held, node B refuses a third; once A's are
// answered, B admits at once (no node keeps a refusal of a slot another
// node gave back: failclosed caches no concurrency refusal).
func TestConcurrencySharedByTheFleet(t *testing.T) {
	for _, st := range concStores {
		t.Run(st.name, func(t *testing.T) {
			n := startConcNodes(t, fmt.Sprintf(concurrencyE2EPolicy, "10s"), st.new(t, 2), "")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n.origin.Hold("/api/export")
			onA := n.fill(t, ctx, 0, "GET", "/api/export", 2)
			for range 3 { // more than once: a cached refusal answers the second
				if r := recv(t, "on B", n.send(ctx, 1, "GET", "/api/export")); r.status != http.StatusTooManyRequests {
					t.Fatalf("node B with A's 2 in flight: %d, want 429", r.status)
				}
			}
			n.origin.Release(-1)
			for _, ch := range onA {
				if r := recv(t, "on A", ch); r.status != http.StatusOK {
					t.Fatalf("A's export: %d, want 200", r.status)
				}
			}
			// A gave both slots back before its answers left: B admits
			// both at once, without waiting for anything.
			var onB []<-chan reply
			for range 2 {
				onB = append(onB, n.admitHeld(t, ctx, 1, "GET", "/api/export"))
			}
			if r := recv(t, "third on A", n.send(ctx, 0, "GET", "/api/export")); r.status != http.StatusTooManyRequests {
				t.Fatalf("node A with B's 2 in flight: %d, want 429", r.status)
			}
			n.origin.StopHolding()
			for _, ch := range onB {
				if r := recv(t, "on B", ch); r.status != http.StatusOK {
					t.Fatalf("B's export: %d, want 200", r.status)
				}
			}
		})
	}
}

// TestConcurrencyDryRunUnderDecideListen: the decision-only listener never
// forwards, so a dry-run concurrency rule's slot is given back as soon as
// the decision is answered: five decisions in a row, with a limit of one,
// are all "allow", none a would-have refusal. (An enforcing concurrency
// rule is refused under decide_listen: rules/concurrency_test.go.)
func TestConcurrencyDryRunUnderDecideListen(t *testing.T) {
	p, diags := builtin.Load("decide.hcl", []byte(`
edge {
  decide_listen   = "127.0.0.1:18099"
  trusted_proxies = ["127.0.0.1/32"]
}
rule "login-dry" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 1
  dry_run   = true
}`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	reg := prometheus.NewRegistry()
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: ms, Upstream: "http://127.0.0.1:1", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dln := listen(t)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeDecide(ctx, dln) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 5 {
		r := do(t, "GET", "http://"+dln.Addr().String()+"/auth", "", "X-Original-Method", "POST", "X-Original-URI", "/login")
		if r.status != http.StatusOK {
			t.Fatalf("decision %d: %d %q, want 200", i+1, r.status, r.body)
		}
	}
	decisions := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "edge_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["rule"] == "login-dry" {
				decisions[labels["decision"]] += m.GetCounter().GetValue()
			}
		}
	}
	if decisions["allow"] != 5 || decisions["dry_run_deny"] != 0 {
		t.Fatalf("login-dry's decisions %v, want 5 allow and no dry_run_deny (a slot kept after a decision)", decisions)
	}
}
