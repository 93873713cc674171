package adaptive

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/basic"
	"github.com/edge-gateway/edge/behaviour/concurrency"
	"github.com/edge-gateway/edge/behaviour/shed"
	"github.com/edge-gateway/edge/rules"
)

// The adaptive limiter on an injected clock with synthetic latencies: no
// test here waits for anything real.

// gradientConfig: the compiled defaults of a gradient block with min 5, max
// 200, initial 100.
func gradientConfig() *Config {
	return &Config{
		Method: Gradient, Min: 5, Max: 200, Initial: 100,
		Backoff: DefaultBackoff, Window: time.Second, MinSamples: 10,
		NoLoadWindow: time.Minute, Smoothing: DefaultSmoothing,
	}
}

func aimdConfig() *Config {
	return &Config{Method: AIMD, Min: 2, Max: 50, Initial: 10, Backoff: 0.5, LatencyThreshold: 100 * time.Millisecond}
}

// driver runs a synthetic load on one limiter: every tick (100 ms) it sends
// what the limit lets through, up to demand (0: as many as the limit
// allows, so the limit is always in use), and the origin answers all of
// them at the end of the tick after rtt.
type driver struct {
	t   *testing.T
	l   *Limiter
	now time.Time
	cfg *Config
}

func newDriver(t *testing.T, cfg *Config) *driver {
	return &driver{t: t, l: newLimiter(cfg), now: time.Unix(1_700_000_000, 0), cfg: cfg}
}

// run drives the limiter for d at latency rtt and returns the limit after
// each second.
func (dr *driver) run(d, rtt time.Duration, demand int64) []int64 {
	dr.t.Helper()
	const tick = 100 * time.Millisecond
	var perSecond []int64
	for i := 1; time.Duration(i)*tick <= d; i++ {
		sent := int64(0)
		for (demand == 0 || sent < demand) && dr.l.TryAcquire(perMille) {
			sent++
		}
		if lim := dr.l.Limit(); sent > lim {
			dr.t.Fatalf("%d in flight under a limit of %d", sent, lim)
		}
		dr.now = dr.now.Add(tick)
		for range sent {
			dr.l.Release(dr.now, rtt, true, false)
		}
		if got := dr.l.InFlight(); got != 0 {
			dr.t.Fatalf("in flight %d after every answer", got)
		}
		lim := dr.l.Limit()
		if lim < dr.cfg.Min || lim > dr.cfg.Max {
			dr.t.Fatalf("limit %d outside [%d, %d]", lim, dr.cfg.Min, dr.cfg.Max)
		}
		if i%10 == 0 {
			perSecond = append(perSecond, lim)
		}
	}
	return perSecond
}

func TestAdaptiveGradientShrinksAfterSlowdownAndGrowsBack(t *testing.T) {
	dr := newDriver(t, gradientConfig())
	fast, slow := 20*time.Millisecond, 200*time.Millisecond

	// Steady and fast, the limit in use: the gradient is 1 and the queue
	// allowance grows the limit to max.
	got := dr.run(30*time.Second, fast, 0)
	if last := got[len(got)-1]; last != 200 {
		t.Fatalf("fast origin: limit %d after 30s (%v), want max 200", last, got)
	}
	if nl := dr.l.NoLoadRTT(); nl != fast {
		t.Fatalf("RTT_noload %v, want %v", nl, fast)
	}

	// Ten times slower: the limit shrinks every window, to the floor.
	got = dr.run(20*time.Second, slow, 0)
	for i := 1; i < len(got); i++ {
		if got[i] > got[i-1] {
			t.Fatalf("slow origin: the limit grew from %d to %d (%v)", got[i-1], got[i], got)
		}
	}
	if got[1] >= 200 || got[len(got)-1] > 10 {
		t.Fatalf("slow origin: limits %v, want a fall from 200 to at most 10", got)
	}
	low := got[len(got)-1]

	// Fast again: it grows back to max, within a minute. (The first
	// window may still hold slow answers.)
	got = dr.run(120*time.Second, fast, 0)
	if got[60] != 200 {
		t.Fatalf("fast again: limits %v from %d, want growth back to 200 within 60s", got, low)
	}
	for i := 2; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatalf("fast again: the limit fell from %d to %d (%v)", got[i-1], got[i], got)
		}
	}
}

