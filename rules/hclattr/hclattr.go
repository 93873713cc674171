package hclattr

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Errorf returns an error at rng: summary, and the detail format makes
// with args.
func Errorf(rng hcl.Range, summary, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: &rng}
}

// Warnf returns a warning at rng, as Errorf returns an error.
func Warnf(rng hcl.Range, summary, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: &rng}
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

// StringList decodes expr, the value of the optional list-of-strings
// attribute attr, keeping each element's range for diagnostics: nil for
// an attribute left out (a nil or null expr). An expr that is not a list
// is an "Invalid ATTR" error at it, and so is each element that is not a
// string, which the list leaves out.
func StringList(expr hcl.Expression, attr string) ([]string, []hcl.Range, hcl.Diagnostics) {
	if expr == nil || IsNull(expr) {
		return nil, nil, nil
	}
	items, d := hcl.ExprList(expr)
	if d.HasErrors() {
		return nil, nil, hcl.Diagnostics{Errorf(expr.Range(), "Invalid "+attr, "%s must be a list of strings, such as [\"a\", \"b\"]", attr)}
	}
	var diags hcl.Diagnostics
	out := make([]string, 0, len(items))
	rngs := make([]hcl.Range, 0, len(items))
	for _, it := range items {
		v, d := it.Value(nil)
		if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			diags = append(diags, Errorf(it.Range(), "Invalid "+attr, "each element of %s must be a string", attr))
			continue
		}
		out = append(out, v.AsString())
		rngs = append(rngs, it.Range())
	}
	return out, rngs, diags
}

// String evaluates attr as a string, or returns "", and the error
// "Invalid NAME: NAME must be a string, such as EXAMPLE" at its value.
func String(attr *hcl.Attribute, example string) (string, hcl.Diagnostics) {
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", hcl.Diagnostics{Errorf(attr.Expr.Range(), "Invalid "+attr.Name, "%s must be a string, such as %s", attr.Name, example)}
	}
	return v.AsString(), nil
}

// Statuses decodes expr, the value of the optional attribute attr, a
// list of HTTP statuses (100-599): nil for an attribute left out. An
// expr that is not a list, and each element that is not a status (left
// out), is an "Invalid ATTR" error.
func Statuses(expr hcl.Expression, attr string) ([]int, hcl.Diagnostics) {
	if expr == nil || IsNull(expr) {
		return nil, nil
	}
	items, d := hcl.ExprList(expr)
	if d.HasErrors() {
		return nil, hcl.Diagnostics{Errorf(expr.Range(), "Invalid "+attr, "%s must be a list of numbers", attr)}
	}
	var out []int
	var diags hcl.Diagnostics
	for _, it := range items {
		v, d := it.Value(nil)
		if d.HasErrors() || v.IsNull() || v.Type() != cty.Number {
			diags = append(diags, Errorf(it.Range(), "Invalid "+attr, "each element of %s must be a number", attr))
			continue
		}
		bf := v.AsBigFloat()
		n, acc := bf.Int64()
		if acc != 0 || n < 100 || n > 599 {
			diags = append(diags, Errorf(it.Range(), "Invalid "+attr, "%s holds HTTP statuses (100-599), got %s", attr, bf.String()))
			continue
		}
		out = append(out, int(n))
	}
	return out, diags
}

// ParseDuration parses a Go duration ("90s", "15m", "1h30m") and also
// accepts days ("1d", "7d12h", at most 3650 days), as policies write
// periods in days. Its error names s.
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

