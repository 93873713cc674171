package gateway

import (
	"bytes"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/behaviour/refusal"
	"github.com/edge-gateway/edge/rules"
)

// Answers the edge gives itself (docs/policy.md, "Answers and headers").

// bareBody is the whole body of the bare 429: nothing an attacker can
// learn from (no rule, no capacity, no retry time).
const bareBody = "Too Many Requests\n"

// bare429 answers a refusal on a sensitive route. It is byte-identical
// (but for the Date header) whichever rule refused and however far over
// the limit the caller is.
func bare429(ctx *fasthttp.RequestCtx) { setBare429(&ctx.Response) }

// setBare429 makes r the bare 429: bare429's answer, which a connection
// over its client's cap gets too (writeRefusal).
func setBare429(r *fasthttp.Response) {
	r.Reset()
	r.SetStatusCode(fasthttp.StatusTooManyRequests)
	r.Header.SetContentType("text/plain; charset=utf-8")
	r.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	r.SetBodyString(bareBody)
}

// plain answers status with its reason phrase as a text body.
func plain(ctx *fasthttp.RequestCtx, status int) { setPlain(&ctx.Response, status) }

// setPlain makes r plain's answer of status.
func setPlain(r *fasthttp.Response, status int) {
	r.Reset()
	r.SetStatusCode(status)
	r.Header.SetContentType("text/plain; charset=utf-8")
	r.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	r.SetBodyString(fasthttp.StatusMessage(status) + "\n")
}

// unavailable answers 503: a fail-closed rule could not reach its store.
// 429 is "you are over your budget"; 503 is "we are in trouble" (RFC 6585,
// RFC 9110 §15.6.4). It says nothing more, on any route.
func unavailable(ctx *fasthttp.RequestCtx) { plain(ctx, fasthttp.StatusServiceUnavailable) }

