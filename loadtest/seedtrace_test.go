package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeEdge answers /trace/<algorithm> from a fixture's expected decisions,
// by request index per algorithm, optionally getting one of them wrong. It
// checks how the tool talks to it.
type fakeEdge struct {
	t    *testing.T
	tr   *traceFixture
	flip map[string]int // algorithm → request index answered wrongly

	mu       sync.Mutex
	warmed   map[string]bool        // by client address
	clients  map[string]string      // algorithm → client address
	arrivals map[string][]time.Time // algorithm → arrival times
	// launched is when the test started the tool (before runTool).
	launched time.Time
}

var benchmarkNet = netip.MustParsePrefix("198.18.0.0/15")

func (f *fakeEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	xff := r.Header.Get("X-Forwarded-For")
	if a, err := netip.ParseAddr(xff); err != nil || !benchmarkNet.Contains(a) {
		f.t.Errorf("%s: X-Forwarded-For %q, want an address in %v", r.URL.Path, xff, benchmarkNet)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == warmupPath {
		f.warmed[xff] = true
		return
	}
	alg, ok := strings.CutPrefix(r.URL.Path, "/trace/")
	want, known := f.tr.Allowed[alg]
	if !ok || !known || r.Method != http.MethodGet {
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if !f.warmed[xff] {
		f.t.Errorf("%s: client %s sent a trace request before warming up", alg, xff)
	}
	if prev, ok := f.clients[alg]; ok && prev != xff {
		f.t.Errorf("%s: client address changed from %s to %s", alg, prev, xff)
	}
	f.clients[alg] = xff
	i := len(f.arrivals[alg])
	f.arrivals[alg] = append(f.arrivals[alg], now)

	allowed := i < len(want) && want[i]
	if j, ok := f.flip[alg]; ok && j == i {
		allowed = !allowed
	}
	if !allowed {
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

func startFakeEdge(t *testing.T, tr *traceFixture, flip map[string]int) (*fakeEdge, string) {
	t.Helper()
	f := &fakeEdge{
		t: t, tr: tr, flip: flip,
		warmed:   make(map[string]bool),
		clients:  make(map[string]string),
		arrivals: make(map[string][]time.Time),
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// checkReplay checks that every algorithm got the whole trace from its own
// client address, and that no request arrived before its time after a t=0
// aligned to the trace's window.
func (f *fakeEdge) checkReplay(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.tr.RequestsAtSeconds
	seen := make(map[string]string)
	for _, alg := range f.tr.algorithms() {
		arr := f.arrivals[alg]
		if len(arr) != len(at) {
			t.Errorf("%s: got %d requests, want %d", alg, len(arr), len(at))
			continue
		}
		if other, dup := seen[f.clients[alg]]; dup {
			t.Errorf("%s and %s share client address %s", alg, other, f.clients[alg])
		}
		seen[f.clients[alg]] = alg

		// The tool's t=0 is the first window boundary at least startLead
		// after it started, less the first offset (alignStart), and it
		// started after the test launched it: that boundary from the
		// launch is a t=0 no later than the real one, whatever the machine's
		// delays, so a request early against it was early in truth.
		w := f.tr.window().Nanoseconds()
		earliest := f.launched.Add(startLead - secondsToDuration(at[0])).UnixNano()
		t0 := earliest / w * w
		if t0 < earliest {
			t0 += w
		}
		for i, a := range arr {
			if early := t0 + secondsToDuration(at[i]).Nanoseconds() - a.UnixNano(); early > 0 {
				t.Errorf("%s: request %d (t=%vs) arrived %v early", alg, i+1, at[i], time.Duration(early))
			}
		}
	}
}

// compressedTrace writes a copy of the seed trace 20 times faster, with a
// 50ms window, so a test replays it in well under a second.
func compressedTrace(t *testing.T) (string, *traceFixture) {
	t.Helper()
	tr, err := loadTrace(seedTracePath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.RequestsAtSeconds {
		tr.RequestsAtSeconds[i] /= 20
	}
	tr.WindowSeconds /= 20
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fast_trace.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tr
}

func TestSeedTraceMatches(t *testing.T) {
	t.Parallel()
	// The real fixture, in real time: a few seconds.
	tr, err := loadTrace(seedTracePath)
	if err != nil {
		t.Fatal(err)
	}
	f, url := startFakeEdge(t, tr, nil)

	f.launched = time.Now()
	code, stdout, stderr := runTool(t, "-scenario", "seed-trace", "-target", url, "-trace", seedTracePath)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstderr: %s\nstdout:\n%s", code, stderr, stdout)
	}
	if !strings.Contains(stdout, "all 6 algorithms match the fixture") || strings.Contains(stdout, "MISMATCH") {
		t.Errorf("report does not say all match:\n%s", stdout)
	}
	f.checkReplay(t)
}

func TestSeedTraceMismatch(t *testing.T) {
	t.Parallel()
	path, tr := compressedTrace(t)
	// Get gcra's t=1.1 s boundary point wrong, and token_bucket's first.
	f, url := startFakeEdge(t, tr, map[string]int{"gcra": 8, "token_bucket": 0})

	f.launched = time.Now()
	code, stdout, stderr := runTool(t, "-target", url, "-trace", path, "-stagger", "0")
	if code != exitMismatch {
		t.Fatalf("exit %d, want %d\nstderr: %s\nstdout:\n%s", code, exitMismatch, stderr, stdout)
	}
	for _, want := range []string{
		"MISMATCH: 2 decisions differ: token_bucket (1), gcra (1)",
		"allowed 13 (fixture 14), refused 7 (fixture 6): 1 MISMATCHED",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "decisions differ from the expected ones: 2 of 120 decisions") {
		t.Errorf("stderr: got %q, want the mismatch count", stderr)
	}
	f.checkReplay(t)
}

func TestSeedTraceOverBudget(t *testing.T) {
	t.Parallel()
	tr, err := loadTrace(seedTracePath)
	if err != nil {
		t.Fatal(err)
	}
	f, url := startFakeEdge(t, tr, nil)

	code, stdout, stderr := runTool(t, "-target", url, "-trace", seedTracePath, "-duration", "500ms")
	if code != exitError || !strings.Contains(stderr, "raise -duration") {
		t.Errorf("exit %d, stderr %q; want exit %d and a budget error", code, stderr, exitError)
	}
	if stdout != "" {
		t.Errorf("stdout: got %q, want nothing", stdout)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.arrivals) != 0 {
		t.Errorf("trace requests sent over budget: %v", f.arrivals)
	}
}
