package refusal

import (
	"mime"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/hclattr"
)

// Feature returns the refusal behaviour: retry_after_jitter,
// refusal_status, refusal_body and refusal_content_type on rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name: "refusal",
		RuleAttrs: []rules.RuleAttrType{
			{Name: "retry_after_jitter", Compile: compileRetryJitter},
			{Name: "refusal_status", Compile: compileStatus},
			{Name: "refusal_body", Compile: compileBody},
			{Name: "refusal_content_type", Compile: compileContentType},
		},
		RuleDone: finish,
	}
}

// MaxBody is the most bytes refusal_body may hold: a refusal is answered
// to floods, and its body is copied into every answer.
const MaxBody = 4096

// DefaultContentType is refusal_body's content type unless
// refusal_content_type says otherwise.
const DefaultContentType = "text/plain; charset=utf-8"

// Refusal is how a rule's informative refusal is answered: the rule's
// Stage when it sets any of the attributes. Its zero value is the default:
// 429, the problem+json body, Retry-After the true wait.
type Refusal struct {
	// Jitter is retry_after_jitter as a fraction, 0 (off) to 1 (100%):
	// Retry-After and the rule's RateLimit t are the true wait plus a
	// uniformly random extra of up to Jitter × the wait, in whole seconds,
	// never earlier than the true wait.
	Jitter float64
	// Status is refusal_status, 0 for the default 429.
	Status int
	// Body is refusal_body, nil for the default problem+json body;
	// ContentType its refusal_content_type (default DefaultContentType).
	Body        []byte
	ContentType string

	contentTypeRange *hcl.Range // set when refusal_content_type is written
}

// Behaviour names the stage.
func (*Refusal) Behaviour() string { return "refusal" }

// RetryJitter is Jitter: the fraction of a refusal's wait its Retry-After
// may add (rules reads it to warn where it spreads nothing).
func (f *Refusal) RetryJitter() float64 { return f.Jitter }

// Of returns r's refusal settings, or nil when r sets none (the defaults).
// The caller must not modify them.
func Of(r *rules.Rule) *Refusal {
	st, _ := rules.StageOf[*Refusal](r)
	return st
}

// Jitter returns r's retry_after_jitter as a fraction (0 to 1), 0 when it
// sets none.
func Jitter(r *rules.Rule) float64 {
	if f := Of(r); f != nil {
		return f.Jitter
	}
	return 0
}

// stage returns r's refusal stage, adding one the first time.
func stage(r *rules.Rule) *Refusal {
	if f := Of(r); f != nil {
		return f
	}
	f := &Refusal{}
	r.AddStage(f)
	return f
}

// applies reports whether attr may be set on r, reporting why not: only a
// limit rule refuses with an informative answer, and a sensitive rule's
// refusal is always the bare 429 (docs/policy.md, "Sensitive").
func applies(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) bool {
	switch {
	case r.Sensitive:
		c.Errorf(attr.NameRange, "Invalid "+attr.Name, "rule %q is sensitive: its refusal is always the bare 429, with no Retry-After, status or body of its own; remove %s", r.Name, attr.Name)
		return false
	case r.Action != rules.ActionLimit:
		c.Errorf(attr.NameRange, "Invalid "+attr.Name, "rule %q does not refuse over a limit (action is not \"limit\"); remove %s", r.Name, attr.Name)
		return false
	}
	return true
}

// stringValue returns attr's string value, false when attr may not be set
// on r (applies) or is not a string (example is one that is), each
// reported.
func stringValue(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute, example string) (string, bool) {
	if !applies(c, r, attr) {
		return "", false
	}
	s, diags := hclattr.String(attr, example)
	return s, c.Append(diags)
}

