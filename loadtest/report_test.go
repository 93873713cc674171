package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func obs(statuses ...int) []observation {
	out := make([]observation, len(statuses))
	for i, s := range statuses {
		out[i] = observation{status: s, late: 300 * time.Microsecond}
	}
	return out
}

func TestMismatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want []bool
		got  []observation
		bad  []int
		ga   int
		gr   int
	}{
		{"all match", []bool{true, false, true}, obs(200, 429, 200), nil, 2, 1},
		{"any status but 429 is allowed", []bool{true, true, true}, obs(200, 401, 503), nil, 3, 0},
		{"refused when allowed expected", []bool{true, true}, obs(200, 429), []int{1}, 1, 1},
		{"allowed when refused expected", []bool{false, true}, obs(200, 200), []int{0}, 2, 0},
		{"missing answers mismatch", []bool{true, false, true}, obs(200), []int{1, 2}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := algoResult{want: tt.want, got: tt.got}
			if got := r.mismatches(); !slices.Equal(got, tt.bad) {
				t.Errorf("mismatches: got %v, want %v", got, tt.bad)
			}
			if ga, gr := r.counts(); ga != tt.ga || gr != tt.gr {
				t.Errorf("counts: got %d/%d, want %d/%d", ga, gr, tt.ga, tt.gr)
			}
		})
	}
}

func TestWriteReport(t *testing.T) {
	t.Parallel()
	h := reportHeader{scenario: "seed-trace", target: "http://127.0.0.1:18080", trace: "seed.json", t0: time.Unix(1_700_000_000, 0), stagger: 250 * time.Microsecond}
	good := algoResult{
		algorithm: "gcra", path: "/trace/gcra", client: netip.MustParseAddr("198.18.0.7"),
		at: []float64{0.7, 1.1}, want: []bool{true, false}, got: obs(200, 429),
	}
	bad := algoResult{
		algorithm: "fixed_window", path: "/trace/fixed_window", client: netip.MustParseAddr("198.19.1.2"),
		at: []float64{0.7, 1.0}, want: []bool{true, true}, got: obs(200, 429),
	}

	t.Run("match", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		n, err := writeReport(&b, h, []algoResult{good})
		if err != nil || n != 0 {
			t.Fatalf("writeReport: got %d, %v; want 0, nil", n, err)
		}
		out := b.String()
		for _, want := range []string{
			"seed-trace against http://127.0.0.1:18080",
			"t=0 at 2023-11-14T22:13:20Z (Unix 1700000000.000000000)",
			"gcra: GET /trace/gcra as client 198.18.0.7",
			"allowed 1 (fixture 1), refused 1 (fixture 1): ok",
			"+0.300ms",
			"all 1 algorithms match the fixture",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "MISMATCH") {
			t.Errorf("matching report says MISMATCH:\n%s", out)
		}
	})

	t.Run("mismatch", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		n, err := writeReport(&b, h, []algoResult{good, bad})
		if err != nil || n != 1 {
			t.Fatalf("writeReport: got %d, %v; want 1, nil", n, err)
		}
		out := b.String()
		var marked []string
		for line := range strings.Lines(out) {
			if strings.HasSuffix(strings.TrimSpace(line), "MISMATCH") {
				marked = append(marked, strings.Fields(line)[0]+" "+strings.Fields(line)[1])
			}
		}
		if want := []string{"2 1.000"}; !slices.Equal(marked, want) {
			t.Errorf("marked rows: got %q, want %q\n%s", marked, want, out)
		}
		for _, want := range []string{
			"allowed 1 (fixture 2), refused 1 (fixture 0): 1 MISMATCHED",
			"MISMATCH: 1 decisions differ: fixed_window (1)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
	})
}