func TestAdaptiveGradientBoundedByMinAndMax(t *testing.T) {
	cfg := gradientConfig()
	cfg.Min, cfg.Max, cfg.Initial = 30, 60, 40
	dr := newDriver(t, cfg)
	if got := dr.l.Limit(); got != 40 {
		t.Fatalf("initial limit %d, want 40", got)
	}
	if got := dr.run(60*time.Second, 10*time.Millisecond, 0); got[len(got)-1] != 60 {
		t.Fatalf("limits %v, want max 60", got)
	}
	if got := dr.run(20*time.Second, time.Second, 0); got[len(got)-1] != 30 {
		t.Fatalf("limits %v, want min 30", got) // run fails at once below min
	}
}

func TestAdaptiveGradientDoesNotGrowUnused(t *testing.T) {
	dr := newDriver(t, gradientConfig())
	// 20 a tick under a limit of 100: never half of it in use.
	got := dr.run(30*time.Second, 20*time.Millisecond, 20)
	for _, lim := range got {
		if lim != 100 {
			t.Fatalf("limits %v: an unused limit must not grow", got)
		}
	}
	// 60 a tick is in use: it grows.
	if got := dr.run(10*time.Second, 20*time.Millisecond, 60); got[len(got)-1] <= 100 {
		t.Fatalf("limits %v: a limit in use grows", got)
	}
}

func TestAdaptiveGradientForgetsAnOldNoLoad(t *testing.T) {
	dr := newDriver(t, gradientConfig())
	dr.run(10*time.Second, 20*time.Millisecond, 0)
	// The origin is slower for good: after noload_window the slower RTT is
	// its new normal and the limit grows again.
	dr.run(70*time.Second, 100*time.Millisecond, 0)
	if nl := dr.l.NoLoadRTT(); nl != 100*time.Millisecond {
		t.Fatalf("RTT_noload %v after 70s at 100ms, want 100ms", nl)
	}
	if got := dr.run(60*time.Second, 100*time.Millisecond, 0); got[len(got)-1] != 200 {
		t.Fatalf("limits %v, want growth back to max at the new normal", got)
	}
}

// oneWindow sends n requests and has them answered after rtt within one
// gradient window that closes on the last answer (dropLast: the last one is
// dropped instead); *c is the window's start and becomes its end.
func oneWindow(t *testing.T, l *Limiter, c *time.Time, n int, rtt time.Duration, dropLast bool) {
	t.Helper()
	for range n {
		if !l.TryAcquire(perMille) {
			t.Fatalf("refused at %d in flight under %d", l.InFlight(), l.Limit())
		}
	}
	for i := 1; i < n; i++ {
		l.Release(c.Add(time.Duration(i)*time.Microsecond), rtt, true, false)
	}
	*c = c.Add(l.c.Window + time.Duration(n)*time.Microsecond)
	l.Release(*c, rtt, !dropLast, dropLast)
}

func TestAdaptiveGradientQueueAllowance(t *testing.T) {
	cfg := gradientConfig()
	cfg.Smoothing, cfg.Initial = 1, 100
	l := newLimiter(cfg)
	c := time.Unix(0, 0)
	for _, w := range []struct {
		queue int64 // a written queue allowance (0: √limit)
		n     int
		rtt   time.Duration
		want  int64
		why   string
	}{
		// 10 in flight of 100 is not in use: no growth.
		{0, 10, 50 * time.Millisecond, 100, "100 (not in use)"},
		// In use at a constant RTT: gradient 1, the target 100 × 1 + √100.
		{0, 60, 50 * time.Millisecond, 110, "100 × 1 + √100 = 110"},
		// Twice as slow: gradient ½, 110 × ½ + √110.
		{0, 60, 100 * time.Millisecond, 65, "⌊55 + 10.49⌋ = 65"},
		// Four times as slow: the gradient's floor is ½, 65 × ½ + √65.
		{0, 40, 200 * time.Millisecond, 40, "⌊32.5 + 8.06⌋ = 40 (gradient floor ½)"},
		// A written queue allowance replaces √limit.
		{3, 30, 50 * time.Millisecond, 43, "40 + 3"},
	} {
		if w.queue != 0 {
			cfg2 := *cfg
			cfg2.Queue = w.queue
			l.rebind(&cfg2)
		}
		oneWindow(t, l, &c, w.n, w.rtt, false)
		if got := l.Limit(); got != w.want {
			t.Fatalf("limit %d, want %s", got, w.why)
		}
	}
}