// compileRetryJitter compiles retry_after_jitter = "20%": a percentage from
// 0 to 100, decimals allowed ("12.5%").
func compileRetryJitter(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	s, ok := stringValue(c, r, attr, `"20%"`)
	if !ok {
		return
	}
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(num, 64)
	if !pct || err != nil || !(f >= 0 && f <= 100) {
		c.Errorf(attr.Expr.Range(), "Invalid retry_after_jitter", "retry_after_jitter %q must be a percentage from 0%% to 100%%, such as \"20%%\"", s)
		return
	}
	stage(r).Jitter = f / 100
}

// badStatus are the 4xx and 5xx statuses refusal_status refuses, with why:
// each makes clients do something other than wait.
var badStatus = map[int]string{
	401: "it requires a WWW-Authenticate challenge and makes browsers prompt for credentials (RFC 9110 §15.5.2)",
	407: "it requires a Proxy-Authenticate challenge and makes clients prompt for proxy credentials (RFC 9110 §15.5.8)",
	408: "clients retry it at once on a new connection (RFC 9110 §15.5.9), the opposite of waiting",
	421: "clients retry it at once on another connection (RFC 9110 §15.5.20)",
	426: "it requires an Upgrade header naming a protocol to switch to (RFC 9110 §15.5.22)",
	505: "it tells the client its HTTP version is the problem (RFC 9110 §15.6.6)",
	511: "it means a captive portal: browsers and operating systems show a sign-in page (RFC 6585 §6)",
}

// compileStatus compiles refusal_status: 400 to 599, as NGINX's
// limit_req_status accepts, but for the statuses that make clients do
// something other than wait (badStatus).
func compileStatus(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	if !applies(c, r, attr) {
		return
	}
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_status", "refusal_status must be a number, such as 503")
		return
	}
	n, acc := v.AsBigFloat().Int64()
	if acc != 0 || n < 400 || n > 599 {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_status", "refusal_status %s must be a client or server error status, 400 to 599 (as NGINX's limit_req_status); 429 is the default, 503 says the system rather than the caller is the limit", v.AsBigFloat().Text('g', -1))
		return
	}
	if why, bad := badStatus[int(n)]; bad {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_status", "refusal_status %d would break clients: %s; use 429 or 503", n, why)
		return
	}
	stage(r).Status = int(n)
}

// compileBody compiles refusal_body: at most MaxBody bytes, not empty
// (leave it out for the default body).
func compileBody(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	s, ok := stringValue(c, r, attr, `"Slow down.\n"`)
	if !ok {
		return
	}
	if s == "" || len(s) > MaxBody {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_body", "refusal_body holds %d bytes; it must hold 1 to %d (leave it out for the default problem+json body)", len(s), MaxBody)
		return
	}
	f := stage(r)
	f.Body = []byte(s)
	if f.ContentType == "" {
		f.ContentType = DefaultContentType
	}
}

// compileContentType compiles refusal_content_type: a media type (RFC 9110
// §8.3.1) for refusal_body, which must be set too (finish).
func compileContentType(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	s, ok := stringValue(c, r, attr, `"text/html; charset=utf-8"`)
	if !ok {
		return
	}
	if _, _, err := mime.ParseMediaType(s); err != nil || strings.ContainsAny(s, "\r\n") || !strings.Contains(s, "/") {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_content_type", "refusal_content_type %q is not a media type, such as \"text/html; charset=utf-8\"", s)
		return
	}
	f := stage(r)
	f.ContentType = s
	rng := attr.NameRange
	f.contentTypeRange = &rng
}

// finish checks what the refusal attributes say together, once all of a
// rule's are compiled: a content type needs a body.
func finish(c *rules.Compiler, r *rules.Rule) {
	f := Of(r)
	if f == nil {
		return
	}
	if f.contentTypeRange != nil && f.Body == nil {
		c.Errorf(*f.contentTypeRange, "refusal_content_type without refusal_body", "rule %q sets refusal_content_type but no refusal_body: the default body is always application/problem+json", r.Name)
	}
	f.contentTypeRange = nil
}
