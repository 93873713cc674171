package otp

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
)

// TestReadme parses every hcl block of README.md as HCL.
func TestReadme(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	rest := string(src)
	for {
		start := strings.Index(rest, "```hcl\n")
		if start < 0 {
			break
		}
		rest = rest[start+len("```hcl\n"):]
		end := strings.Index(rest, "```")
		if end < 0 {
			t.Fatal("unterminated hcl block")
		}
		blocks++
		if _, diags := hclparse.NewParser().ParseHCL([]byte(rest[:end]), "README.md"); diags.HasErrors() {
			t.Errorf("hcl block %d: %s", blocks, diags.Error())
		}
		rest = rest[end+3:]
	}
	if blocks < 3 {
		t.Errorf("got %d hcl blocks, want at least 3", blocks)
	}
}

// TestReadmePhoneTable checks the README's table of spellings.
func TestReadmePhoneTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw, region, want string // want "" for invalid
	}{
		{"+1 (202) 555-0100", "US", "+12025550100"},
		{"202.555.0100", "US", "+12025550100"},
		{"2025550100", "US", "+12025550100"},
		{"1 (202) 555-0100", "US", "+12025550100"},
		{"tel:+1-202-555-0100", "US", "+12025550100"},
		{"+1 202-555-0100 ext. 42", "US", "+12025550100"},
		{"011 44 7400 123456", "US", "+447400123456"},
		{"07400 123456", "GB", "+447400123456"},
		{"+44 (0) 7400 123456", "GB", "+447400123456"},
		{"0044 7400 123456", "DE", "+447400123456"},
		{"0044 7400 123456", "", "+447400123456"},
		{"+４４ ７４００ １２３４５６", "", "+447400123456"},
		{"+٤٤٧٤٠٠١٢٣٤٥٦", "", "+447400123456"},
		{"+۴۴۷۴۰۰۱۲۳۴۵۶", "", "+447400123456"},
		{"+४४७४००१२३४५६", "", "+447400123456"},
		{"00 44 7400 123456", "US", ""},
		{"12345", "US", ""},
		{"+1 201 555 012", "US", ""},
	}
	for _, tt := range tests {
		p, err := Normalize(tt.raw, tt.region)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("Normalize(%q, %q) = %+v, want invalid", tt.raw, tt.region, p)
		case tt.want != "" && (err != nil || p.E164 != tt.want):
			t.Errorf("Normalize(%q, %q) = %+v, %v; want %s", tt.raw, tt.region, p, err, tt.want)
		}
	}
	if p, _ := Normalize("+447400123456", ""); p.Range() != "+447400123" || p.Country() != "GB" {
		t.Errorf("Range, Country of +447400123456 = %q, %q", p.Range(), p.Country())
	}
	if p, _ := Normalize("+800 1234 5678", ""); p.Country() != "001" {
		t.Errorf("Country of +800 1234 5678 = %q, want 001", p.Country())
	}
}
