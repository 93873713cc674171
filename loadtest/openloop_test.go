package main

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/valyala/fasthttp"
)

// fakeTarget is a target on the bubble's clock: each request takes
// service; one that arrives in [stallFrom, stallTo) waits until stallTo
// first (stallTo zero: stalls until the caller's timeout), as a target
// whose event loop is stuck (a GC pause, a lock, a full accept queue).
type fakeTarget struct {
	service            time.Duration
	stallFrom, stallTo time.Time
	timeout            time.Duration
	calls              atomic.Int64
}

func (f *fakeTarget) do(int64) (int, error) {
	f.calls.Add(1)
	now := time.Now()
	if !now.Before(f.stallFrom) && (f.stallTo.IsZero() || now.Before(f.stallTo)) {
		if f.stallTo.IsZero() || f.stallTo.Sub(now) >= f.timeout {
			time.Sleep(f.timeout)
			return 0, fasthttp.ErrTimeout
		}
		time.Sleep(f.stallTo.Sub(now))
	}
	time.Sleep(f.service)
	return 200, nil
}

func fakeSenders(f *fakeTarget, n int) []genSender {
	out := make([]genSender, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// checkAccounting fails unless every request due in the window is
// answered, failed or missed, and the histogram holds the answered ones,
// the timeouts and the missed ones.
func checkAccounting(t *testing.T, res *genResult) {
	t.Helper()
	if got := res.answered() + res.failed() + res.missed; got != res.due {
		t.Errorf("answered %d + failed %d + missed %d = %d, want the %d due", res.answered(), res.failed(), res.missed, got, res.due)
	}
	if got, want := res.hist.TotalCount(), res.answered()+res.errs[errTimeout]+res.missed; got != want {
		t.Errorf("histogram holds %d latencies, want %d (answered, timed out, missed)", got, want)
	}
	if got, want := res.bounded, res.errs[errTimeout]+res.missed; got != want {
		t.Errorf("bounded %d, want %d", got, want)
	}
}

// TestOpenLoopOnSchedule: a target that keeps up gets exactly rate ×
// duration requests in the window, each answered within its service time
// of its due time (the bubble's timers are exact), and the warm-up's are
// not counted.
func TestOpenLoopOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{service: time.Millisecond, timeout: time.Second, stallFrom: time.Now().Add(time.Hour)}
		spec := genSpec{rate: 1000, warmup: 500 * time.Millisecond, duration: 2 * time.Second, timeout: time.Second, limit: 1 << 20, kinds: 1}
		res, err := generate(t.Context(), spec, fakeSenders(f, 4))
		if err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, res)
		if res.due != 2000 || res.answered() != 2000 || res.statuses[200] != 2000 {
			t.Errorf("due %d, answered %d (200: %d), want 2000 each", res.due, res.answered(), res.statuses[200])
		}
		if got := f.calls.Load(); got != 4+500+2000 {
			t.Errorf("target got %d requests, want 4 opening + 500 warm-up + 2000 measured", got)
		}
		if max := res.hist.Max(); max > 1001 || res.hist.Min() < 1000 {
			t.Errorf("latencies %d..%dµs, want the 1ms service time", res.hist.Min(), max)
		}
		if res.lag.Max() > 1 {
			t.Errorf("send lag up to %dµs, want none on an exact clock with idle connections", res.lag.Max())
		}
		if got := res.rate(); got < 990 || got > 1010 {
			t.Errorf("rate %.1f, want 1000", got)
		}
	})
}

