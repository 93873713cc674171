package main

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testnet"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

func TestGCRAAllowance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit, burst int64
		period       time.Duration
		elapsed      time.Duration
		want         int64
	}{
		{10, 10, 10 * time.Second, 0, 10},
		{10, 10, 10 * time.Second, 999 * time.Millisecond, 10},
		{10, 10, 10 * time.Second, time.Second, 11},
		{10, 10, 10 * time.Second, 10*time.Second + 9*time.Millisecond, 20},
		{10, 10, 2 * time.Second, 2 * time.Second, 20},
		{600, 600, time.Minute, 10*time.Second + 405*time.Millisecond, 704},
		{4500, 4500, 10 * time.Second, 10 * time.Second, 4500 + 10_000_000/2222},
		// The emission interval in whole microseconds, as the edge has it:
		// 10 s / 3 = 3333333 µs, so 10 s holds three of them.
		{3, 3, 10 * time.Second, 10 * time.Second, 6},
		{5, 2, time.Second, 450 * time.Millisecond, 4},
		{10, 10, 10 * time.Second, -time.Second, 10},
	}
	for _, tt := range tests {
		if got := gcraAllowance(tt.limit, tt.burst, tt.period, tt.elapsed); got != tt.want {
			t.Errorf("gcraAllowance(%d, %d, %v, %v) = %d, want %d", tt.limit, tt.burst, tt.period, tt.elapsed, got, tt.want)
		}
	}
}

