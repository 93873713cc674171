package rules

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Value helpers of the compiler, which features use too.

// StringList decodes an optional list-of-strings attribute, keeping each
// element's range for diagnostics. A missing attribute gives nil.
func (c *Compiler) StringList(expr hcl.Expression, attr string) ([]string, []hcl.Range) {
	if expr == nil || IsNull(expr) {
		return nil, nil
	}
	items, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		c.Errorf(expr.Range(), "Invalid "+attr, "%s must be a list of strings, such as [\"a\", \"b\"]", attr)
		return nil, nil
	}
	out := make([]string, 0, len(items))
	rngs := make([]hcl.Range, 0, len(items))
	for _, it := range items {
		v, d := it.Value(nil)
		if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			c.Errorf(it.Range(), "Invalid "+attr, "each element of %s must be a string", attr)
			continue
		}
		out = append(out, v.AsString())
		rngs = append(rngs, it.Range())
	}
	return out, rngs
}

// AttrString evaluates attr as a string, or reports "Invalid NAME: NAME
// must be a string, such as EXAMPLE" at its value and returns false.
func (c *Compiler) AttrString(attr *hcl.Attribute, example string) (string, bool) {
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		c.Errorf(attr.Expr.Range(), "Invalid "+attr.Name, "%s must be a string, such as %s", attr.Name, example)
		return "", false
	}
	return v.AsString(), true
}

// IntList decodes an optional list-of-numbers attribute.
func (c *Compiler) IntList(expr hcl.Expression, attr string) []int {
	if expr == nil || IsNull(expr) {
		return nil
	}
	items, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		c.Errorf(expr.Range(), "Invalid "+attr, "%s must be a list of numbers", attr)
		return nil
	}
	var out []int
	for _, it := range items {
		v, d := it.Value(nil)
		if d.HasErrors() || v.IsNull() || v.Type() != cty.Number {
			c.Errorf(it.Range(), "Invalid "+attr, "each element of %s must be a number", attr)
			continue
		}
		bf := v.AsBigFloat()
		n, acc := bf.Int64()
		if acc != 0 || n < 100 || n > 599 {
			c.Errorf(it.Range(), "Invalid "+attr, "%s holds HTTP statuses (100-599), got %s", attr, bf.String())
			continue
		}
		out = append(out, int(n))
	}
	return out
}

// IsNull reports whether an optional expression attribute was left out
// (gohcl hands a synthetic null expression for absent attributes).
func IsNull(expr hcl.Expression) bool {
	if len(expr.Variables()) > 0 {
		return false
	}
	v, d := expr.Value(nil)
	return !d.HasErrors() && v.IsNull()
}

// ParseDuration parses a Go duration ("90s", "15m", "1h30m") and also
// accepts days ("1d", "7d12h"), as policies write periods in days.
func ParseDuration(s string) (time.Duration, error) {
	rest := s
	var days time.Duration
	if i := strings.IndexByte(rest, 'd'); i > 0 {
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		if n > 3650 {
			return 0, fmt.Errorf("duration %q is over ten years", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		rest = rest[i+1:]
		if rest == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(rest)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return days + d, nil
}

var knownMethodList = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

var knownMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, x := range knownMethodList {
		m[x] = true
	}
	return m
}()

// Suggest returns ` Did you mean "x"?` for the candidate closest to got,
// or "" when none is close enough to be a typo: the end of a diagnostic
// about a word that is not one of candidates.
func Suggest(got string, candidates []string) string { return suggest(got, candidates) }

// suggest returns ` Did you mean "x"?` for the closest candidate, or "".
func suggest(got string, candidates []string) string {
	// Close enough to be a typo: at most a third of the word differs.
	best, bestD := "", min(4, len(got)/3+1)
	lower := strings.ToLower(got)
	for _, cand := range candidates {
		if d := levenshtein.Distance(lower, strings.ToLower(cand), nil); d < bestD {
			best, bestD = cand, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

// vocabulary is what an attribute of a few fixed words takes: its name,
// what one of its values is ("an action"), and its words with what each
// compiles to, in the order a diagnostic lists them.
type vocabulary[T any] struct {
	attr, what string
	words      []string
	values     []T
}

// compile returns the value of word s of the attribute at rng, or reports
// "Invalid ATTR": that s is not one, the words wanted and the nearest.
func (v vocabulary[T]) compile(c *Compiler, s string, rng hcl.Range) (T, bool) {
	for i, w := range v.words {
		if w == s {
			return v.values[i], true
		}
	}
	quoted := make([]string, len(v.words))
	for i, w := range v.words {
		quoted[i] = strconv.Quote(w)
	}
	last := len(quoted) - 1
	want := strings.Join(quoted[:last], ", ") + " or " + quoted[last]
	c.Errorf(rng, "Invalid "+v.attr, "%q is not %s; want %s.%s", s, v.what, want, suggest(s, v.words))
	var zero T
	return zero, false
}

func algorithmNamesList() []string {
	var out []string
	for a := Algorithm(0); a < numAlgorithms; a++ {
		if a != Distinct {
			out = append(out, a.String())
		}
	}
	return append(out, ConcurrencyAlgorithm)
}

// PrefixLen checks a prefix length n of a family of max bits (32 or 128)
// written as attr at rng, a rule's or the edge block's ipv4_prefix or
// ipv6_prefix: an error (and max) outside 0..max, a warning for one so
// coarse that a whole organisation shares a counter.
func (c *Compiler) PrefixLen(n, max int, rng hcl.Range, attr string) int {
	if n < 0 || n > max {
		c.Errorf(rng, "Invalid "+attr, "%s must be between 0 and %d, got %d", attr, max, n)
		return max
	}
	// An IPv4 /16 or an IPv6 /32 is already a whole organisation's network.
	if coarse := max / 4; max == 32 && n < 16 || max == 128 && n < coarse {
		c.Warnf(rng, "Very coarse "+attr, "%s = %d puts at least 2^%d addresses in one counter; every client in such a network shares one budget", attr, n, max-n)
	}
	return n
}
