package policytest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/edge-gateway/edge/internal/httpsyntax"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
)

// Expect is the decision a test request expects.
type Expect uint8

const (
	// ExpectAllow: forwarded, and no rule decided dry_run_deny.
	ExpectAllow Expect = iota
	// ExpectDeny: refused, 429 or 403 (rules.RefuseLimit,
	// rules.RefuseForbidden).
	ExpectDeny
	// ExpectDryRunDeny: forwarded, but a dry-run rule would have refused.
	ExpectDryRunDeny
	// ExpectReject: 400, a missing or invalid identity or a request the
	// edge cannot read one way only.
	ExpectReject
	// ExpectErrorDeny: 503, a fail-closed rule could not reach its store.
	ExpectErrorDeny

	expectUnknown Expect = 255 // a request whose expect did not parse
)

var expectNames = [...]string{"allow", "deny", "dry_run_deny", "reject", "error_deny"}

// String returns the expectation as test blocks write it.
func (e Expect) String() string {
	if int(e) < len(expectNames) {
		return expectNames[e]
	}
	return "unknown"
}

// Defaults of a request block's optional attributes.
const (
	DefaultMethod       = "GET"
	DefaultPath         = "/"
	DefaultOriginStatus = 200
)

// defaultFrom is the socket peer of a request block without `from`:
// 192.0.2.1, in TEST-NET-1 (RFC 5737 §3), an address no real client has.
var defaultFrom = netip.AddrFrom4([4]byte{192, 0, 2, 1})

// Test is one test block.
type Test struct {
	Name     string
	Requests []Request
	// Range is the block's header, `test "NAME"`.
	Range hcl.Range
}

// Header is one header or cookie of a request, as written.
type Header struct {
	Name, Value string
}

// Request is one request block: what is sent, how often, and what the edge
// must decide.
type Request struct {
	// After is how far the simulated clock moves before the request (its
	// first repeat), from the previous request; 0 for the first.
	After time.Duration
	// Method and Path are sent as written: Path is the request-target
	// ("//LOGIN/?x=1" reaches the edge so).
	Method, Path string
	// From is the socket peer's address (port 40000; without `from`,
	// 192.0.2.1, in TEST-NET-1, RFC 5737 §3).
	From netip.Addr
	// Headers are sent in the order written; a list value sends one line
	// per element. A "Host" header replaces the default Host.
	Headers []Header
	// Cookies are sent as one Cookie header, "a=1; b=2", in the order
	// written.
	Cookies []Header
	// ContentType and Body are the json or form attribute's body: a JSON
	// object (application/json) or a form (application/x-www-form-urlencoded),
	// fields in the order written. Empty without either.
	ContentType string
	Body        []byte
	// Visitor names a visitor: the request carries a validly signed visitor
	// cookie, one per name within a test. Empty: no visitor cookie.
	Visitor string
	// OriginStatus is what the simulated origin answers a forwarded request.
	OriginStatus int
	// OriginHeaders are the headers the simulated origin adds to its
	// answer (origin_headers), such as a settle_from header naming the
	// request's real cost (docs/policy.md, "cost").
	OriginHeaders []Header
	// Repeat is how many times the request is sent, each at the same
	// simulated instant and each expecting Expect (at least 1).
	Repeat int
	Expect Expect
	// Rule is the rule expected to decide: the one that refused (deny,
	// error_deny), would have refused (dry_run_deny) or found the identity
	// missing or invalid (reject). Empty: any.
	Rule string

	// Range is the request block's header; RuleRange the rule value's,
	// VisitorRange the visitor value's.
	Range, RuleRange, VisitorRange hcl.Range
}

var testFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "test", LabelNames: []string{"name"}}},
}

var testSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "request"}},
}

var requestSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "after"}, {Name: "method"}, {Name: "path"}, {Name: "from"},
		{Name: "json"}, {Name: "form"}, {Name: "headers"}, {Name: "cookies"},
		{Name: "visitor"}, {Name: "origin_status"}, {Name: "origin_headers"}, {Name: "repeat"},
		{Name: "expect", Required: true}, {Name: "rule"},
	},
}