// TestGCRAAllowanceMatchesTheStore checks the formula against the edge's
// own GCRA (the memory store): requests far faster than the limit get
// exactly the allowance, never more.
func TestGCRAAllowanceMatchesTheStore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		limit, burst int64
		period, gap  time.Duration
		span         time.Duration
	}{
		{10, 10, 10 * time.Second, 33 * time.Millisecond, 10 * time.Second},        // the attacker at the defaults
		{10, 10, 2 * time.Second, 10 * time.Millisecond, 2 * time.Second},          // the e2e test's period
		{600, 600, time.Minute, 7 * time.Millisecond, 12 * time.Second},            // the mint budget
		{3, 3, 10 * time.Second, 100 * time.Millisecond, 25 * time.Second},         // an emission interval that does not divide
		{10, 4, 10 * time.Second, 250 * time.Millisecond, 9700 * time.Millisecond}, // burst below the limit
	}
	st, err := memstore.New(memstore.Options{MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Unix(1_800_000_000, 0)
	for i, c := range cases {
		op := rules.Op{
			Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{byte(i + 1)},
			Limit: c.limit, Burst: c.burst, PeriodUS: c.period.Microseconds(), Cost: 1, Enforce: true,
		}
		var allowed int64
		for at := time.Duration(0); at <= c.span; at += c.gap {
			res := make([]rules.Result, 1)
			if err := st.Take(context.Background(), t0.Add(at), []rules.Op{op}, res); err != nil {
				t.Fatal(err)
			}
			if res[0].Allowed {
				allowed++
			}
			if bound := gcraAllowance(c.limit, c.burst, c.period, at); allowed > bound {
				t.Fatalf("case %d: %d allowed within %v, over the bound %d", i, allowed, at, bound)
			}
		}
		last := c.span / c.gap * c.gap
		// Requests every gap reach each emission time at most a gap late,
		// so the store lets through all but at most one of the allowance.
		if bound := gcraAllowance(c.limit, c.burst, c.period, last); allowed < bound-1 {
			t.Errorf("case %d: %d allowed within %v, bound %d: the bound is not tight", i, allowed, last, bound)
		}
	}
}

func TestAttackerBounds(t *testing.T) {
	t.Parallel()
	p := defaultCgnatParams
	b := attackerBounds(p, 10*time.Second+4*time.Millisecond, 10*time.Second+400*time.Millisecond, 500)
	want := attackerBound{
		passSpan:  10*time.Second + 9*time.Millisecond,
		passes:    20, // burst 10 + ⌊10.009 s / 1 s⌋
		mintSpan:  10*time.Second + 405*time.Millisecond,
		mintTotal: 704, // 600 + ⌊10.405 s / 100 ms⌋
		crowdIDs:  500,
		mintLeft:  204,
		cookies:   20,
	}
	if b != want {
		t.Errorf("defaults: got %+v, want %+v", b, want)
	}

	// A mint budget nearly spent by the crowd bounds the IDs below the
	// passes.
	p.mintLimit = 505
	b = attackerBounds(p, 10*time.Second, 10*time.Second, 500)
	// 505 per minute: 118811 µs apart, 84 in 10.005 s.
	if b.passes != 20 || b.mintTotal != 505+84 || b.mintLeft != 89 || b.cookies != 20 {
		t.Errorf("mint 505: got %+v", b)
	}
	b = attackerBounds(p, 10*time.Second, 0, 500)
	if b.mintLeft != 5 || b.cookies != 5 {
		t.Errorf("mint 505, no refill: got %+v, want 5 IDs left and a bound of 5", b)
	}
	b = attackerBounds(p, 10*time.Second, 0, 600)
	if b.mintLeft != 0 || b.cookies != 0 {
		t.Errorf("more crowd IDs than the budget: got %+v, want 0", b)
	}
	// No attack at all: the burst is still the bound.
	if b := attackerBounds(defaultCgnatParams, 0, 0, 500); b.passes != 10 || b.cookies != 10 {
		t.Errorf("empty attack: got %+v", b)
	}
}

func TestCgnatParams(t *testing.T) {
	t.Parallel()
	p := defaultCgnatParams
	if err := p.check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if p.perVisitor() != 8 || p.crowdRequests() != 4000 || p.requests() != 4700 {
		t.Errorf("defaults: %d per visitor, %d crowd, %d in all; want 8, 4000, 4700", p.perVisitor(), p.crowdRequests(), p.requests())
	}
	if w := p.warnings(); len(w) != 0 {
		t.Errorf("defaults warn: %q", w)
	}
	for _, tc := range []struct {
		share float64
		limit int64
		want  int64
	}{{0.8, 10, 8}, {0.7, 10, 7}, {0.29, 100, 29}, {1, 3, 3}, {0.5, 3, 1}, {0.3, 3, 0}} {
		p := defaultCgnatParams
		p.share, p.limit = tc.share, tc.limit
		if got := p.perVisitor(); got != tc.want {
			t.Errorf("perVisitor(%v of %d) = %d, want %d", tc.share, tc.limit, got, tc.want)
		}
	}

	p.visitors, p.ipCeiling = 700, 4000
	w := p.warnings()
	if len(w) != 2 || !strings.Contains(w[0], "-mint-limit 600") || !strings.Contains(w[1], "-ip-ceiling 4000") {
		t.Errorf("700 visitors, ceiling 4000: warnings %q", w)
	}
}

func TestCgnatUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no visitors", []string{"-visitors", "0"}, "-visitors"},
		{"too many visitors", []string{"-visitors", "10001"}, "-visitors"},
		{"share over 1", []string{"-visitor-share", "1.5"}, "-visitor-share"},
		{"share zero", []string{"-visitor-share", "0"}, "-visitor-share"},
		{"share below one request", []string{"-visitor-share", "0.05"}, "less than one request"},
		{"long period", []string{"-period", "2m"}, "-period"},
		{"ceiling below limit", []string{"-ip-ceiling", "5"}, "-ip-ceiling"},
		{"no mint", []string{"-mint-limit", "0"}, "-mint-limit"},
		{"bad cookie", []string{"-cookie", "a b"}, "-cookie"},
		{"attacker", []string{"-attacker-requests", "-1"}, "-attacker-requests"},
		{"too few requests", []string{"-scenario", "cgnat-crowd", "-requests", "1000"}, "needs 4700 requests"},
		{"no room for the period", []string{"-scenario", "cgnat-crowd", "-duration", "12s"}, "leaves no room"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTool(t, tt.args...)
			if code != exitError || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitError, tt.wantErr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

func TestCgnatConnectionRefused(t *testing.T) {
	t.Parallel()
	addr := testnet.DeadAddr(t)
	code, stdout, stderr := runTool(t, "-scenario", "cgnat-crowd", "-target", "http://"+addr, "-timeout", "1s")
	if code != exitError || !strings.Contains(stderr, "connecting to") {
		t.Errorf("exit %d, stderr %q; want exit %d and a connection error", code, stderr, exitError)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
}

// passingResult is a run at the defaults that passes.
func passingResult() *cgnatResult {
	p := defaultCgnatParams
	r := &cgnatResult{
		p:           p,
		target:      "http://127.0.0.1:18080",
		client:      netip.MustParseAddr("198.19.4.7"),
		path:        "/api/bench",
		connections: 32,
		phase1:      phase1Result{sent: 500, cookies: 500, statuses: map[int]int64{200: 500}, elapsed: 310 * time.Millisecond},
		ran2:        true,
		crowd: crowdResult{
			planned: 4000, sent: 4000, served: 4000, other: map[int]int64{},
			maxLate: 3100 * time.Microsecond, maxLatency: 4200 * time.Microsecond, elapsed: 9998 * time.Millisecond,
		},
		attack: attackResult{sent: 200, passes: 20, refused: 180, cookies: 20, other: map[int]int64{}, elapsed: 10004 * time.Millisecond},
	}
	r.bound = attackerBounds(p, r.attack.elapsed, 10400*time.Millisecond, 500)
	return r
}

func TestCgnatReportPasses(t *testing.T) {
	t.Parallel()
	r := passingResult()
	if f := r.failures(); len(f) != 0 {
		t.Fatalf("failures %q", f)
	}
	var b strings.Builder
	if err := writeCgnatReport(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"cgnat-crowd: 500 visitors and one cookie-cycling attacker behind 198.19.4.7 (X-Forwarded-For), http://127.0.0.1:18080\n",
		"policy (from the flags): 10 per 10s per visitor (gcra, burst 10), ip_ceiling 4500, new visitor IDs 600 per 1m0s per IP\n",
		"  IDs           500 of 500  (answers: 200 ×500)  0.310s\n",
		"  crowd: 500 visitors × 8 requests (80% of 10) = 4000, spread over the period, each with its own ID, 32 connections\n",
		"    sent            4000\n",
		"    served (200)    4000\n",
		"    refused (429)   0\n",
		"    visitors refused at least once: 0 of 500\n",
		"    last answer 9.998s after the start; sent at most 3.1ms late; slowest answer 4.2ms\n",
		"    all served: yes\n",
		"    sent            200  in 10.004s\n",
		"    passes (200)    20  bound 20 = cookieless burst 10 + ⌊10.009s / 1s⌋",
		"    IDs obtained    20  bound 20 = min(passes bound 20, mint budget left 204 = 600 + ⌊10.405s / 100ms⌋ − 500 IDs of the crowd)\n",
		"    refused (429)   180\n",
		"    held to its bound: yes\n",
		"  IP ceiling: 4000 crowd + 20 attacker = 4020 passed, ceiling 4500 per 10s\n",
		"\ncgnat-crowd: ok: all 4000 crowd requests served; attacker held to 20 passes and 20 IDs (bounds 20 and 20)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestCgnatFailures(t *testing.T) {
	t.Parallel()
	r := passingResult()
	// An attack of 9.954 s (+ 5 ms of allowance) has 9 refills: the bound
	// is 19, so its 20 passes are one too many.
	r.attack.elapsed = 9954 * time.Millisecond
	r.bound = attackerBounds(r.p, r.attack.elapsed, 10400*time.Millisecond, 500)
	if r.bound.passes != 19 {
		t.Fatalf("bound %d, want 19", r.bound.passes)
	}
	r.crowd.served, r.crowd.refused, r.crowd.visitorsRefused = 3990, 8, 6
	r.crowd.other = map[int]int64{502: 2}
	r.crowd.reissued = 1
	r.attack.cookies = 20
	f := r.failures()
	want := []string{
		"3990 of 4000 crowd requests served (8 refused, 2 other)",
		"1 crowd answers carried a new ID",
		"the attacker passed 20 times, over its bound 19",
		"the attacker got 20 IDs, over its bound 19",
	}
	if len(f) != len(want) {
		t.Fatalf("failures %q, want %d", f, len(want))
	}
	for i := range want {
		if !strings.Contains(f[i], want[i]) {
			t.Errorf("failure %d: %q, want %q", i, f[i], want[i])
		}
	}
	var b strings.Builder
	if err := writeCgnatReport(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"    other           2  (502 ×2)\n", "    all served: NO\n", "    held to its bound: NO\n", "\ncgnat-crowd: FAIL: 3990 of 4000"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}

	// Visitors without an ID: phase 2 never ran.
	r = passingResult()
	r.phase1.cookies, r.phase1.statuses, r.ran2 = 480, map[int]int64{200: 500}, false
	if f := r.failures(); len(f) != 1 || f[0] != "only 480 of 500 visitors got an ID" {
		t.Errorf("failures %q", f)
	}
	b.Reset()
	if err := writeCgnatReport(&b, r); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "phase 2 not run") || strings.Contains(out, "  crowd: ") {
		t.Errorf("report:\n%s", out)
	}
}
