package hclattr

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"1s", time.Second, false},
		{"15m", 15 * time.Minute, false},
		{"1d", 24 * time.Hour, false},
		{"7d12h", 7*24*time.Hour + 12*time.Hour, false},
		{"720h", 720 * time.Hour, false},
		{"five minutes", 0, true},
		{"d", 0, true},
		{"", 0, true},
		{"-1d", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestSuggest: a typo of a candidate (a third of the word at most, case
// aside) is suggested, anything further is not.
func TestSuggest(t *testing.T) {
	words := []string{"count", "reject", "requests"}
	tests := []struct{ got, want string }{
		{"cont", ` Did you mean "count"?`},
		{"cuont", ""}, // two edits in five letters: too far
		{"REJECT", ` Did you mean "reject"?`},
		{"request", ` Did you mean "requests"?`},
		{"maybe", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Suggest(tt.got, words); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.got, got, tt.want)
		}
	}
}