func TestAdaptiveGradientSmoothing(t *testing.T) {
	cfg := gradientConfig() // smoothing ½
	l := newLimiter(cfg)
	c := time.Unix(0, 0)
	oneWindow(t, l, &c, 60, 50*time.Millisecond, false)
	if got := l.Limit(); got != 105 {
		t.Fatalf("limit %d, want half way from 100 to 110", got)
	}
}

func TestAdaptiveGradientDropCutsByBackoff(t *testing.T) {
	l := newLimiter(gradientConfig())
	c := time.Unix(0, 0)
	oneWindow(t, l, &c, 60, 20*time.Millisecond, true) // the last an upstream timeout
	if got := l.Limit(); got != 90 {
		t.Fatalf("limit %d after a window with a drop, want 100 × 0.9", got)
	}
}

func TestAdaptiveNeverSentIsNoSample(t *testing.T) {
	for _, cfg := range []*Config{gradientConfig(), aimdConfig()} {
		l := newLimiter(cfg)
		now := time.Unix(0, 0)
		for range 500 {
			if !l.TryAcquire(perMille) {
				break
			}
			now = now.Add(time.Second)
			l.Release(now, 0, false, false) // refused after acquiring: never sent
			if !l.TryAcquire(perMille) {
				t.Fatal("refused with nothing in flight")
			}
			l.Release(now, 0, true, false) // answered with no RTT (Forwarding not called)
		}
		if got := l.Limit(); got != cfg.Initial {
			t.Fatalf("%s: limit %d after no sample, want %d", cfg.Method, got, cfg.Initial)
		}
		if got := l.InFlight(); got != 0 {
			t.Fatalf("%s: %d in flight, want 0", cfg.Method, got)
		}
	}
}

func TestAdaptiveAIMD(t *testing.T) {
	l := newLimiter(aimdConfig()) // min 2, max 50, initial 10, backoff 0.5, threshold 100ms
	now := time.Unix(0, 0)
	fill := func(n int) {
		for range n {
			if !l.TryAcquire(perMille) {
				t.Fatalf("refused at %d in flight under %d", l.InFlight(), l.Limit())
			}
		}
	}
	// A success with the limit in use (5 of 10 in flight) adds one.
	fill(5)
	now = now.Add(time.Second)
	l.Release(now, 10*time.Millisecond, true, false)
	if got := l.Limit(); got != 11 {
		t.Fatalf("limit %d after a success in use, want 11", got)
	}
	// Not in use (4 of 11): no growth.
	l.Release(now, 10*time.Millisecond, true, false)
	if got := l.Limit(); got != 11 {
		t.Fatalf("limit %d after a success not in use, want 11", got)
	}
	// A drop halves it (backoff 0.5), once per smoothed RTT.
	now = now.Add(time.Second)
	l.Release(now, 0, false, true)
	if got := l.Limit(); got != 5 {
		t.Fatalf("limit %d after a drop, want ⌊11 × 0.5⌋ = 5", got)
	}
	l.Release(now.Add(5*time.Millisecond), 0, false, true) // the same round trip
	if got := l.Limit(); got != 5 {
		t.Fatalf("limit %d after a second drop within one RTT, want 5", got)
	}
	// An answer slower than latency_threshold cuts too, once the RTT passed.
	fill(1)
	now = now.Add(time.Second)
	l.Release(now, 150*time.Millisecond, true, false)
	if got := l.Limit(); got != 2 {
		t.Fatalf("limit %d after a slow answer, want ⌊5 × 0.5⌋ = 2", got)
	}
	// Never below min.
	fill(1)
	now = now.Add(time.Second)
	l.Release(now, 0, false, true)
	if got := l.Limit(); got != 2 {
		t.Fatalf("limit %d, want min 2", got)
	}
	// Successes in use grow it by one each, up to max.
	for range 200 {
		fill(int(l.Limit() - l.InFlight()))
		now = now.Add(time.Second)
		n := l.InFlight()
		for range n {
			l.Release(now, 10*time.Millisecond, true, false)
		}
	}
	if got := l.Limit(); got != 50 {
		t.Fatalf("limit %d, want max 50", got)
	}
}

