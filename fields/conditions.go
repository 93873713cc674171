package fields

import (
	"crypto/sha256"
	"crypto/subtle"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/internal/httpsyntax"
	"github.com/edge-gateway/edge/rules"
)

// The header conditions of when { } (docs/policy.md, "when { }"), for
// exemptions such as a monitoring probe or a partner:
//
//	when {
//	  ip_in         = ["198.51.100.0/24"]
//	  header_equals = { "X-Partner-Key" = "..." }
//	}
//
// A header any client can send exempts nobody by itself: pair it with
// ip_in. A value in header_equals is a secret in the policy file, visible to
// whoever can read the file (and its history in version control).

func conditions() []rules.ConditionType {
	return []rules.ConditionType{
		{Name: "header_present", Compile: compileHeaderPresent},
		{Name: "header_equals", Compile: compileHeaderEquals},
	}
}

// headerName validates a header name of a condition: an RFC 9110 token
// (§5.6.2). It records the name as read, so the edge forwards the header
// only under that spelling (Compiler.ReadsHeader).
func headerName(c *rules.Compiler, name string, rng hcl.Range, attr string) bool {
	if !httpsyntax.IsToken(name) {
		c.Errorf(rng, "Invalid header name", "%q is not a header name (an RFC 9110 token: letters, digits and !#$%%&'*+-.^_`|~); %s could never hold", name, attr)
		return false
	}
	c.ReadsHeader(name)
	return true
}

func compileHeaderPresent(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
	list, rngs := c.StringList(a.Expr, a.Name)
	if list == nil {
		return nil // not a list: StringList reported it
	}
	if items, _ := hcl.ExprList(a.Expr); len(items) == 0 {
		c.Errorf(a.Expr.Range(), "Empty header_present", "header_present needs at least one header name, such as [\"X-Monitoring\"]")
		return nil
	}
	cond := &headerPresent{}
	ok := true
	for i, n := range list {
		if !headerName(c, n, rngs[i], a.Name) {
			ok = false
			continue
		}
		for _, have := range cond.names {
			if strings.EqualFold(string(have), n) {
				c.Errorf(rngs[i], "Duplicate header", "%q is listed twice in header_present (header names are case-insensitive)", n)
				ok = false
			}
		}
		cond.names = append(cond.names, []byte(n))
	}
	if !ok {
		return nil
	}
	return cond
}

// headerPresent is when { header_present = [...] }: every listed header is
// present with a non-empty value. A header sent empty is not present: an
// empty value is what a client that has none sends.
type headerPresent struct{ names [][]byte }

// String returns the condition as a policy writes it.
func (c *headerPresent) String() string {
	q := make([]string, len(c.names))
	for i, n := range c.names {
		q[i] = strconv.Quote(string(n))
	}
	return "header_present = [" + strings.Join(q, ", ") + "]"
}

// Eval reports Present when every header is there, Missing otherwise. It
// does not allocate.
func (c *headerPresent) Eval(req *rules.Request, _ *rules.Scratch) rules.Status {
	if req.Fields == nil {
		return rules.Missing
	}
	for _, n := range c.names {
		if len(req.Fields.Header(n)) == 0 {
			return rules.Missing
		}
	}
	return rules.Present
}

func compileHeaderEquals(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
	pairs, diags := hcl.ExprMap(a.Expr)
	if diags.HasErrors() {
		c.Errorf(a.Expr.Range(), "Invalid header_equals", "header_equals must be an object of header names and values, such as { \"X-Partner-Key\" = \"...\" }")
		return nil
	}
	if len(pairs) == 0 {
		c.Errorf(a.Expr.Range(), "Empty header_equals", "header_equals needs at least one header, such as { \"X-Partner-Key\" = \"...\" }")
		return nil
	}
	cond := &headerEquals{}
	ok := true
	var seen []string
	for _, kv := range pairs {
		k, kd := kv.Key.Value(nil)
		if kd.HasErrors() || k.IsNull() || !k.IsKnown() || k.Type() != cty.String {
			c.Errorf(kv.Key.Range(), "Invalid header_equals", "each name in header_equals must be a string, such as \"X-Partner-Key\"")
			ok = false
			continue
		}
		name := k.AsString()
		if !headerName(c, name, kv.Key.Range(), a.Name) {
			ok = false
			continue
		}
		if slices.ContainsFunc(seen, func(s string) bool { return strings.EqualFold(s, name) }) {
			c.Errorf(kv.Key.Range(), "Duplicate header", "%q is listed twice in header_equals (header names are case-insensitive)", name)
			ok = false
			continue
		}
		seen = append(seen, name)
		v, vd := kv.Value.Value(nil)
		if vd.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			c.Errorf(kv.Value.Range(), "Invalid header_equals", "the value of %q must be a string", name)
			ok = false
			continue
		}
		want := v.AsString()
		if msg := fieldValueProblem(want); msg != "" {
			// Never the value itself: it is often a secret.
			c.Errorf(kv.Value.Range(), "Invalid header value", "the value of %q %s, so the condition could never hold", name, msg)
			ok = false
			continue
		}
		cond.headers = append(cond.headers, equalHeader{name: []byte(name), sum: sha256.Sum256([]byte(want))})
	}
	if !ok {
		return nil
	}
	return cond
}

// fieldValueProblem says why v can never be a header's value as the edge
// reads it, or "": an RFC 9110 §5.5 field value is visible ASCII, obs-text,
// spaces and tabs, and the edge reads it without its leading and trailing
// whitespace; an empty value is never present (headerPresent).
func fieldValueProblem(v string) string {
	switch {
	case v == "":
		return "is empty"
	case strings.TrimLeft(v, " \t") != v || strings.TrimRight(v, " \t") != v:
		return "starts or ends with whitespace, which the edge trims from what it reads"
	}
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 0x20 && b != '\t' || b == 0x7f {
			return "holds a control character (RFC 9110 §5.5)"
		}
	}
	return ""
}

// headerEquals is when { header_equals = { NAME = VALUE, ... } }: every
// listed header's value (its first line, as the edge reads it) is exactly
// VALUE, byte for byte. The values are often partner secrets, so the
// condition keeps only their SHA-256 digests and compares digests in
// constant time (crypto/subtle): neither the time a comparison takes nor
// its length leaks how much of a guess was right.
type headerEquals struct{ headers []equalHeader }

type equalHeader struct {
	name []byte
	sum  [sha256.Size]byte
}

// String returns the condition as a policy writes it, with every value
// redacted.
func (c *headerEquals) String() string {
	q := make([]string, len(c.headers))
	for i, h := range c.headers {
		q[i] = strconv.Quote(string(h.name)) + " = (redacted)"
	}
	return "header_equals = { " + strings.Join(q, ", ") + " }"
}

// Eval reports Present when every header has its value, Missing otherwise.
// Every listed header present is compared, so the time taken does not
// tell which one differed. It does not allocate.
func (c *headerEquals) Eval(req *rules.Request, _ *rules.Scratch) rules.Status {
	if req.Fields == nil {
		return rules.Missing
	}
	eq := 1
	for i := range c.headers {
		h := &c.headers[i]
		v := req.Fields.Header(h.name)
		if len(v) == 0 {
			return rules.Missing
		}
		got := sha256.Sum256(v)
		eq &= subtle.ConstantTimeCompare(got[:], h.sum[:])
	}
	if eq != 1 {
		return rules.Missing
	}
	return rules.Present
}