// TestOpenLoopStallShowsInPercentiles: the target stalls for 500ms of a 2s
// window at 1000 requests a second. The open loop charges every request
// due during the stall from its due time, so a quarter of the requests are
// hundreds of milliseconds late and p90 and p99 show it; the closed loop
// on the same target sees the few requests in flight, and its p99 is the
// service time (coordinated omission), which is why plain and mixed have
// -rate.
func TestOpenLoopStallShowsInPercentiles(t *testing.T) {
	const service = time.Millisecond
	newTarget := func() *fakeTarget {
		start := time.Now()
		return &fakeTarget{service: service, timeout: 2 * time.Second,
			stallFrom: start.Add(time.Second), stallTo: start.Add(1500 * time.Millisecond)}
	}
	synctest.Test(t, func(t *testing.T) {
		f := newTarget()
		spec := genSpec{rate: 1000, duration: 2 * time.Second, timeout: 2 * time.Second, limit: 1 << 20, kinds: 1}
		res, err := generate(t.Context(), spec, fakeSenders(f, 4))
		if err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, res)
		if res.due != 2000 || res.answered() != 2000 || res.missed != 0 || res.failed() != 0 {
			t.Errorf("due %d, answered %d, failed %d, missed %d; want 2000 answered", res.due, res.answered(), res.failed(), res.missed)
		}
		// The requests due in the stall's first 400ms waited more than
		// 100ms each: 20% of the window.
		if p := res.hist.ValueAtQuantile(90); p < 100_000 {
			t.Errorf("open loop p90 %dµs, want the stall (over 100ms)", p)
		}
		if p := res.hist.ValueAtQuantile(99); p < 450_000 {
			t.Errorf("open loop p99 %dµs, want the stall (over 450ms)", p)
		}
		if p := res.hist.ValueAtQuantile(50); p > 2*service.Microseconds() {
			t.Errorf("open loop p50 %dµs, want the service time: most requests are not in the stall", p)
		}
		if p := res.service.ValueAtQuantile(99); p > 2*service.Microseconds() {
			t.Errorf("service time p99 %dµs, want 1ms: only 4 requests were in flight in the stall", p)
		}
		if p := res.lag.ValueAtQuantile(99); p < 450_000 {
			t.Errorf("send lag p99 %dµs, want the wait for a free connection in the stall", p)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newTarget()
		spec := genSpec{duration: 2 * time.Second, timeout: 2 * time.Second, limit: 1 << 20, kinds: 1}
		res, err := generate(t.Context(), spec, fakeSenders(f, 4))
		if err != nil {
			t.Fatal(err)
		}
		if p := res.hist.ValueAtQuantile(99); p > 2*service.Microseconds() {
			t.Errorf("closed loop p99 %dµs, want the service time (the stall hides)", p)
		}
		if m := res.hist.Max(); m < 400_000 {
			t.Errorf("closed loop max %dµs, want the few requests caught in the stall", m)
		}
	})
}

// TestOpenLoopDeadTargetMissed: the target stops answering halfway through
// (every request times out after 200ms). The four connections send one
// request per timeout each, the rest of the schedule is never sent, and
// the missed requests count in the percentiles at their lower bound, so
// p99 is not the healthy half's.
func TestOpenLoopDeadTargetMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 200 * time.Millisecond
		f := &fakeTarget{service: time.Millisecond, timeout: timeout, stallFrom: time.Now().Add(time.Second)}
		spec := genSpec{rate: 1000, duration: 2 * time.Second, timeout: timeout, limit: 1 << 20, kinds: 1}
		res, err := generate(t.Context(), spec, fakeSenders(f, 4))
		if err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, res)
		if res.errs[errTimeout] == 0 || res.missed == 0 {
			t.Fatalf("timeouts %d, missed %d; want both", res.errs[errTimeout], res.missed)
		}
		// 1000 due after the target died; 4 connections × (1.2s ÷ 200ms)
		// timeouts at most before the drain ended.
		if res.errs[errTimeout] > 4*6+4 {
			t.Errorf("timeouts %d, want at most %d", res.errs[errTimeout], 4*6+4)
		}
		if p := res.hist.ValueAtQuantile(75); p < 200_000 {
			t.Errorf("p75 %dµs, want the dead half at its lower bound (over 200ms)", p)
		}
		if res.answered() < 990 {
			t.Errorf("answered %d, want the healthy first second's", res.answered())
		}
	})
}

// TestOpenLoopCapEndsSchedule: the -requests cap cuts the schedule, and
// due says so.
func TestOpenLoopCapEndsSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{service: time.Millisecond, timeout: time.Second, stallFrom: time.Now().Add(time.Hour)}
		spec := genSpec{rate: 1000, duration: 2 * time.Second, timeout: time.Second, limit: 4 + 300, kinds: 1}
		res, err := generate(t.Context(), spec, fakeSenders(f, 4))
		if err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, res)
		if !res.capped || res.due != 300 || res.answered() != 300 {
			t.Errorf("capped %v, due %d, answered %d; want capped at 300", res.capped, res.due, res.answered())
		}
	})
}