// problem answers an application/problem+json body (RFC 9457).
func problem(ctx *fasthttp.RequestCtx, status int, title, detail string) {
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(status)
	ctx.Response.Header.SetContentType("application/problem+json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	b := ctx.Response.BodyWriter()
	buf := make([]byte, 0, 160)
	buf = append(buf, `{"type":"about:blank","title":`...)
	buf = strconv.AppendQuote(buf, title)
	buf = append(buf, `,"status":`...)
	buf = strconv.AppendInt(buf, int64(status), 10)
	buf = append(buf, `,"detail":`...)
	buf = strconv.AppendQuote(buf, detail)
	buf = append(buf, "}\n"...)
	_, _ = b.Write(buf)
}

// quotaExceeded is the problem type draft-ietf-httpapi-ratelimit-headers-11
// registers for a refused request.
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// informative429 answers a refusal on an ordinary route: RateLimit and
// RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-11), Retry-After
// in whole seconds rounded up and never 0 (RFC 9110 §10.2.3, the lesson),
// and a problem body naming the violated policies. Retry-After is the
// longest wait of the enforcing limits with nothing left (retryAfter), so a
// client that retries then, and sends nothing meanwhile, is admitted by
// every one of them; each such limit's RateLimit t is its own wait, and
// the longest equals Retry-After (docs/headers.md). A rule's
// retry_after_jitter adds to its wait, in Retry-After and its t alike
// (retry_jitter.go); the refusing rule with the longest wait sets the
// status and body (refusal_status, refusal_body: refusalRule), 429 and the
// problem body by default.
func (s *Server) informative429(ctx *fasthttp.RequestCtx, rs *reqState, d *rules.Decision) {
	u := s.jitterDraw()
	status := fasthttp.StatusTooManyRequests
	var custom *refusal.Refusal
	if r := refusalRule(rs); r != nil {
		if rf := refusal.Of(r); rf != nil {
			if rf.Status != 0 {
				status = rf.Status
			}
			if rf.Body != nil {
				custom = rf
			}
		}
	}
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(status)
	if custom != nil {
		ctx.Response.Header.SetContentType(custom.ContentType)
	} else {
		ctx.Response.Header.SetContentType("application/problem+json")
	}
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	rs.hdr = strconv.AppendInt(rs.hdr[:0], refusalWait(rs, d, u), 10)
	ctx.Response.Header.SetBytesV(fasthttp.HeaderRetryAfter, rs.hdr)
	s.rateLimitHeaders(ctx, rs, true, u)
	if custom != nil {
		ctx.Response.SetBody(custom.Body)
		return
	}

	b := rs.hdr[:0]
	b = append(b, `{"type":"`...)
	b = append(b, quotaExceeded...)
	b = append(b, `","title":`...)
	b = strconv.AppendQuote(b, fasthttp.StatusMessage(status))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"violated-policies":[`...)
	first := true
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if m.Value > 0 || rs.sc.Matches[rules.Worst(rs.sc.Matches, i)].Outcome != rules.OutcomeDeny {
			continue // each refusing rule once, whichever of its values refused
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendQuote(b, m.Rule.Name)
	}
	b = append(b, "]}\n"...)
	ctx.Response.SetBody(b)
	rs.hdr = b
}

// The RateLimit field names as the draft spells them; SetCanonical keeps
// this case, where fasthttp would otherwise write "Ratelimit".
var (
	hdrRateLimit       = []byte("RateLimit")
	hdrRateLimitPolicy = []byte("RateLimit-Policy")
)

// setRateLimitHeaders sets RateLimit-Policy and RateLimit for the enforcing
// limit rules that counted this request, one list member per rule:
//
//	RateLimit-Policy: "api-per-client";q=10;w=60
//	RateLimit: "api-per-client";r=7;t=6
//
// q is the rule's limit per w seconds (the period rounded up); r the units
// left; t the effective window in whole seconds rounded up (draft-11
// §4.1.2, rules.Result.ResetAfter): no schedule of requests gets more than
// r admitted within it, and on a refusal it is the rule's wait. A rule the
// store could not decide (a store-outage answer) has no RateLimit member:
// its counter's state is unknown.
func (s *Server) setRateLimitHeaders(ctx *fasthttp.RequestCtx, rs *reqState) {
	s.rateLimitHeaders(ctx, rs, false, 0)
}

// rateLimitHeaders is setRateLimitHeaders; on a refusal (refused), the t
// of a limit with nothing left is its wait with its rule's jitter for the
// draw u, as Retry-After's (jitteredSeconds), so the longest still equals
// Retry-After.
func (s *Server) rateLimitHeaders(ctx *fasthttp.RequestCtx, rs *reqState, refused bool, u uint64) {
	b := rs.hdr[:0]
	n := 0
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if !shownLimit(m) || m.Value > 0 {
			continue // a rule is one list member, whatever its values
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		name := &rs.st.names[m.Rule.Index]
		if name.item != nil {
			b = append(b, name.item...) // written once per policy
			continue
		}
		b = append(b, name.quoted...)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, m.Rule.Limit, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, ceilSeconds(policyWindow(rs, m)), 10)
	}
	if n == 0 {
		return
	}
	ctx.Response.Header.SetCanonical(hdrRateLimitPolicy, b)
	mark := len(b)
	n = 0
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if !shownLimit(m) || m.Value > 0 {
			continue
		}
		r, t, ok := ruleLimit(rs, i)
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		b = append(b, rs.st.names[m.Rule.Index].quoted...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, r, 10)
		b = append(b, ";t="...)
		if refused && r == 0 && t > 0 {
			b = strconv.AppendInt(b, jitteredSeconds(t, refusal.Jitter(m.Rule), u), 10)
		} else {
			b = strconv.AppendInt(b, ceilSecondsOrZero(t), 10)
		}
	}
	if n > 0 {
		ctx.Response.Header.SetCanonical(hdrRateLimit, b[mark:])
	}
	rs.hdr = b
}

// rateLimitName is a rule as RateLimit and RateLimit-Policy name it,
// written once per policy rather than per answer: quoted its name as a
// structured-field string (RFC 8941 §3.3.3), item its RateLimit-Policy
// item, `"name";q=limit;w=period` in whole seconds rounded up, at least 1
// (draft-ietf-httpapi-ratelimit-headers-11 §3.1, docs/headers.md); no
// item for a rule whose ops' window a rules.WindowShaper sets (a calendar
// period), whose w is the current window's (policyWindow).
type rateLimitName struct{ quoted, item []byte }

// rateLimitNames returns p's rules' names, by Rule.Index.
func rateLimitNames(p *rules.Policy) []rateLimitName {
	out := make([]rateLimitName, len(p.Rules))
	for i, r := range p.Rules {
		n := &out[i]
		n.quoted = strconv.AppendQuote(nil, r.Name)
		if slices.ContainsFunc(r.Stages(), func(st rules.Stage) bool { _, ok := st.(rules.WindowShaper); return ok }) {
			continue
		}
		b := append([]byte(nil), n.quoted...)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, r.Limit, 10)
		b = append(b, ";w="...)
		n.item = strconv.AppendInt(b, ceilSeconds(r.Period), 10)
	}
	return out
}

// shownLimit reports whether m gets RateLimit headers: an enforcing limit
// rule that counted the request. A concurrency rule (Rule.InFlight) does
// not: it is no quota over a window (docs/policy.md, "Concurrency
// limits"); its refusal says Retry-After (behaviour/concurrency's
// RetryAfter) alone.
func shownLimit(m *rules.Match) bool {
	return m.Op >= 0 && m.Enforce && m.Rule.Action == rules.ActionLimit && !m.Rule.InFlight()
}

// serviceLimit returns the units left (r) and the effective window (t) of
// a shown limit rule. A visitor rule with an IP ceiling is two counters,
// both of which must admit: r is the smaller r, and t that counter's t, or
// the longer t when the two r are equal (one more unit needs both). ok is
// false when the store could not decide one of its counters.
func serviceLimit(rs *reqState, m *rules.Match) (r int64, t time.Duration, ok bool) {
	res := &rs.sc.Res[m.Op]
	if res.StoreError {
		return 0, 0, false
	}
	r, t = max(res.Remaining, 0), res.ResetAfter
	if m.CeilingOp >= 0 {
		c := &rs.sc.Res[m.CeilingOp]
		if c.StoreError {
			return 0, 0, false
		}
		cr := max(c.Remaining, 0)
		switch {
		case cr < r:
			r, t = cr, c.ResetAfter
		case cr == r:
			t = max(t, c.ResetAfter)
		}
	}
	return r, t, true
}

// ruleLimit is serviceLimit for the rule of match i (Value 0) over all its
// values (rules.Match.Value): the value with the fewest units left (on a
// tie, the longest t), since one more request needs every value's; ok is
// false when the store could not decide one of them.
func ruleLimit(rs *reqState, i int) (r int64, t time.Duration, ok bool) {
	ms := rs.sc.Matches
	r, t, ok = serviceLimit(rs, &ms[i])
	for j := i + 1; ok && j < len(ms) && ms[j].Value > 0; j++ {
		if !shownLimit(&ms[j]) {
			continue
		}
		rj, tj, okj := serviceLimit(rs, &ms[j])
		switch {
		case !okj:
			ok = false
		case rj < r || rj == r && tj > t:
			r, t = rj, tj
		}
	}
	return r, t, ok
}

// retryAfter returns a refusal's Retry-After before rounding: the longest
// t among the shown limits with nothing left (those refusing, and an
// attempts rule that spent its last unit on this refused request), and at
// least the Engine's RetryAfter (which covers refusals the headers do not
// show, such as a local fallback bucket's).
func retryAfter(rs *reqState, d *rules.Decision) time.Duration {
	wait := d.RetryAfter
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if !shownLimit(m) {
			continue
		}
		if r, t, ok := serviceLimit(rs, m); ok && r == 0 && t > wait {
			wait = t
		}
	}
	return wait
}

// sharedStorable reports whether a shared cache (a CDN, a reverse proxy's
// cache) may store the origin's response, which would then serve one
// client's RateLimit values to others (docs/headers.md). RFC 9111 §3: a
// shared cache stores a response with Cache-Control public, s-maxage or
// max-age, or with Expires, unless Cache-Control says no-store (§5.2.2.5)
// or private (§5.2.2.7). Read conservatively, since a wrong "no" leaks:
//
//   - every Cache-Control field line counts, as one list (RFC 9110 §5.3),
//     directive names in any case (RFC 9111 §5.2), commas inside a quoted
//     argument not splitting it (RFC 9110 §5.6.4);
//   - private only counts unqualified: private="Set-Cookie" lets a shared
//     cache store the rest (§5.2.2.7), and no-store only without an
//     argument, which it takes none of;
//   - any Expires counts, a malformed one too (it means already expired,
//     §5.3: still stored);
//   - no-cache does not prevent storing (§5.2.2.4: reuse after validation),
//     so it changes nothing;
//   - the fields that target one kind of cache and override Cache-Control
//     there: CDN-Cache-Control (RFC 9213) and Surrogate-Control, read as
//     Cache-Control is, and nginx's X-Accel-Expires unless "0".
//
// Vary does not change the answer: the edge's keys (an IP, a /64, a phone)
// are no request header a cache could vary on. Heuristic freshness
// (§4.2.2, a response without any of these) is out of reach: see
// docs/headers.md. It allocates nothing.
func sharedStorable(h *fasthttp.ResponseHeader) bool {
	var cc, targeted cacheDirectives
	for k, v := range h.All() {
		switch len(k) {
		case len(strCacheControl), len(strExpires), len(strCDNCacheControl), len(strXAccelExpires):
			// The lengths of the names below (Surrogate-Control is as long
			// as CDN-Cache-Control): any other name is none of them.
		default:
			continue
		}
		switch {
		case bytes.EqualFold(k, strCacheControl):
			cc.parse(v)
		case bytes.EqualFold(k, strExpires):
			cc.storable = true
		case bytes.EqualFold(k, strCDNCacheControl), bytes.EqualFold(k, strSurrogateControl):
			targeted.parse(v)
		case bytes.EqualFold(k, strXAccelExpires):
			if string(bytes.TrimSpace(v)) != "0" {
				targeted.storable = true
			}
		}
	}
	return cc.shared() || targeted.shared()
}

var (
	strCacheControl     = []byte("Cache-Control")
	strExpires          = []byte("Expires")
	strCDNCacheControl  = []byte("CDN-Cache-Control")
	strSurrogateControl = []byte("Surrogate-Control")
	strXAccelExpires    = []byte("X-Accel-Expires")
)

// cacheDirectives is what sharedStorable reads from Cache-Control lines.
type cacheDirectives struct {
	storable  bool // public, s-maxage, max-age (or Expires)
	forbidden bool // unqualified no-store or private
}

func (c *cacheDirectives) shared() bool { return c.storable && !c.forbidden }

// parse reads one field line's directives: cache-directive = token [ "="
// ( token / quoted-string ) ], comma separated with optional whitespace
// (RFC 9111 §5.2). A member that is not a token is skipped; an unterminated
// quoted string runs to the end of the line.
func (c *cacheDirectives) parse(v []byte) {
	for len(v) > 0 {
		// One member: up to a comma outside a quoted string.
		end, inQuote := len(v), false
	scan:
		for i := 0; i < len(v); i++ {
			switch ch := v[i]; {
			case inQuote && ch == '\\':
				i++ // a quoted-pair
			case ch == '"':
				inQuote = !inQuote
			case !inQuote && ch == ',':
				end = i
				break scan
			}
		}
		member := bytes.TrimSpace(v[:end])
		if end < len(v) {
			v = v[end+1:]
		} else {
			v = nil
		}
		name, hasArg := member, false
		if i := bytes.IndexByte(member, '='); i >= 0 {
			name, hasArg = bytes.TrimSpace(member[:i]), true
		}
		switch {
		case bytes.EqualFold(name, []byte("public")), bytes.EqualFold(name, []byte("s-maxage")), bytes.EqualFold(name, []byte("max-age")):
			c.storable = true
		case !hasArg && (bytes.EqualFold(name, []byte("no-store")) || bytes.EqualFold(name, []byte("private"))):
			c.forbidden = true
		}
	}
}

// ceilSeconds rounds d up to whole seconds, at least 1: a token due in
// 200 ms is Retry-After: 1 (the lesson).
func ceilSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		return 1
	}
	return s
}

// ceilSecondsOrZero rounds d up to whole seconds; 0 stays 0.
func ceilSecondsOrZero(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