func TestAdaptiveTryAcquireShare(t *testing.T) {
	cfg := gradientConfig()
	cfg.Initial = 20
	l := newLimiter(cfg)
	take := func(share int64) int {
		n := 0
		for l.TryAcquire(share) {
			n++
		}
		return n
	}
	if got := take(500); got != 10 {
		t.Fatalf("took %d at 50%% of 20, want 10", got)
	}
	if got := take(perMille); got != 10 {
		t.Fatalf("took %d more at 100%% of 20, want 10", got)
	}
	for range 20 {
		l.Release(time.Time{}, 0, false, false)
	}
	if got := take(1); got != 1 {
		t.Fatalf("took %d at 0.1%% of 20, want at least 1", got)
	}
}

func TestAdaptiveConcurrentNeverOverLimit(t *testing.T) {
	cfg := aimdConfig()
	cfg.Min, cfg.Max, cfg.Initial, cfg.LatencyThreshold = 8, 8, 8, 0
	l := newLimiter(cfg)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				if !l.TryAcquire(perMille) {
					continue
				}
				n := l.InFlight()
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
				l.Release(time.Unix(1, 0), time.Millisecond, true, false)
			}
		}()
	}
	wg.Wait()
	if peak > 8 || l.InFlight() != 0 {
		t.Fatalf("peak %d in flight (limit 8), %d left", peak, l.InFlight())
	}
}

// load compiles a policy with this feature and the ones it works with:
// the basic one (ip, route, global), the concurrency rule it is the block
// of and load shedding's admission (builtin imports this package: an
// internal test cannot import it).
func load(filename string, src []byte) (*rules.Policy, hcl.Diagnostics) {
	return rules.Load(filename, src, basic.Feature(), Feature(), concurrency.Feature(), shed.Feature())
}

// nopStore is a store no adaptive rule calls.
type nopStore struct{ calls int }

func (s *nopStore) Take(_ context.Context, _ time.Time, ops []rules.Op, res []rules.Result) error {
	s.calls++
	for i := range res {
		res[i] = rules.Result{Allowed: true}
	}
	return nil
}
func (s *nopStore) Close() error { return nil }

const adaptivePolicy = `
rule "login-adaptive" {
  paths     = ["/login"]
  algorithm = "concurrency"
  adaptive {
    method            = "aimd"
    min               = 1
    max               = 4
    initial           = 1
    latency_threshold = "100ms"
  }
}
`

