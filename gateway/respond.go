package gateway

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/rules"
)

// Answers the edge gives itself, DESIGN §6.

// bareBody is the whole body of the bare 429: nothing an attacker can
// learn from (no rule, no capacity, no retry time).
const bareBody = "Too Many Requests\n"

// bare429 answers a refusal on a sensitive route. It is byte-identical
// (but for the Date header) whichever rule refused and however far over
// the limit the caller is.
func bare429(ctx *fasthttp.RequestCtx) {
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(fasthttp.StatusTooManyRequests)
	ctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.Response.SetBodyString(bareBody)
}

// plain answers status with its reason phrase as a text body.
func plain(ctx *fasthttp.RequestCtx, status int) {
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(status)
	ctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.Response.SetBodyString(fasthttp.StatusMessage(status) + "\n")
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
// and a problem body naming the violated policies.
func (s *Server) informative429(ctx *fasthttp.RequestCtx, rs *reqState, d *rules.Decision) {
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(fasthttp.StatusTooManyRequests)
	ctx.Response.Header.SetContentType("application/problem+json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	rs.hdr = strconv.AppendInt(rs.hdr[:0], ceilSeconds(d.RetryAfter), 10)
	ctx.Response.Header.SetBytesV(fasthttp.HeaderRetryAfter, rs.hdr)
	s.setRateLimitHeaders(ctx, rs)

	b := rs.hdr[:0]
	b = append(b, `{"type":"`...)
	b = append(b, quotaExceeded...)
	b = append(b, `","title":"Too Many Requests","status":429,"violated-policies":[`...)
	first := true
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if m.Outcome != rules.OutcomeDeny {
			continue
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
//	RateLimit: "api-per-client";r=7;t=18
//
// q is the rule's limit per w seconds; r the units left; t the seconds
// until the counter is back to full, rounded up.
func (s *Server) setRateLimitHeaders(ctx *fasthttp.RequestCtx, rs *reqState) {
	b := rs.hdr[:0]
	n := 0
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if m.Op < 0 || !m.Enforce || m.Rule.Action != rules.ActionLimit {
			continue
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		b = strconv.AppendQuote(b, m.Rule.Name)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, m.Rule.Limit, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, ceilSeconds(m.Rule.Period), 10)
	}
	if n == 0 {
		return
	}
	ctx.Response.Header.SetCanonical(hdrRateLimitPolicy, b)
	mark := len(b)
	n = 0
	for i := range rs.sc.Matches {
		m := &rs.sc.Matches[i]
		if m.Op < 0 || !m.Enforce || m.Rule.Action != rules.ActionLimit {
			continue
		}
		res := &rs.sc.Res[m.Op]
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		b = strconv.AppendQuote(b, m.Rule.Name)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(res.Remaining, 0), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSecondsOrZero(res.ResetAfter), 10)
	}
	ctx.Response.Header.SetCanonical(hdrRateLimit, b[mark:])
	rs.hdr = b
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
