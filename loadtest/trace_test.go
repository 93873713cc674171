package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const seedTracePath = "../testdata/fixtures/seed_trace.json"

func TestLoadSeedTrace(t *testing.T) {
	t.Parallel()
	tr, err := loadTrace(seedTracePath)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.algorithms(), knownAlgorithms[:]; !slices.Equal(got, want) {
		t.Errorf("algorithms: got %v, want %v", got, want)
	}
	if got := tr.window(); got != time.Second {
		t.Errorf("window: got %v, want 1s", got)
	}
	if got := len(tr.RequestsAtSeconds); got != 20 {
		t.Errorf("requests: got %d, want 20", got)
	}
}

func TestLoadTraceRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, json, want string
	}{
		{"not json", `{`, "decoding trace"},
		{"no requests", `{"requests_at_seconds": [], "allowed": {"gcra": []}}`, "0 points"},
		{"unsorted", `{"requests_at_seconds": [1, 0.5], "allowed": {"gcra": [true, true]}}`, "non-decreasing"},
		{"negative", `{"requests_at_seconds": [-1], "allowed": {"gcra": [true]}}`, "non-decreasing"},
		{"too long", `{"requests_at_seconds": [61], "allowed": {"gcra": [true]}}`, "from 0 to 60"},
		{"no algorithms", `{"requests_at_seconds": [1]}`, "no algorithm"},
		{"short decisions", `{"requests_at_seconds": [1, 2], "allowed": {"gcra": [true]}}`, `allowed["gcra"] has 1 decisions for 2 requests`},
		{"bad name", `{"requests_at_seconds": [1], "allowed": {"../admin": [true]}}`, "not a path segment"},
		{"bad window", `{"requests_at_seconds": [1], "window_seconds": -1, "allowed": {"gcra": [true]}}`, "window_seconds"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(tt.json), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadTrace(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadTrace: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestAlgorithmsOrder(t *testing.T) {
	t.Parallel()
	tr := traceFixture{Allowed: map[string][]bool{"zeta": nil, "gcra": nil, "alpha": nil, "fixed_window": nil}}
	if got, want := tr.algorithms(), []string{"fixed_window", "gcra", "alpha", "zeta"}; !slices.Equal(got, want) {
		t.Errorf("algorithms: got %v, want %v", got, want)
	}
}