// TestMixKindsAccounting: per-kind counts add up to the totals, every
// kind is drawn near its weight, and the attackers' kinds are the ones
// marked so.
func TestMixKindsAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{service: time.Millisecond, timeout: time.Second, stallFrom: time.Now().Add(time.Hour)}
		spec := genSpec{rate: 5000, duration: 2 * time.Second, timeout: time.Second, limit: 1 << 20, kinds: len(mixKinds), kindOf: mixKindOf}
		res, err := generate(t.Context(), spec, fakeSenders(f, 8))
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for i, k := range mixKinds {
			n := res.kinds[i].statuses[200]
			sum += n
			if want := int64(k.weight) * 100; n < want*8/10 || n > want*12/10 {
				t.Errorf("kind %s: %d requests, want about %d (%d%%)", k.name, n, want, k.weight)
			}
			if res.kinds[i].hist.TotalCount() != n {
				t.Errorf("kind %s: %d latencies for %d requests", k.name, res.kinds[i].hist.TotalCount(), n)
			}
		}
		if sum != res.answered() || sum != 10000 {
			t.Errorf("kinds sum to %d, answered %d, want 10000", sum, res.answered())
		}
	})
	attack := 0
	for _, k := range mixKinds {
		if k.attacker {
			attack += k.weight
		}
	}
	if attack < 5 || attack > 20 {
		t.Errorf("attackers send %d%% of the blend, want some (5-20%%)", attack)
	}
}

func TestMixClients(t *testing.T) {
	t.Parallel()
	legit, attack := mixClients(maxClients, maxAttackers)
	seen := make(map[string]bool)
	v6 := 0
	for _, s := range append(legit, attack...) {
		if seen[s] {
			t.Fatalf("%s repeats", s)
		}
		seen[s] = true
	}
	for _, s := range legit {
		if strings.Contains(s, ":") {
			v6++
		}
	}
	if v6 != maxClients/4 {
		t.Errorf("%d IPv6 clients, want a quarter of %d", v6, maxClients)
	}
	if legit[3] != "2001:db8:0:3::1" || legit[0] != "198.18.0.0" || attack[0] != "203.0.113.0" || attack[1] != "2001:db8:ffff:0::1" && attack[1] != "2001:db8:ffff::1" {
		t.Errorf("got %s %s %s %s", legit[0], legit[3], attack[0], attack[1])
	}
	if mixPhone(0) != "+12015550100" || mixPhone(1999) != "+12285550199" || mixPhone(2000) != mixPhone(0) {
		t.Errorf("phones %s %s", mixPhone(0), mixPhone(1999))
	}
}

func TestPlainMixedUsageErrors(t *testing.T) {
	t.Parallel()
	for _, sc := range []string{"plain", "mixed"} {
		runUsageErrors(t, []string{"-scenario", sc, "-target", "http://127.0.0.1:1"}, []usageError{
			{sc + " negative rate", []string{"-rate", "-1"}, "-rate must be in [0, 1000000]"},
			{sc + " huge rate", []string{"-rate", "2e6"}, "-rate must be in [0, 1000000]"},
			{sc + " NaN rate", []string{"-rate", "NaN"}, "-rate must be in"},
			{sc + " api keys", []string{"-api-keys", "-1"}, "-api-keys must be in"},
			{sc + " attackers", []string{"-attackers", "513"}, "-attackers must be in [1, 512]"},
			{sc + " levels", []string{"-connections", "8,16"}, "for -scenario throughput only"},
			{sc + " remote", []string{"-target", "http://192.0.2.1:80"}, "not a loopback address"},
		})
	}
}

// TestPlainNothingListening: a target that is not there is a connection
// error (exit 2) before any load, as in every scenario.
func TestPlainNothingListening(t *testing.T) {
	t.Parallel()
	addr := freeLoopbackAddr(t)
	code, stdout, stderr := runTool(t, "-scenario", "plain", "-target", "http://"+addr, "-duration", "1s", "-timeout", "1s")
	if code != exitError || !strings.Contains(stderr, "connecting to") || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and a connection error", code, stdout, stderr)
	}
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestOpenLoopCapExactlyEnough: a cap that covers the schedule exactly
// does not end the run early (each sender takes one number past the
// schedule's end, which is not a request the schedule wanted).
func TestOpenLoopCapExactlyEnough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{service: time.Millisecond, timeout: time.Second, stallFrom: time.Now().Add(time.Hour)}
		spec := genSpec{rate: 1000, duration: time.Second, timeout: time.Second, limit: 4 + 1000, kinds: 1}
		res, err := generate(t.Context(), spec, fakeSenders(f, 4))
		if err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, res)
		if res.capped || res.due != 1000 || res.answered() != 1000 {
			t.Errorf("capped %v, due %d, answered %d; want 1000, not capped", res.capped, res.due, res.answered())
		}
	})
}
