package storetest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// SeedTracePath is the lesson's Figure 1 trace, relative to the module root.
const SeedTracePath = "testdata/fixtures/seed_trace.json"

// seedTrace is the fixture's shape.
type seedTrace struct {
	RatePerSecond float64           `json:"rate_per_second"`
	Burst         int64             `json:"burst"`
	WindowSeconds float64           `json:"window_seconds"`
	Requests      []float64         `json:"requests_at_seconds"`
	Allowed       map[string][]bool `json:"allowed"`
}

// SeedTraceCases returns one case per algorithm replaying the lesson's
// Figure 1 trace (20 requests, 5 per second, burst 5), each request a take
// whose decision must equal the fixture's. The trace's t=0 is Base, a
// multiple of its 1s period since the epoch, as the fixture assumes.
func SeedTraceCases(tb testing.TB) []Case {
	tb.Helper()
	root, err := ModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, SeedTracePath))
	if err != nil {
		tb.Fatalf("reading the seed trace: %v", err)
	}
	var fx seedTrace
	if err := json.Unmarshal(b, &fx); err != nil {
		tb.Fatalf("decoding the seed trace: %v", err)
	}
	periodUS := int64(math.Round(fx.WindowSeconds * 1e6))
	limit := int64(math.Round(fx.RatePerSecond * fx.WindowSeconds))
	var cs []Case
	for _, alg := range algorithms {
		allowed, ok := fx.Allowed[alg.String()]
		if !ok || len(allowed) != len(fx.Requests) {
			tb.Fatalf("seed trace: %d decisions for %s, want one per request (%d)", len(allowed), alg, len(fx.Requests))
		}
		c := Case{Name: alg.String() + "/seed_trace"}
		for i, sec := range fx.Requests {
			o := take("seed", alg, 1)
			o.Limit, o.Burst, o.PeriodUS = limit, fx.Burst, periodUS
			c.Steps = append(c.Steps, Step{
				At:     time.Duration(math.Round(sec*1e6)) * time.Microsecond,
				Ops:    ops(o),
				Want:   want(rules.Result{Allowed: allowed[i]}),
				Ignore: IgnoreValues,
			})
		}
		cs = append(cs, c)
	}
	return cs
}

// ModuleRoot returns the directory holding go.mod, found by walking up from
// the working directory: tests of any package under the module find the
// root's testdata.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding the module root: no go.mod above %s", wd)
		}
		dir = parent
	}
}