// Parse decodes the test blocks of the policy file src (named filename in
// diagnostics), ignoring every other block. It collects every diagnostic,
// each with the file, line and column of the offending value: an unknown
// expect, a bad duration, address, method, path, header or status, repeat
// under 1, both json and form, a test without requests, two tests of one
// name. Rule names are checked by Check, against the compiled policy.
func Parse(filename string, src []byte) ([]Test, hcl.Diagnostics) {
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diags
	}
	content, _, d := f.Body.PartialContent(testFileSchema)
	diags = append(diags, d...)
	var tests []Test
	seen := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		t := Test{Name: b.Labels[0], Range: hcl.RangeBetween(b.TypeRange, b.LabelRanges[0])}
		if prev, ok := seen[t.Name]; ok {
			diags = append(diags, errorAt(b.LabelRanges[0], "Duplicate test",
				fmt.Sprintf("test %q is already defined at %s", t.Name, prev)))
		}
		seen[t.Name] = t.Range
		tc, td := b.Body.Content(testSchema)
		diags = append(diags, td...)
		for _, rb := range tc.Blocks {
			r, d := parseRequest(rb)
			diags = append(diags, d...)
			t.Requests = append(t.Requests, r)
		}
		if len(tc.Blocks) == 0 && !td.HasErrors() {
			diags = append(diags, errorAt(t.Range, "Test without requests",
				fmt.Sprintf("test %q has no request block: it would test nothing", t.Name)))
		}
		tests = append(tests, t)
	}
	sortDiags(diags)
	return tests, diags
}

// sortDiags orders diagnostics by position, as a reader meets them.
func sortDiags(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		if a.Subject == nil || b.Subject == nil {
			return 0
		}
		return cmp.Or(cmp.Compare(a.Subject.Filename, b.Subject.Filename), cmp.Compare(a.Subject.Start.Byte, b.Subject.Start.Byte))
	})
}

func parseRequest(b *hcl.Block) (Request, hcl.Diagnostics) {
	r := Request{
		Method: DefaultMethod, Path: DefaultPath, From: defaultFrom,
		OriginStatus: DefaultOriginStatus, Repeat: 1, Range: b.TypeRange,
	}
	c, diags := b.Body.Content(requestSchema)
	str := func(name string, set func(s string, rng hcl.Range)) {
		if a, ok := c.Attributes[name]; ok {
			s, d := stringValue(a.Expr)
			diags = append(diags, d...)
			if !d.HasErrors() {
				set(s, a.Expr.Range())
			}
		}
	}
	integer := func(name string, set func(n int, rng hcl.Range)) {
		if a, ok := c.Attributes[name]; ok {
			n, d := intValue(a.Expr)
			diags = append(diags, d...)
			if !d.HasErrors() {
				set(n, a.Expr.Range())
			}
		}
	}
	str("after", func(s string, rng hcl.Range) {
		d, err := rules.ParseDuration(s)
		switch {
		case err != nil:
			diags = append(diags, errorAt(rng, "Invalid duration", err.Error()+`; want a Go duration such as "90s", "15m" or "1d"`))
		case d < 0:
			diags = append(diags, errorAt(rng, "Invalid duration", fmt.Sprintf("%q is negative: the simulated clock only moves forward", s)))
		}
		r.After = d
	})
	str("method", func(s string, rng hcl.Range) {
		if !httpsyntax.IsToken(s) {
			diags = append(diags, errorAt(rng, "Invalid method", fmt.Sprintf("%q is not an HTTP method token (RFC 9110 §9.1)", s)))
		}
		r.Method = s
	})
	str("path", func(s string, rng hcl.Range) {
		if s == "" || strings.ContainsAny(s, " \t\r\n\x00") {
			diags = append(diags, errorAt(rng, "Invalid path", fmt.Sprintf("%q cannot be sent as a request-target: it is empty or holds a space or control character", s)))
		}
		r.Path = s
	})
	str("from", func(s string, rng hcl.Range) {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			diags = append(diags, errorAt(rng, "Invalid address", fmt.Sprintf("%q is not an IPv4 or IPv6 address (without zone or port)", s)))
			return
		}
		r.From = a
	})
	str("visitor", func(s string, rng hcl.Range) {
		if s == "" {
			diags = append(diags, errorAt(rng, "Invalid visitor", "a visitor needs a name; leave visitor out for a request without a visitor cookie"))
		}
		r.Visitor, r.VisitorRange = s, rng
	})
	r.Expect = expectUnknown // until expect parses: Check then says nothing of it
	str("expect", func(s string, rng hcl.Range) {
		for i, n := range expectNames {
			if s == n {
				r.Expect = Expect(i)
				return
			}
		}
		diags = append(diags, errorAt(rng, "Unknown expectation",
			fmt.Sprintf("%q is not an expectation; want one of %s", s, strings.Join(expectNames[:], ", "))))
	})
	str("rule", func(s string, rng hcl.Range) { r.Rule, r.RuleRange = s, rng })
	integer("origin_status", func(n int, rng hcl.Range) {
		if n < 100 || n > 599 {
			diags = append(diags, errorAt(rng, "Invalid status", fmt.Sprintf("%d is not an HTTP status (100 to 599)", n)))
		}
		r.OriginStatus = n
	})
	integer("repeat", func(n int, rng hcl.Range) {
		if n < 1 {
			diags = append(diags, errorAt(rng, "Invalid repeat", fmt.Sprintf("repeat = %d sends nothing; want 1 or more", n)))
		}
		r.Repeat = n
	})
	if a, ok := c.Attributes["headers"]; ok {
		hs, d := headers(a.Expr, "header")
		diags = append(diags, d...)
		r.Headers = hs
	}
	if a, ok := c.Attributes["origin_headers"]; ok {
		hs, d := headers(a.Expr, "header")
		diags = append(diags, d...)
		r.OriginHeaders = hs
	}
	if a, ok := c.Attributes["cookies"]; ok {
		hs, d := headers(a.Expr, "cookie")
		diags = append(diags, d...)
		r.Cookies = hs
	}
	ja, hasJSON := c.Attributes["json"]
	fa, hasForm := c.Attributes["form"]
	switch {
	case hasJSON && hasForm:
		diags = append(diags, errorAt(fa.Expr.Range(), "Two bodies",
			fmt.Sprintf("the request has a json body (%s) and a form body: set one", ja.Expr.Range())))
	case hasJSON:
		var buf bytes.Buffer
		d := appendJSON(&buf, ja.Expr)
		diags = append(diags, d...)
		if _, ok := ja.Expr.(*hclsyntax.ObjectConsExpr); !ok && !d.HasErrors() {
			diags = append(diags, errorAt(ja.Expr.Range(), "Invalid json", `json is an object, such as { phone = "+12025550100" }`))
		}
		r.ContentType, r.Body = "application/json", buf.Bytes()
	case hasForm:
		body, d := formBody(fa.Expr)
		diags = append(diags, d...)
		r.ContentType, r.Body = "application/x-www-form-urlencoded", body
	}
	return r, diags
}

