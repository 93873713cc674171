package netshare

import "testing"

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"5%", 50_000, true}, {" 0.5 % ", 5_000, true}, {"100%", Whole, true}, {"0.0001%", 1, true},
		{"0%", 0, false}, {"0.00001%", 0, false}, {"101%", 0, false}, {"5", 0, false}, {"NaN%", 0, false}, {"x%", 0, false},
	}
	for _, tt := range tests {
		if got, ok := Parse(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("Parse(%q): got %d, %v, want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		maxKeys, ppm int
		least        int64
		want         int
	}{
		{"5% of 2000", 2000, 50_000, 1, 100},
		{"rounded down", 2010, 50_000, 1, 100},
		{"at least one request's keys", 10, 50_000, 2, 2},
		{"no share", 2000, 0, 1, 0},
		{"a whole share", 2000, Whole, 1, 0},
		{"rounds to the whole budget", 1, 500_000, 1, 0},
	}
	for _, tt := range tests {
		if got := Bound(tt.maxKeys, tt.ppm, tt.least); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}
