package hclattr

import (
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
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

// TestUnsupported: HCL's unsupported argument and block type are told
// the nearest of every name the body takes; an argument named as a block
// type asks whether it meant the block; a detail with HCL's own
// suggestion, and a block type without blocks to suggest, stay as HCL
// wrote them.
func TestUnsupported(t *testing.T) {
	attrs, blocks := []string{"limit", "period"}, []string{"when"}
	tests := []struct {
		summary, detail string
		blocks          []string
		want            string
	}{
		{"Unsupported argument", `An argument named "limt" is not expected here.`, blocks, `An argument named "limt" is not expected here. Did you mean "limit"?`},
		{"Unsupported argument", `An argument named "when" is not expected here.`, blocks, `An argument named "when" is not expected here. Did you mean to define a block of type "when"?`},
		{"Unsupported argument", `An argument named "x" is not expected here. Did you mean "y"?`, blocks, `An argument named "x" is not expected here. Did you mean "y"?`},
		{"Unsupported block type", `Blocks of type "whn" are not expected here.`, blocks, `Blocks of type "whn" are not expected here. Did you mean "when"?`},
		{"Unsupported block type", `Blocks of type "whn" are not expected here.`, nil, `Blocks of type "whn" are not expected here.`},
	}
	for _, tt := range tests {
		d := &hcl.Diagnostic{Summary: tt.summary, Detail: tt.detail}
		if Unsupported(d, attrs, tt.blocks); d.Detail != tt.want {
			t.Errorf("Unsupported(%q): got %q, want %q", tt.detail, d.Detail, tt.want)
		}
	}
}
