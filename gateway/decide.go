package gateway

import (
	"bytes"
	"context"
	"errors"
	"net"

	"github.com/valyala/fasthttp"
)

// The decision-only listener (issue 14, item 7; docs/deploying.md,
// "Decision-only mode"). Every request on it describes another request,
// one a proxy that stays in front (NGINX's auth_request, Envoy's ext_authz
// HTTP service) is about to forward. The edge decides it with the same
// engine, policy, counters and store as the proxy listener, and reads it
// exactly as the proxy listener reads a request (the same decide()), but
// never proxies it: it answers
//
//   - 200 with no body to let it through, with RateLimit-Policy and
//     RateLimit on an ordinary route (docs/headers.md), X-Edge-Visitor,
//     Set-Cookie for a newly minted visitor and X-Edge-Bot-Score /
//     X-Edge-Bot-Reasons when the policy has those blocks: what the proxy
//     listener would add, for the proxy to copy (auth_request_set,
//     allowed_upstream_headers / allowed_client_headers_on_success);
//   - otherwise exactly the proxy listener's refusal (refuse): a bare 429
//     on a sensitive route, 429 with Retry-After and RateLimit headers on
//     an ordinary one, 400 for a missing or invalid identity or a described
//     request that cannot be read one way only, 403 for deny, 503 when a
//     fail-closed rule's store is down.
//
// The described request is the decide listener's own request, with
//
//   - its method replaced by X-Original-Method and its request-target by
//     X-Original-URI, when present (NGINX sets them: the subrequest's own
//     method and URI are the auth location's); Envoy sends the original
//     method and path as the request's own, and sets neither;
//   - its client, as everywhere, the socket peer or, when the peer (the
//     proxy) is in trusted_proxies, the right-most untrusted hop of the
//     policy's forwarded_header (docs/client-address.md);
//   - its headers, cookies and query what the proxy forwarded; the body
//     whatever came with it (NGINX sends none: rules that read the body are
//     refused at validate under decide_listen, node/decide.go).
//
// Nothing here settles: the origin's answer never comes back, so
// count = "failures", reset_on_success and known_visitors rules leave
// every unit they counted counted.

// Described-request headers (NGINX's auth_request examples' names).
const (
	hdrOriginalMethod = "X-Original-Method"
	hdrOriginalURI    = "X-Original-URI"
)

// maxOriginalMethod caps X-Original-Method, in bytes: no registered method
// is near it. X-Original-URI is capped with the rest of the header, by
// readBufferSize (a larger header answers 431, as on the proxy listener).
const maxOriginalMethod = 32

// ServeDecide runs the decision-only listener on ln until ctx is done: the
// public server's limits and timeouts (NewHTTPServer), plain HTTP (it
// listens for a proxy on loopback or a private network), DecideHandler.
//
// The policy must set decide_listen (wherever ln listens): only then were
// its rules checked for what a described request carries
// (node/decide.go). A policy reloaded without it is not decided
// here: every described request answers 503 until the node restarts.
func (s *Server) ServeDecide(ctx context.Context, ln net.Listener) error {
	if s.Policy().DecideListen == "" {
		ln.Close()
		return errors.New("gateway: the policy sets no decide_listen, so its rules were not checked for the decision-only mode")
	}
	srv := s.NewHTTPServer()
	srv.Handler = s.DecideHandler
	// max_conns, answered as on the public listener; no per-client cap:
	// every connection is the proxy's.
	return serveUntil(ctx, srv, s.limitConns(ln, &s.decideConns, false, true))
}

// DecideHandler decides the request its request describes, never
// proxying it (see above).
func (s *Server) DecideHandler(ctx *fasthttp.RequestCtx) {
	st := s.state.Load()
	rs := s.pool.Get().(*reqState)
	defer s.release(rs)
	// The answer is to the request the proxy sent, framed for its own
	// method (a GET subrequest describing a HEAD still reads a body).
	rs.uri = append(rs.uri[:0], ctx.Method()...)
	defer ctx.Request.Header.SetMethodBytes(rs.uri)
	if st.policy.DecideListen == "" {
		unavailable(ctx) // reloaded without decide_listen (ServeDecide)
		return
	}

	if !describe(&ctx.Request) || !s.decide(ctx, st, rs) {
		s.m.malformed.Inc()
		plain(ctx, fasthttp.StatusBadRequest)
		ctx.SetConnectionClose()
		s.countResponse(ctx, st, rs, false)
		return
	}
	defer s.countResponse(ctx, st, rs, true)
	if rs.sc.Holds() {
		// The origin's answer never comes back here: what the decision
		// took in flight (load shedding's slots) is given back once it is
		// answered (rules/inflight.go; docs/policy.md, "Load shedding").
		defer s.releaseInflight(rs)
	}
	d := &rs.d
	s.observe(ctx, st, rs, d)
	s.sampleAllow(ctx, rs, d)
	if s.observeHook != nil {
		s.observeHook(d, rs.sc.Matches)
	}
	if s.refuse(ctx, rs, d) {
		return
	}
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	resp := &ctx.Response.Header
	for _, h := range st.hooks.answerers {
		// X-Edge-Visitor and a new visitor's Set-Cookie (nat),
		// X-Edge-Bot-Score (botscore), …
		h.OnDecideAllow(&rs.x, resp)
	}
	if !d.Sensitive {
		s.setRateLimitHeaders(ctx, rs)
	}
}

// describe turns the decide listener's request into the request it
// describes: X-Original-Method and X-Original-URI, when present, replace
// its method and request-target. ok is false, for a 400, when either is
// sent twice or is not what a request line could carry: a method that is
// not a token (RFC 9110 §9.1) of at most maxOriginalMethod bytes, a
// target that is not origin-form ("/…") or absolute-form ("http://…",
// "https://…"; its authority then names the host, as on the proxy
// listener, RFC 9112 §3.2.2), or that holds a space or a control byte.
// Bytes over 0x7f pass, as in a request line on the proxy listener. The target's path and host are then read by decide()
// exactly as a request line's are.
func describe(req *fasthttp.Request) (ok bool) {
	h := &req.Header
	if ms := h.PeekAll(hdrOriginalMethod); len(ms) > 1 {
		return false
	} else if len(ms) == 1 {
		m := ms[0]
		if len(m) == 0 || len(m) > maxOriginalMethod || !isToken(string(m)) {
			return false
		}
		h.SetMethodBytes(m)
	}
	us := h.PeekAll(hdrOriginalURI)
	if len(us) > 1 {
		return false
	}
	if len(us) == 1 {
		u := us[0]
		if !validTarget(u) {
			return false
		}
		req.SetRequestURIBytes(u) // copied; the URI is parsed again from it
	}
	return true
}

// validTarget reports whether u is an origin-form or absolute-form
// (http, https) request-target without a space or a control byte.
func validTarget(u []byte) bool {
	if len(u) == 0 {
		return false
	}
	for _, c := range u {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	if u[0] == '/' {
		return true
	}
	for _, scheme := range [...]string{"http://", "https://"} {
		if len(u) > len(scheme) && bytes.EqualFold(u[:len(scheme)], []byte(scheme)) {
			return true
		}
	}
	return false
}