// items returns the items of an object expression in the order written:
// a cty object value would sort them (and merge repeated keys).
func items(expr hcl.Expression, what string) ([]hclsyntax.ObjectConsItem, hcl.Diagnostics) {
	o, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return nil, hcl.Diagnostics{errorAt(expr.Range(), "Invalid "+what,
			fmt.Sprintf(`%s is an object written out, such as { name = "value" }`, what))}
	}
	return o.Items, nil
}

// itemKey returns an object item's key as a string.
func itemKey(it hclsyntax.ObjectConsItem) (string, hcl.Diagnostics) {
	return stringValue(it.KeyExpr)
}

// headers reads a headers or cookies object: a string value per name, or a
// list of strings (one header line each; cookies take strings only).
func headers(expr hcl.Expression, what string) ([]Header, hcl.Diagnostics) {
	its, diags := items(expr, what+"s")
	var out []Header
	for _, it := range its {
		name, d := itemKey(it)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if !httpsyntax.IsToken(name) {
			diags = append(diags, errorAt(it.KeyExpr.Range(), "Invalid "+what+" name",
				fmt.Sprintf("%q is not a %s name: a token of letters, digits and !#$%%&'*+-.^_`|~ (RFC 9110 §5.1)", name, what)))
			continue
		}
		values, d := stringValues(it.ValueExpr, what == "header")
		diags = append(diags, d...)
		for _, v := range values {
			bad := "\r\n\x00"
			if what == "cookie" {
				bad += "; " // they end a cookie-pair (RFC 6265 §4.2.1)
			}
			if strings.ContainsAny(v, bad) {
				diags = append(diags, errorAt(it.ValueExpr.Range(), "Invalid "+what+" value",
					fmt.Sprintf("%q cannot be sent as a %s value: it holds one of %q", v, what, bad)))
				continue
			}
			out = append(out, Header{Name: name, Value: v})
		}
	}
	return out, diags
}

