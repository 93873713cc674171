package rules

import (
	"mime"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// The refusal attributes of a rule { } block: how an ordinary (not
// sensitive) rule's informative refusal is answered (docs/policy.md,
// "Refusals"; docs/headers.md, "Retry-After jitter"). They are rules' own
// attributes, compiled through the feature mechanism (RuleAttrType) so the
// rule block's schema stays as it is.

// MaxRefusalBody is the most bytes refusal_body may hold: a refusal is
// answered to floods, and its body is copied into every answer.
const MaxRefusalBody = 4096

// Refusal is how a rule's informative refusal is answered. Its zero value
// is the default: 429, the problem+json body, Retry-After the true wait.
type Refusal struct {
	// Jitter is retry_after_jitter as a fraction, 0 (off) to 1 (100%):
	// Retry-After and the rule's RateLimit t are the true wait plus a
	// uniformly random extra of up to Jitter × the wait, in whole seconds,
	// never earlier than the true wait.
	Jitter float64
	// Status is refusal_status, 0 for the default 429.
	Status int
	// Body is refusal_body, nil for the default problem+json body;
	// ContentType its refusal_content_type (default
	// "text/plain; charset=utf-8").
	Body        []byte
	ContentType string

	contentTypeRange *hcl.Range // set when refusal_content_type is written
}

// DefaultRefusalContentType is refusal_body's content type unless
// refusal_content_type says otherwise.
const DefaultRefusalContentType = "text/plain; charset=utf-8"

// refusalAttrs are the refusal attributes (newRegistry registers them with
// the features' attributes).
var refusalAttrs = []RuleAttrType{
	{Name: "retry_after_jitter", Compile: compileRetryJitter},
	{Name: "refusal_status", Compile: compileRefusalStatus},
	{Name: "refusal_body", Compile: compileRefusalBody},
	{Name: "refusal_content_type", Compile: compileRefusalContentType},
}

// refusalApplies reports whether attr may be set on r, reporting why not:
// only a limit rule refuses with an informative answer, and a sensitive
// rule's refusal is always the bare 429 (docs/policy.md, "Sensitive").
func refusalApplies(c *Compiler, r *Rule, attr *hcl.Attribute) bool {
	switch {
	case r.Sensitive:
		c.Errorf(attr.NameRange, "Invalid "+attr.Name, "rule %q is sensitive: its refusal is always the bare 429, with no Retry-After, status or body of its own; remove %s", r.Name, attr.Name)
		return false
	case r.Action != ActionLimit:
		c.Errorf(attr.NameRange, "Invalid "+attr.Name, "rule %q does not refuse over a limit (action is not \"limit\"); remove %s", r.Name, attr.Name)
		return false
	}
	return true
}

// attrString evaluates a string attribute, or reports an error.
func attrString(c *Compiler, attr *hcl.Attribute, example string) (string, bool) {
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		c.Errorf(attr.Expr.Range(), "Invalid "+attr.Name, "%s must be a string, such as %s", attr.Name, example)
		return "", false
	}
	return v.AsString(), true
}

// compileRetryJitter compiles retry_after_jitter = "20%": a percentage from
// 0 to 100, decimals allowed ("12.5%").
func compileRetryJitter(c *Compiler, r *Rule, attr *hcl.Attribute) {
	if !refusalApplies(c, r, attr) {
		return
	}
	s, ok := attrString(c, attr, `"20%"`)
	if !ok {
		return
	}
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(num, 64)
	if !pct || err != nil || !(f >= 0 && f <= 100) {
		c.Errorf(attr.Expr.Range(), "Invalid retry_after_jitter", "retry_after_jitter %q must be a percentage from 0%% to 100%%, such as \"20%%\"", s)
		return
	}
	r.Refusal.Jitter = f / 100
}

// badRefusalStatus are the 4xx and 5xx statuses refusal_status refuses,
// with why: each makes clients do something other than wait.
var badRefusalStatus = map[int]string{
	401: "it requires a WWW-Authenticate challenge and makes browsers prompt for credentials (RFC 9110 §15.5.2)",
	407: "it requires a Proxy-Authenticate challenge and makes clients prompt for proxy credentials (RFC 9110 §15.5.8)",
	408: "clients retry it at once on a new connection (RFC 9110 §15.5.9), the opposite of waiting",
	421: "clients retry it at once on another connection (RFC 9110 §15.5.20)",
	426: "it requires an Upgrade header naming a protocol to switch to (RFC 9110 §15.5.22)",
	505: "it tells the client its HTTP version is the problem (RFC 9110 §15.6.6)",
	511: "it means a captive portal: browsers and operating systems show a sign-in page (RFC 6585 §6)",
}

// compileRefusalStatus compiles refusal_status: 400 to 599, as NGINX's
// limit_req_status accepts, but for the statuses that make clients do
// something other than wait (badRefusalStatus).
func compileRefusalStatus(c *Compiler, r *Rule, attr *hcl.Attribute) {
	if !refusalApplies(c, r, attr) {
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
	if why, bad := badRefusalStatus[int(n)]; bad {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_status", "refusal_status %d would break clients: %s; use 429 or 503", n, why)
		return
	}
	r.Refusal.Status = int(n)
}

// compileRefusalBody compiles refusal_body: at most MaxRefusalBody bytes,
// not empty (leave it out for the default body).
func compileRefusalBody(c *Compiler, r *Rule, attr *hcl.Attribute) {
	if !refusalApplies(c, r, attr) {
		return
	}
	s, ok := attrString(c, attr, `"Slow down.\n"`)
	if !ok {
		return
	}
	if s == "" || len(s) > MaxRefusalBody {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_body", "refusal_body holds %d bytes; it must hold 1 to %d (leave it out for the default problem+json body)", len(s), MaxRefusalBody)
		return
	}
	r.Refusal.Body = []byte(s)
	if r.Refusal.ContentType == "" {
		r.Refusal.ContentType = DefaultRefusalContentType
	}
}

// compileRefusalContentType compiles refusal_content_type: a media type
// (RFC 9110 §8.3.1) for refusal_body, which must be set too
// (finishRefusal).
func compileRefusalContentType(c *Compiler, r *Rule, attr *hcl.Attribute) {
	if !refusalApplies(c, r, attr) {
		return
	}
	s, ok := attrString(c, attr, `"text/html; charset=utf-8"`)
	if !ok {
		return
	}
	if _, _, err := mime.ParseMediaType(s); err != nil || strings.ContainsAny(s, "\r\n") || !strings.Contains(s, "/") {
		c.Errorf(attr.Expr.Range(), "Invalid refusal_content_type", "refusal_content_type %q is not a media type, such as \"text/html; charset=utf-8\"", s)
		return
	}
	r.Refusal.ContentType = s
	rng := attr.NameRange
	r.Refusal.contentTypeRange = &rng
}

// finishRefusal checks what the refusal attributes say together, once all
// of a rule's are compiled: a content type needs a body.
func (c *Compiler) finishRefusal(r *Rule) {
	if r.Refusal.contentTypeRange != nil && r.Refusal.Body == nil {
		c.Errorf(*r.Refusal.contentTypeRange, "refusal_content_type without refusal_body", "rule %q sets refusal_content_type but no refusal_body: the default body is always application/problem+json", r.Name)
	}
	r.Refusal.contentTypeRange = nil
}
