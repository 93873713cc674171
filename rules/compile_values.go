package rules

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules/hclattr"
)

// Attribute values are package hclattr's, which returns what it finds
// wrong as diagnostics for Compiler.Append. The Compiler keeps a door for
// the few that rules' own attributes use too, recording the diagnostics.

// StringList is hclattr.StringList, recorded: an optional list of
// strings and each element's range, nil for a missing attribute.
func (c *Compiler) StringList(expr hcl.Expression, attr string) ([]string, []hcl.Range) {
	list, rngs, diags := hclattr.StringList(expr, attr)
	c.Append(diags)
	return list, rngs
}

// IntList is hclattr.Statuses, recorded: an optional list of HTTP
// statuses (100-599), such as failure_status; nil for a missing attribute.
func (c *Compiler) IntList(expr hcl.Expression, attr string) []int {
	list, diags := hclattr.Statuses(expr, attr)
	c.Append(diags)
	return list
}

// PrefixLen is hclattr.PrefixLen, recorded: a prefix length n of a family
// of max bits (32 or 128) written as attr at rng (ipv4_prefix,
// ipv6_prefix), or max when it is out of range.
func (c *Compiler) PrefixLen(n, max int, rng hcl.Range, attr string) int {
	n, diags := hclattr.PrefixLen(n, max, rng, attr)
	c.Append(diags)
	return n
}

// IsNull is hclattr.IsNull: whether an optional expression attribute was
// left out.
func IsNull(expr hcl.Expression) bool { return hclattr.IsNull(expr) }

// ParseDuration is hclattr.ParseDuration: a Go duration, or days
// ("7d12h"), as policies write periods.
func ParseDuration(s string) (time.Duration, error) { return hclattr.ParseDuration(s) }
