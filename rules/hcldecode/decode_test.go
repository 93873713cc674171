package hcldecode

import "testing"

// TestHasWord: a name counts where it stands as a word of its own, so a
// diagnostic about limit is dropped with limit and one about rate_limit or
// limits is not.
func TestHasWord(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"limit", true},
		{"Missing limit", true},
		{"limit is required.", true},
		{`"limit" is required`, true},
		{"rate_limit is required", false},
		{"limits", false},
		{"limit2", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := hasWord(tt.s, "limit"); got != tt.want {
			t.Errorf("hasWord(%q, limit) = %v, want %v", tt.s, got, tt.want)
		}
	}
}