// Suggest returns ` Did you mean "x"?` for the candidate closest to got,
// when close enough to be a typo (at most a third of the word differs,
// case aside), or "": the end of a diagnostic that names what it wanted.
func Suggest(got string, candidates []string) string {
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

// Vocabulary is what an attribute of a few fixed words takes: its name
// (Attr), what one of its values is (What: "an action"), and its Words
// with the Values each compiles to, in the order a diagnostic lists them.
type Vocabulary[T any] struct {
	Attr, What string
	Words      []string
	Values     []T
}

// Compile returns the value of word s, the attribute's value at rng; for
// a word not among Words, the zero T and the error "Invalid ATTR": that s
// is not one, the words wanted and the nearest.
func (v Vocabulary[T]) Compile(s string, rng hcl.Range) (T, hcl.Diagnostics) {
	for i, w := range v.Words {
		if w == s {
			return v.Values[i], nil
		}
	}
	var zero T
	return zero, hcl.Diagnostics{Errorf(rng, "Invalid "+v.Attr, "%q is not %s; want %s.%s", s, v.What, quoteOr(v.Words), Suggest(s, v.Words))}
}

// quoteOr lists words quoted, the last after "or": "a", "b" or "c".
func quoteOr(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = strconv.Quote(w)
	}
	last := len(quoted) - 1
	return strings.Join(quoted[:last], ", ") + " or " + quoted[last]
}

// Word compiles s, the value of attribute attr at rng, which must be one
// of words, into its index in words; otherwise -1 and the error of
// Vocabulary.Compile (s is not what, such as "an adaptive method").
func Word(s string, rng hcl.Range, attr, what string, words ...string) (int, hcl.Diagnostics) {
	idx := make([]int, len(words))
	for i := range idx {
		idx[i] = i
	}
	i, diags := Vocabulary[int]{Attr: attr, What: what, Words: words, Values: idx}.Compile(s, rng)
	if diags.HasErrors() {
		return -1, diags
	}
	return i, nil
}

// PrefixLen checks a prefix length n of a family of max bits (32 or 128)
// written as attr at rng (a rule's or the edge block's ipv4_prefix or
// ipv6_prefix): outside 0..max it returns max and an error; one so coarse
// that a whole organisation shares a counter (under /16 for IPv4, a
// quarter of the bits for IPv6) comes back with a warning.
func PrefixLen(n, max int, rng hcl.Range, attr string) (int, hcl.Diagnostics) {
	if n < 0 || n > max {
		return max, hcl.Diagnostics{Errorf(rng, "Invalid "+attr, "%s must be between 0 and %d, got %d", attr, max, n)}
	}
	// An IPv4 /16 or an IPv6 /32 is already a whole organisation's network.
	if coarse := max / 4; max == 32 && n < 16 || max == 128 && n < coarse {
		return n, hcl.Diagnostics{Warnf(rng, "Very coarse "+attr, "%s = %d puts at least 2^%d addresses in one counter; every client in such a network shares one budget", attr, n, max-n)}
	}
	return n, nil
}

// Unsupported rewrites d when it is HCL's "Unsupported argument" without
// a suggestion of its own, or, with blocks, its "Unsupported block type",
// to suggest among attrs or blocks: every item the body takes, where the
// schema HCL checked held only some of them (a rule block's features'
// items, one owner's share of a shared block). An argument named as one
// of blocks is asked whether it meant that block, as HCL asks.
func Unsupported(d *hcl.Diagnostic, attrs, blocks []string) {
	if name, ok := strings.CutPrefix(d.Detail, "Blocks of type \""); ok && d.Summary == "Unsupported block type" && blocks != nil {
		name, _, _ = strings.Cut(name, "\"")
		d.Detail = "Blocks of type \"" + name + "\" are not expected here." + Suggest(name, blocks)
		return
	}
	if name, ok := strings.CutPrefix(d.Detail, "An argument named \""); ok && d.Summary == "Unsupported argument" && !strings.Contains(name, "Did you mean") {
		name, _, _ = strings.Cut(name, "\"")
		if slices.Contains(blocks, name) {
			d.Detail = "An argument named \"" + name + "\" is not expected here. Did you mean to define a block of type \"" + name + "\"?"
			return
		}
		d.Detail = "An argument named \"" + name + "\" is not expected here." + Suggest(name, attrs)
	}
}