func loadAdaptive(t *testing.T, src string) *rules.Policy {
	t.Helper()
	p, diags := load("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// Through Check, Settle and Release: the slot Check takes, the round trip
// from Forwarding to Settle, and a drop on Release.
func TestAdaptiveThroughEngine(t *testing.T) {
	p := loadAdaptive(t, adaptivePolicy)
	r := p.Rules[0]
	if !r.InFlight() || Of(r) == nil || Of(r).Method != AIMD || r.Limit != 0 || concurrency.Lease(r) != 0 {
		t.Fatalf("compiled %+v (adaptive %+v)", r, Of(r))
	}
	st := &nopStore{}
	e, err := rules.NewEngine(rules.EngineOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	req := &rules.Request{Method: []byte("POST"), Path: []byte("/login"), Client: netip.MustParseAddr("192.0.2.1"), Fields: noFields{}}
	l := LimiterOf(e, r)
	if l == nil || l.Limit() != 1 {
		t.Fatalf("limiter %v", l)
	}
	s1, s2 := rules.NewScratch(1), rules.NewScratch(1)
	d := e.Check(context.Background(), now, p, req, s1)
	if d.Verdict != rules.Forward || !d.Settle || !s1.Holds() || l.InFlight() != 1 {
		t.Fatalf("first: verdict %v settle %v holds %v in flight %d", d.Verdict, d.Settle, s1.Holds(), l.InFlight())
	}
	if d := e.Check(context.Background(), now, p, req, s2); d.Verdict != rules.Shed || s2.Holds() {
		t.Fatalf("second over the limit of 1: verdict %v, holds %v", d.Verdict, s2.Holds())
	}
	s1.Forwarding(now)
	now = now.Add(30 * time.Millisecond)
	if _, err := e.Settle(context.Background(), now, s1, 200, nil); err != nil {
		t.Fatal(err)
	}
	if l.InFlight() != 0 || l.Limit() != 2 {
		t.Fatalf("after a fast answer in use: in flight %d, limit %d, want 0 and 2", l.InFlight(), l.Limit())
	}
	// A second Release of the same request gives nothing back twice.
	if err := e.Release(context.Background(), now, s1); err != nil || l.InFlight() != 0 {
		t.Fatalf("release after settle: %v, in flight %d", err, l.InFlight())
	}
	// Two in flight, both dropped: one cut.
	for _, s := range []*rules.Scratch{s1, s2} {
		if d := e.Check(context.Background(), now, p, req, s); d.Verdict != rules.Forward {
			t.Fatalf("verdict %v under a limit of 2", d.Verdict)
		}
		s.Forwarding(now)
	}
	now = now.Add(time.Second)
	for _, s := range []*rules.Scratch{s1, s2} {
		if err := e.Release(context.Background(), now, s); err != nil {
			t.Fatal(err)
		}
	}
	if l.InFlight() != 0 || l.Limit() != 1 {
		t.Fatalf("after two drops: in flight %d, limit %d, want 0 and ⌊2 × 0.9⌋ = 1", l.InFlight(), l.Limit())
	}
	if st.calls != 0 {
		t.Fatalf("%d store calls for a node-local rule, want 0", st.calls)
	}
}

func TestAdaptiveLimiterKeptAcrossReload(t *testing.T) {
	e, err := rules.NewEngine(rules.EngineOptions{Store: &nopStore{}})
	if err != nil {
		t.Fatal(err)
	}
	p1 := loadAdaptive(t, adaptivePolicy)
	l := LimiterOf(e, p1.Rules[0])
	now := time.Unix(0, 0)
	for range 3 { // learn a limit of 4
		for l.TryAcquire(perMille) {
		}
		now = now.Add(time.Second)
		for l.InFlight() > 0 {
			l.Release(now, time.Millisecond, true, false)
		}
	}
	if l.Limit() != 4 {
		t.Fatalf("learnt %d, want max 4", l.Limit())
	}
	// The same policy reloaded: the same limiter, what it learnt kept.
	p2 := loadAdaptive(t, adaptivePolicy)
	if got := LimiterOf(e, p2.Rules[0]); got != l || got.Limit() != 4 {
		t.Fatalf("after a reload: limiter %p (was %p), limit %d", got, l, got.Limit())
	}
	// A lower max re-bounds it.
	p3 := loadAdaptive(t, strings.Replace(adaptivePolicy, "max               = 4", "max = 3", 1))
	if got := LimiterOf(e, p3.Rules[0]); got != l || got.Limit() != 3 {
		t.Fatalf("after max = 3: limit %d", got.Limit())
	}
	// Another rule has a limiter of its own; a rule without adaptive none.
	p4 := loadAdaptive(t, strings.Replace(adaptivePolicy, "login-adaptive", "other", 1)+`
rule "plain" {
  paths  = ["/x"]
  key    = ["ip"]
  limit  = 5
  period = "1m"
}`)
	if got := LimiterOf(e, p4.Rules[0]); got == l || got.Limit() != 1 {
		t.Fatalf("another rule's limiter %p, limit %d", got, got.Limit())
	}
	if got := LimiterOf(e, p4.Rules[1]); got != nil {
		t.Fatalf("a plain rule's limiter %p", got)
	}
}

func TestAdaptiveAllocs(t *testing.T) {
	e, err := rules.NewEngine(rules.EngineOptions{Store: &nopStore{}})
	if err != nil {
		t.Fatal(err)
	}
	p := loadAdaptive(t, `
rule "a" {
  algorithm = "concurrency"
  adaptive {}
}`)
	r := p.Rules[0]
	LimiterOf(e, r) // created on first use
	now := time.Unix(0, 0)
	allocs := testing.AllocsPerRun(1000, func() {
		l := LimiterOf(e, r)
		if l.TryAcquire(perMille) {
			now = now.Add(time.Millisecond)
			l.Release(now, 5*time.Millisecond, true, false)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request, want 0", allocs)
	}
}

func TestAdaptiveCompile(t *testing.T) {
	p := loadAdaptive(t, `
rule "a" {
  paths     = ["/login"]
  key       = ["global"]
  algorithm = "concurrency"
  adaptive {
    min = 5
    max = 200
  }
}`)
	a := Of(p.Rules[0])
	want := Config{Method: Gradient, Min: 5, Max: 200, Initial: 20, Backoff: 0.9, Window: time.Second, MinSamples: 10, NoLoadWindow: time.Minute, Smoothing: 0.5}
	if a == nil || *a != want {
		t.Fatalf("compiled %+v, want %+v", a, want)
	}
	rule := func(body string) string {
		return "rule \"r\" {\n  paths = [\"/login\"]\n" + body + "\n}\n"
	}
	for _, tc := range []struct{ name, src, want string }{
		{"no concurrency", rule(`key = ["ip"]
  limit = 5
  period = "1m"
  adaptive {}`), `needs algorithm = "concurrency"`},
		{"limit", rule(`algorithm = "concurrency"
  limit = 5
  adaptive {}`), "rule \"r\" is adaptive: its limit is found"},
		{"lease", rule(`algorithm = "concurrency"
  lease = "1m"
  adaptive {}`), "nothing is leased in the store"},
		{"key", rule(`algorithm = "concurrency"
  key = ["ip"]
  adaptive {}`), "remove key (or write [\"global\"])"},
		{"method", rule(`algorithm = "concurrency"
  adaptive { method = "vegas" }`), `"vegas" is not an adaptive method`},
		{"min over max", rule(`algorithm = "concurrency"
  adaptive {
    min = 50
    max = 10
  }`), "min 50 is above max 10"},
		{"initial", rule(`algorithm = "concurrency"
  adaptive {
    max     = 10
    initial = 11
  }`), "initial 11 is outside min 1 and max 10"},
		{"zero", rule(`algorithm = "concurrency"
  adaptive { min = 0 }`), "min must be between 1"},
		{"backoff", rule(`algorithm = "concurrency"
  adaptive { backoff = 1.5 }`), "between 0 and 1 exclusive"},
		{"smoothing", rule(`algorithm = "concurrency"
  adaptive { smoothing = 0 }`), "above 0 and at most 1"},
		{"window", rule(`algorithm = "concurrency"
  adaptive { window = "soon" }`), `"soon" is not a positive duration`},
		{"noload", rule(`algorithm = "concurrency"
  adaptive { window = "1m" }`), "noload_window 1m0s must be at least twice window 1m0s"},
		{"window on aimd", rule(`algorithm = "concurrency"
  adaptive {
    method = "aimd"
    window = "2s"
  }`), `window is the gradient method's; rule "r" uses "aimd"`},
		{"threshold on gradient", rule(`algorithm = "concurrency"
  adaptive { latency_threshold = "1s" }`), `latency_threshold is the aimd method's`},
		{"queue", rule(`algorithm = "concurrency"
  adaptive {
    max   = 10
    queue = 11
  }`), "between 1 and max (10)"},
		{"unknown attribute", rule(`algorithm = "concurrency"
  adaptive { maximum = 10 }`), `"maximum"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load("test.hcl", []byte(tc.src))
			if !diags.HasErrors() {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("diagnostics %q do not say %q", diags.Error(), tc.want)
			}
		})
	}
}

// noFields is a request without headers, cookies, query or body.
type noFields struct{}

func (noFields) Header([]byte) []byte          { return nil }
func (noFields) Cookie([]byte) []byte          { return nil }
func (noFields) Query([]byte) []byte           { return nil }
func (noFields) RawQuery() []byte              { return nil }
func (noFields) Body() (contentType, b []byte) { return nil, nil }
func (noFields) Cookies() []byte               { return nil }

// Explain decides an adaptive rule as admission would, and takes no slot.
func TestAdaptiveExplain(t *testing.T) {
	p := loadAdaptive(t, adaptivePolicy) // limit 1
	e, err := rules.NewEngine(rules.EngineOptions{Store: &nopStore{}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	req := &rules.Request{Method: []byte("POST"), Path: []byte("/login"), Client: netip.MustParseAddr("192.0.2.1"), Fields: noFields{}}
	l := LimiterOf(e, p.Rules[0])
	s := rules.NewScratch(1)
	if d := e.Explain(context.Background(), now, p, req, s); d.Verdict != rules.Forward || s.Matches[0].Outcome != rules.OutcomeAllow || l.InFlight() != 0 {
		t.Fatalf("under the limit: verdict %v, outcome %v, in flight %d", d.Verdict, s.Matches[0].Outcome, l.InFlight())
	}
	held := rules.NewScratch(1)
	if d := e.Check(context.Background(), now, p, req, held); d.Verdict != rules.Forward {
		t.Fatalf("check: %v", d.Verdict)
	}
	d := e.Explain(context.Background(), now, p, req, s)
	if d.Verdict != rules.Shed || d.Refusing != p.Rules[0] || s.Matches[0].Outcome != rules.OutcomeDeny || d.RetryAfter != time.Second || l.InFlight() != 1 {
		t.Fatalf("at the limit: verdict %v, refusing %v, outcome %v, retry after %v, in flight %d", d.Verdict, d.Refusing, s.Matches[0].Outcome, d.RetryAfter, l.InFlight())
	}
	_ = e.Release(context.Background(), now, held)
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d after release", l.InFlight())
	}
}

// adaptiveRequestCycle is one request's Check, Forwarding and Settle on an
// adaptive rule (the gradient's defaults): the slot taken and given back
// with its round trip.
func adaptiveRequestCycle(tb testing.TB) func() {
	p, diags := load("test.hcl", []byte(`
rule "a" {
  paths     = ["/login"]
  algorithm = "concurrency"
  adaptive {}
}`))
	if diags.HasErrors() {
		tb.Fatal(diags.Error())
	}
	e, err := rules.NewEngine(rules.EngineOptions{Store: &nopStore{}})
	if err != nil {
		tb.Fatal(err)
	}
	req := &rules.Request{Method: []byte("POST"), Path: []byte("/login"), Client: netip.MustParseAddr("192.0.2.1"), Fields: noFields{}}
	s := rules.NewScratch(1)
	now := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	return func() {
		d := e.Check(ctx, now, p, req, s)
		if d.Verdict != rules.Forward {
			tb.Fatalf("verdict %v", d.Verdict)
		}
		s.Forwarding(now)
		now = now.Add(time.Millisecond)
		_, _ = e.Settle(ctx, now, s, 200, nil)
	}
}

func TestAdaptiveRequestAllocatesNothing(t *testing.T) {
	cycle := adaptiveRequestCycle(t)
	cycle() // the limiter is created on first use
	if n := testing.AllocsPerRun(1000, cycle); n != 0 {
		t.Fatalf("%v allocations per request (Check, Forwarding, Settle), want 0", n)
	}
}

func BenchmarkAdaptiveRequest(b *testing.B) {
	cycle := adaptiveRequestCycle(b)
	cycle()
	b.ReportAllocs()
	for b.Loop() {
		cycle()
	}
}
