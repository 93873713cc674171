package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"
)

// Bounds on a trace fixture, so a replay stays short.
const (
	maxTracePoints = 10_000
	maxTraceSpan   = time.Minute
)

// knownAlgorithms is the report order of the algorithms docs/policy.md
// ("Algorithms") names.
var knownAlgorithms = [...]string{"fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"}

// traceFixture is testdata/fixtures/seed_trace.json: request times and, per
// algorithm, whether each request is allowed.
type traceFixture struct {
	RatePerSecond     float64           `json:"rate_per_second"`
	Burst             int               `json:"burst"`
	WindowSeconds     float64           `json:"window_seconds"`
	RequestsAtSeconds []float64         `json:"requests_at_seconds"`
	Allowed           map[string][]bool `json:"allowed"`
}

// loadTrace reads and checks a trace fixture.
func loadTrace(path string) (*traceFixture, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	var tr traceFixture
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, fmt.Errorf("decoding trace %s: %w", path, err)
	}
	if err := tr.check(); err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return &tr, nil
}

// check reports what makes the fixture unusable for a timed replay.
func (tr *traceFixture) check() error {
	n := len(tr.RequestsAtSeconds)
	if n == 0 || n > maxTracePoints {
		return fmt.Errorf("requests_at_seconds has %d points, want 1 to %d", n, maxTracePoints)
	}
	prev := 0.0
	for i, s := range tr.RequestsAtSeconds {
		if math.IsNaN(s) || s < prev || s > maxTraceSpan.Seconds() {
			return fmt.Errorf("requests_at_seconds[%d] = %v: times must be non-decreasing, from 0 to %v", i, s, maxTraceSpan.Seconds())
		}
		prev = s
	}
	if w := tr.WindowSeconds; math.IsNaN(w) || w < 0 || w > maxTraceSpan.Seconds() {
		return fmt.Errorf("window_seconds = %v, want 0 (1 s) to %v", w, maxTraceSpan.Seconds())
	}
	if len(tr.Allowed) == 0 {
		return errors.New("allowed names no algorithm")
	}
	for name, want := range tr.Allowed {
		if !validAlgorithmName(name) {
			return fmt.Errorf("allowed: algorithm name %q is not a path segment of [a-z0-9_-]", name)
		}
		if len(want) != n {
			return fmt.Errorf("allowed[%q] has %d decisions for %d requests", name, len(want), n)
		}
	}
	return nil
}

// window is the period the trace's windows are aligned to.
func (tr *traceFixture) window() time.Duration {
	if tr.WindowSeconds <= 0 {
		return time.Second
	}
	return secondsToDuration(tr.WindowSeconds)
}

// algorithms returns the fixture's algorithms: the known ones in
// knownAlgorithms order, then any others sorted.
func (tr *traceFixture) algorithms() []string {
	var out, other []string
	for _, name := range knownAlgorithms {
		if _, ok := tr.Allowed[name]; ok {
			out = append(out, name)
		}
	}
	for name := range tr.Allowed {
		if !slices.Contains(knownAlgorithms[:], name) {
			other = append(other, name)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}

func validAlgorithmName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}