// formBody encodes a form object as application/x-www-form-urlencoded,
// fields in the order written; a list value repeats its field.
func formBody(expr hcl.Expression) ([]byte, hcl.Diagnostics) {
	its, diags := items(expr, "form")
	var b []byte
	for _, it := range its {
		name, d := itemKey(it)
		diags = append(diags, d...)
		values, vd := stringValues(it.ValueExpr, true)
		diags = append(diags, vd...)
		for _, v := range values {
			if len(b) > 0 {
				b = append(b, '&')
			}
			b = append(b, url.QueryEscape(name)...)
			b = append(b, '=')
			b = append(b, url.QueryEscape(v)...)
		}
	}
	return b, diags
}

// appendJSON writes expr as JSON, objects with their members in the order
// written (a repeated member is written twice, as a client may send it).
func appendJSON(buf *bytes.Buffer, expr hcl.Expression) hcl.Diagnostics {
	switch e := expr.(type) {
	case *hclsyntax.ObjectConsExpr:
		var diags hcl.Diagnostics
		buf.WriteByte('{')
		for i, it := range e.Items {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, d := itemKey(it)
			diags = append(diags, d...)
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			diags = append(diags, appendJSON(buf, it.ValueExpr)...)
		}
		buf.WriteByte('}')
		return diags
	case *hclsyntax.TupleConsExpr:
		var diags hcl.Diagnostics
		buf.WriteByte('[')
		for i, x := range e.Exprs {
			if i > 0 {
				buf.WriteByte(',')
			}
			diags = append(diags, appendJSON(buf, x)...)
		}
		buf.WriteByte(']')
		return diags
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return diags
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return hcl.Diagnostics{errorAt(expr.Range(), "Invalid json", "cannot write this value as JSON: "+err.Error())}
	}
	buf.Write(b)
	return nil
}

// stringValue evaluates expr, which takes no variables, as a string.
func stringValue(expr hcl.Expression) (string, hcl.Diagnostics) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return "", diags
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || s.IsNull() || !s.IsKnown() {
		return "", hcl.Diagnostics{errorAt(expr.Range(), "Invalid value", "want a string")}
	}
	return s.AsString(), nil
}

// stringValues evaluates expr as a string, or, with list, as a list of
// strings.
func stringValues(expr hcl.Expression, list bool) ([]string, hcl.Diagnostics) {
	if t, ok := expr.(*hclsyntax.TupleConsExpr); ok && list {
		var out []string
		var diags hcl.Diagnostics
		for _, x := range t.Exprs {
			s, d := stringValue(x)
			diags = append(diags, d...)
			out = append(out, s)
		}
		return out, diags
	}
	s, diags := stringValue(expr)
	return []string{s}, diags
}

// intValue evaluates expr as a whole number.
func intValue(expr hcl.Expression) (int, hcl.Diagnostics) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return 0, diags
	}
	n, err := convert.Convert(v, cty.Number)
	if err != nil || n.IsNull() || !n.IsKnown() {
		return 0, hcl.Diagnostics{errorAt(expr.Range(), "Invalid value", "want a whole number")}
	}
	i, acc := n.AsBigFloat().Int64()
	if acc != 0 || i != int64(int32(i)) {
		return 0, hcl.Diagnostics{errorAt(expr.Range(), "Invalid value", "want a whole number")}
	}
	return int(i), nil
}

// Check checks tests against the compiled policy p: every rule a request
// names is one of p's rules, a request names a rule only when it expects a
// refusal, and a request with a visitor needs p's visitor block.
func Check(p *rules.Policy, tests []Test) hcl.Diagnostics {
	names := make(map[string]bool, len(p.Rules))
	for _, r := range p.Rules {
		names[r.Name] = true
	}
	var diags hcl.Diagnostics
	for _, t := range tests {
		for _, r := range t.Requests {
			switch {
			case r.Rule == "":
			case !names[r.Rule]:
				diags = append(diags, errorAt(r.RuleRange, "Unknown rule",
					fmt.Sprintf("the policy has no rule %q", r.Rule)))
			case r.Expect == ExpectAllow:
				diags = append(diags, errorAt(r.RuleRange, "Rule without a refusal",
					`rule names the rule expected to refuse; an "allow" request has none`))
			}
			if r.Visitor != "" && nat.ConfigOf(p) == nil {
				diags = append(diags, errorAt(r.VisitorRange, "No visitor block",
					"the request carries a visitor cookie, but the policy has no visitor block to sign one"))
			}
		}
	}
	sortDiags(diags)
	return diags
}

func errorAt(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}
}
