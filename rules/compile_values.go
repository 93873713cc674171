package rules

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules/hclattr"
)

// The Compiler's doors to package hclattr, which reads attribute values
// as the policy language writes them: each records what hclattr finds
// wrong among the compile's diagnostics.

// StringList decodes an optional list-of-strings attribute, keeping each
// element's range for diagnostics (hclattr.StringList). A missing
// attribute gives nil.
func (c *Compiler) StringList(expr hcl.Expression, attr string) ([]string, []hcl.Range) {
	list, rngs, diags := hclattr.StringList(expr, attr)
	c.Append(diags)
	return list, rngs
}

// AttrString evaluates attr as a string, or reports "Invalid NAME: NAME
// must be a string, such as EXAMPLE" at its value and returns false
// (hclattr.String).
func (c *Compiler) AttrString(attr *hcl.Attribute, example string) (string, bool) {
	s, diags := hclattr.String(attr, example)
	return s, c.Append(diags)
}

// IntList decodes an optional list of HTTP statuses (100-599), such as
// failure_status (hclattr.Statuses). A missing attribute gives nil.
func (c *Compiler) IntList(expr hcl.Expression, attr string) []int {
	list, diags := hclattr.Statuses(expr, attr)
	c.Append(diags)
	return list
}

// Word compiles s, the value of attribute attr at rng, which must be one
// of words, into its index in words. Otherwise it reports "Invalid ATTR"
// as rules' own attributes of a few fixed words do (s is not what, one of
// them such as "an adaptive method"; the words wanted, in order; the
// nearest) and returns -1 (hclattr.Word).
func (c *Compiler) Word(s string, rng hcl.Range, attr, what string, words ...string) int {
	i, diags := hclattr.Word(s, rng, attr, what, words...)
	c.Append(diags)
	return i
}

// PrefixLen checks a prefix length n of a family of max bits (32 or 128)
// written as attr at rng, a rule's or the edge block's ipv4_prefix or
// ipv6_prefix: an error (and max) outside 0..max, a warning for one so
// coarse that a whole organisation shares a counter (hclattr.PrefixLen).
func (c *Compiler) PrefixLen(n, max int, rng hcl.Range, attr string) int {
	n, diags := hclattr.PrefixLen(n, max, rng, attr)
	c.Append(diags)
	return n
}

// IsNull reports whether an optional expression attribute was left out
// (hclattr.IsNull).
func IsNull(expr hcl.Expression) bool { return hclattr.IsNull(expr) }

// ParseDuration parses a Go duration, or days ("7d12h"), as policies
// write periods (hclattr.ParseDuration).
func ParseDuration(s string) (time.Duration, error) { return hclattr.ParseDuration(s) }

// Suggest returns ` Did you mean "x"?` for the candidate closest to got
// when it looks like a typo of it, or "" (hclattr.Suggest).
func Suggest(got string, candidates []string) string { return hclattr.Suggest(got, candidates) }
