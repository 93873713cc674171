package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/rules/memstore"
)

// stormFakeClock is the edge's and the driver's time in the test.
type stormFakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stormFakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stormFakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// startStormEdge runs a real edge on testdata/retry-storm.hcl in-process on
// loopback, on clk, with a seeded jitter source, and returns its target.
func startStormEdge(t *testing.T, clk *stormFakeClock) target {
	t.Helper()
	src, err := os.ReadFile("testdata/retry-storm.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := builtin.Load("testdata/retry-storm.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })}
	oln, ln := listenLoopback(t), listenLoopback(t)
	go func() { _ = origin.Serve(oln) }()
	t.Cleanup(func() { origin.Close() })
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	draws := rand.New(rand.NewPCG(1, 2))
	srv, err := gateway.New(gateway.Options{
		Policy: p, Store: st, Upstream: "http://" + oln.Addr().String(), Clock: clk, Extensions: builtin.Extensions(),
		RetryJitterRand: func() uint64 { mu.Lock(); defer mu.Unlock(); return draws.Uint64() },
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	tg, err := parseTarget("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestRetryStormShortForm runs every mode of the scenario through the real
// edge on a virtual clock (the edge's and the clients'), 200 clients on a
// limit of 100 per 4 s, and checks the structure of the arrivals, not
// their timing on this machine:
//
//   - naive: the 100 refused all come back in one 100 ms bin, at the true
//     retry time (the window's end), the same Retry-After for all;
//   - with retry_after_jitter = "100%": the true wait is 3.95 s, so
//     Retry-After is 4 + 0 … 3 s: the retries spread over those four
//     seconds, none before the true retry time, the peak a fraction of
//     naive's;
//   - pacing: never before the true retry time, and spread;
//   - the retry budget holds retries to 10% of the requests plus its
//     floor, and the rest give up.
func TestRetryStormShortForm(t *testing.T) {
	const n = 200
	period := 4 * time.Second
	clk := &stormFakeClock{t: time.Unix(1_800_000_001, 0)}
	tg := startStormEdge(t, clk)
	cfg := config{target: tg, timeout: 10 * time.Second}
	send := stormSender(cfg, n)
	vclk := stormClock{virtual: true, now: clk.Now, set: clk.Set}
	runs := map[string]*stormRun{}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, m := range stormModes {
		r, err := runStormMode(context.Background(), m, n, period, 100_000, vclk, send, rng)
		if err != nil {
			t.Fatal(err)
		}
		if r.refused != n-100 || r.early != 0 {
			t.Errorf("%s: %d refused at once (want %d), %d retries early (want 0)", m.name, r.refused, n-100, r.early)
		}
		runs[m.path] = r
	}

	naive := runs["/storm/naive"]
	np, nb := naive.peak()
	// Round 1: the 100 refused come back together at 4 s; 100 admitted,
	// the other 100 (refused by then: the first wave's admitted used the
	// window) and so on: every round is one bin.
	if len(naive.raValues) != 1 || naive.raValues[4] != n-100 {
		t.Errorf("naive: Retry-After values %v, want 4 s for all %d", naive.raValues, n-100)
	}
	if np != n-100 || naive.minAfterTrue != stormMargin {
		t.Errorf("naive: peak %d per 100 ms (want %d: all together), first retry %v after the true time (want %v)", np, n-100, naive.minAfterTrue, stormMargin)
	}

	jit := runs["/storm/jitter"]
	jp, jb := jit.peak()
	for s, c := range jit.raValues {
		if s < 4 || s > 7 || c == 0 {
			t.Errorf("jitter: Retry-After %d s for %d clients, want 4 … 7", s, c)
		}
	}
	if len(jit.raValues) != 4 {
		t.Errorf("jitter: Retry-After values %v, want all of 4 … 7 s", jit.raValues)
	}
	if jp*2 > np || jb <= nb {
		t.Errorf("jitter: peak %d in %d bins, naive %d in %d: want under half the peak, in more bins", jp, jb, np, nb)
	}

	pace := runs["/storm/pacing"]
	pp, pb := pace.peak()
	if pp*4 > np || pb < 10 || pace.minAfterTrue < 0 {
		t.Errorf("pacing: peak %d in %d bins (naive %d), first retry %v after the true time: want spread, never early", pp, pb, np, pace.minAfterTrue)
	}

	bud := runs["/storm/budget"]
	if max := int(stormBudgetFloor + stormBudgetRatio*n); len(bud.retries) > max || bud.gaveUp == 0 {
		t.Errorf("budget: %d retries (want at most %d), %d gave up (want some)", len(bud.retries), max, bud.gaveUp)
	}
	t.Logf("peaks per 100 ms: naive %d, jitter %d, pacing %d, budget %d", np, jp, pp, func() int { p, _ := bud.peak(); return p }())
}

func TestRetryDelay(t *testing.T) {
	a := stormAnswer{retryAfter: 4 * time.Second, rateLimitT: 6 * time.Second}
	if d := stormModes[0].retryDelay(a, 3, 0.99); d != 4*time.Second {
		t.Errorf("naive: %v, want Retry-After exactly", d)
	}
	pacing := stormMode{pacing: true}
	for _, tc := range []struct {
		attempt int
		u       float64
		want    time.Duration
	}{
		{0, 0, 6 * time.Second},                      // the longer of Retry-After and t, nothing added
		{0, 0.5, 9 * time.Second},                    // + half of base 6 s
		{2, 0.5, 6*time.Second + 12*time.Second},     // + half of 6 s × 4
		{10, 0.5, 6*time.Second + stormBackoffCap/2}, // capped
		{40, 0.5, 6*time.Second + stormBackoffCap/2}, // no overflow
	} {
		if d := pacing.retryDelay(a, tc.attempt, tc.u); d != tc.want {
			t.Errorf("pacing attempt %d u %v: %v, want %v", tc.attempt, tc.u, d, tc.want)
		}
	}
	b := newRetryBudget()
	took := 0
	for range 100 {
		b.deposit()
	}
	for b.take() {
		took++
	}
	if took != stormBudgetFloor+10 {
		t.Errorf("budget after 100 requests: %d retries, want %d", took, stormBudgetFloor+10)
	}
}

func TestParseStormAnswer(t *testing.T) {
	a := parseStormAnswer(429, "7", `"a";r=0;t=7, "b";r=3;t=9, "c";r=0;t=2`, `"a";q=100;w=4, "b";q=1;w=60`)
	if a.retryAfter != 7*time.Second || a.rateLimitT != 7*time.Second || a.window != 4*time.Second {
		t.Errorf("got %+v", a)
	}
	if a := parseStormAnswer(429, "", "", ""); a.retryAfter != 0 || a.rateLimitT != 0 || a.window != 0 {
		t.Errorf("empty: %+v", a)
	}
}
