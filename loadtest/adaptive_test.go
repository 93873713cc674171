package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// startAdaptiveEdge runs a real edge on testdata/adaptive.hcl in-process on
// loopback (real clock: the limiter measures real round trips), its
// upstream originAddr (the scenario's demo origin), and returns the target,
// its admin /metrics included.
func startAdaptiveEdge(t *testing.T, originAddr string) target {
	t.Helper()
	return startFileEdge(t, "testdata/adaptive.hcl", originAddr, nil)
}

// TestAdaptiveScenarioThroughTheEdge is the CI smoke run of the scenario:
// 4 s through a real edge to the scenario's demo origin (phases of 1 s,
// 5 ms then 100 ms then 5 ms). It checks the run's shape, not this
// machine's timing: one reading per sample (16), labelled by phase, every
// limit within the policy's min and max, answers only 200 or 503 (never
// 429), and a report with its columns and its phases. Whether the limit
// fell is the full run's judgement (BENCHMARKS.md), not this test's.
func TestAdaptiveScenarioThroughTheEdge(t *testing.T) {
	oln := listenLoopback(t)
	tg := startAdaptiveEdge(t, oln.Addr().String())
	var out strings.Builder
	p := adaptiveParams{origin: oln.Addr().String(), rate: 200, fast: 5 * time.Millisecond, slow: 100 * time.Millisecond,
		phase: time.Second, sample: 250 * time.Millisecond}
	cfg := config{target: tg, duration: time.Minute, requests: maxRequests, timeout: 10 * time.Second, stdout: &out, adaptive: p}
	ctx, cancel := context.WithTimeout(t.Context(), adaptiveBudget(cfg))
	defer cancel()
	r, err := adaptiveRunOn(ctx, cfg, oln)
	t.Log("\n" + out.String())
	if err != nil && !errors.Is(err, errMismatch) {
		t.Fatal(err)
	}
	if len(r.samples) != 16 {
		t.Fatalf("%d readings, want 16 (4 s every 250 ms)", len(r.samples))
	}
	var ok, shed int64
	for i, s := range r.samples {
		if want := min(i/4, 2); s.phase != want {
			t.Errorf("reading %d at %v: phase %d, want %d", i, s.at, s.phase, want)
		}
		if s.limit < 5 || s.limit > 200 {
			t.Errorf("reading %d: limit %d outside the policy's 5..200", i, s.limit)
		}
		if s.refused != 0 || s.other != 0 {
			t.Errorf("reading %d: %d answers 429 and %d neither 200 nor 503", i, s.refused, s.other)
		}
		ok += s.ok
		shed += s.shed
	}
	if ok == 0 || r.sent == 0 {
		t.Errorf("sent %d, %d answered 200 (%d shed): want the origin's answers", r.sent, ok, shed)
	}
	if err != nil && (strings.Contains(err.Error(), "429") || strings.Contains(err.Error(), "neither")) {
		t.Errorf("judged: %v", err)
	}
	report := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"adaptive: GET ", "at 200/s (open loop)", "limit edge in flight origin in flight origin peak", "phases:", "fast 5ms", "slow 100ms", "fast again 5ms", "the limit fell with the slowdown: "} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestAdaptiveResultJudges feeds mismatch made-up readings: a 429, a
// status other than 200 and 503, and a limit that did not fall are each a
// mismatch; a falling limit with 200s and 503s is not.
func TestAdaptiveResultJudges(t *testing.T) {
	run := func(edit func(s []adaptiveSample)) error {
		s := []adaptiveSample{
			{phase: 0, limit: 20, ok: 100},
			{phase: 1, limit: 12, ok: 30, shed: 70},
			{phase: 2, limit: 15, ok: 100},
		}
		if edit != nil {
			edit(s)
		}
		return (&adaptiveResult{params: defaultAdaptiveParams, samples: s}).mismatch()
	}
	if err := run(nil); err != nil {
		t.Fatalf("good run: %v", err)
	}
	for name, c := range map[string]struct {
		edit func([]adaptiveSample)
		want string
	}{
		"429":     {func(s []adaptiveSample) { s[1].refused = 1 }, "1 answers were 429"},
		"502":     {func(s []adaptiveSample) { s[2].other = 3 }, "3 answers were neither"},
		"no fall": {func(s []adaptiveSample) { s[1].limit = 20 }, "did not fall with the slowdown: 20 at the end of the fast phase, 20"},
		"no slow": {func(s []adaptiveSample) { s[1].phase = 0 }, "before the slow phase"},
	} {
		err := run(c.edit)
		if !errors.Is(err, errMismatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a mismatch saying %q", name, err, c.want)
		}
	}
}

// TestAdaptiveFlags: out-of-range flags are usage errors.
func TestAdaptiveFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-adaptive-origin", "192.0.2.1:80"},
		{"-adaptive-rate", "0"},
		{"-adaptive-fast", "300ms", "-adaptive-slow", "200ms"},
		{"-adaptive-sample", "1ms"},
		{"-adaptive-phase", "1ms"},
	} {
		var stderr strings.Builder
		if code := run(t.Context(), append([]string{"-scenario", "adaptive"}, args...), &strings.Builder{}, &stderr); code != exitError {
			t.Errorf("%v: exit %d, want %d (usage)", args, code, exitError)
		}
	}
	var stderr strings.Builder
	code := run(t.Context(), []string{"-scenario", "adaptive", "-adaptive-origin", "127.0.0.1:0", "-target", "http://127.0.0.1:1"}, &strings.Builder{}, &stderr)
	if code != exitError || !strings.Contains(stderr.String(), "-target-metrics") {
		t.Errorf("without -target-metrics: exit %d, %q; want a usage error naming it", code, stderr.String())
	}
}
