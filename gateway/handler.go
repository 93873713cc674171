package gateway

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
)

// methodOverrideHeaders are matched as well as the request's own method
// (docs/host-and-path.md §3), so `GET /login` saying POST lands in a POST /login rule.
// They are matched under these names in any case (fasthttp's PeekAll);
// every other spelling an origin reads as one of them ("X_HTTP_Method_Override":
// PHP, Django and Rack read "_" as "-") is removed before forwarding
// (dropHeader; docs/host-and-path.md §3).
var methodOverrideHeaders = [...]string{
	"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override",
}

// reqState is the pooled per-request memory of the handler.
type reqState struct {
	req       rules.Request
	sc        *rules.Scratch
	fields    fields
	canon     []byte
	match     []byte
	method    []byte
	host      []byte // the host rules match (rules.AppendHost's name)
	authority []byte // the Host the origin receives (rules.AppendHost's authority)
	overrides []byte
	uri       []byte
	xff       []byte
	hdr       []byte // rendered header values
	edgeHdrs  []byte // names of client-sent X-Edge-* headers, NUL separated
	peer      netip.Addr
	now       time.Time
	x         ext.Request // the request as the extensions' hooks see it (extensions.go)
	d         rules.Decision
	st        *policyState // the policy decide decided rs under
	explain   bool         // decide peeks only (POST /admin/explain, admin_explain.go)
	// forwarding: decide also renders xff, the X-Forwarded-For forward
	// sends, from its one read of the client's header (the proxy
	// listener; the decide listener and explain forward nothing).
	forwarding bool
}

func newReqState() any {
	return &reqState{
		sc:        rules.NewScratch(16),
		canon:     make([]byte, 0, 256),
		match:     make([]byte, 0, 256),
		host:      make([]byte, 0, 64),
		authority: make([]byte, 0, 64),
		uri:       make([]byte, 0, 512),
		xff:       make([]byte, 0, 128),
		hdr:       make([]byte, 0, 512),
	}
}

// fields implements rules.Fields over the fasthttp request.
type fields struct {
	r       *fasthttp.Request
	cookies []byte // Cookies' buffer, reused across requests
}

func (f *fields) Header(name []byte) []byte { return f.r.Header.PeekBytes(name) }
func (f *fields) Cookie(name []byte) []byte { return f.r.Header.CookieBytes(name) }
func (f *fields) Query(name []byte) []byte  { return f.r.URI().QueryArgs().PeekBytes(name) }
func (f *fields) RawQuery() []byte          { return f.r.URI().QueryString() }
func (f *fields) Body() (contentType, body []byte) {
	return f.r.Header.ContentType(), f.r.Body()
}

// Cookies renders the request's cookies as fasthttp forwards them: once
// it has parsed them (as reading them here makes it), it sends one Cookie
// line of its parsed pairs, "name=value" (or a lone value) joined by "; ".
// RawHeaders returns the request's header lines as received, in their
// order and letter case (the bot score's header-order signal).
func (f *fields) RawHeaders() []byte { return f.r.Header.RawHeaders() }

func (f *fields) Cookies() []byte {
	f.cookies = f.cookies[:0]
	for k, v := range f.r.Header.Cookies() {
		if len(f.cookies) > 0 {
			f.cookies = append(f.cookies, "; "...)
		}
		if len(k) > 0 {
			f.cookies = append(f.cookies, k...)
			f.cookies = append(f.cookies, '=')
		}
		f.cookies = append(f.cookies, v...)
	}
	return f.cookies
}

// peerAddr returns the socket peer, unmapped.
func peerAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	if ta, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	// In-memory listeners (tests) have no TCP address.
	return netip.IPv4Unspecified()
}

// Handler is the public request handler: client, route, decide, then refuse
// or forward (docs/architecture.md, "A request's path").
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	st := s.state.Load()
	rs := s.pool.Get().(*reqState)
	defer s.release(rs)

	rs.forwarding = true
	if !s.decide(ctx, st, rs) {
		s.m.malformed.Inc()
		plain(ctx, fasthttp.StatusBadRequest)
		ctx.SetConnectionClose()
		s.countResponse(ctx, st, rs, false)
		return
	}
	defer s.countResponse(ctx, st, rs, true) // once the answer is final
	d := &rs.d
	if rs.sc.Holds() {
		// In-flight leases and slots (rules/inflight.go) are given back on
		// every path: Settle after the origin's answer, else here (an
		// upstream error, a client gone while held, a panic).
		defer s.releaseInflight(rs)
	}
	s.observe(ctx, st, rs, d)
	s.sampleAllow(ctx, rs, d)
	if s.observeHook != nil {
		s.observeHook(d, rs.sc.Matches)
	}

	if s.refuse(ctx, rs, d) {
		return
	}
	if d.Delay > 0 {
		// A queue = true rule admitted it early: hold it (queue.go).
		switch s.hold(ctx, d.Delay) {
		case holdGone:
			unavailable(ctx)
			ctx.SetConnectionClose()
			return
		case holdFull:
			unavailable(ctx)
			return
		}
	}
	s.forward(ctx, st, rs, d)
}

// refuse answers d's refusal, if it is one, and reports whether it was:
// the one set of refusals both the proxy listener and the decision-only
// listener (decide.go) answer.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, rs *reqState, d *rules.Decision) bool {
	switch d.Verdict {
	case rules.RefuseLimit:
		if d.Sensitive {
			bare429(ctx)
		} else {
			s.informative429(ctx, rs, d)
		}
	case rules.RefuseForbidden:
		problem(ctx, fasthttp.StatusForbidden, "Forbidden", "this request is not allowed")
	case rules.RejectMissing:
		problem(ctx, fasthttp.StatusBadRequest, "Bad Request", "the request lacks an identity this route requires")
	case rules.RejectInvalid:
		problem(ctx, fasthttp.StatusBadRequest, "Bad Request", "the request names an invalid identity (for example a phone number that is not a possible number)")
	case rules.Unavailable:
		unavailable(ctx)
	case rules.Shed:
		s.shed(ctx, rs, d) // shed.go
	default:
		return false
	}
	return true
}

// release drops rs's references into fasthttp's request memory, which
// is not ours past the handler's return, and pools rs.
func (s *Server) release(rs *reqState) {
	rs.fields.r = nil
	rs.req = rules.Request{}
	rs.x.Reset(0)
	rs.forwarding, rs.st = false, nil
	s.pool.Put(rs)
}

// decide is the decision path: client address, canonical and match paths,
// host, and the Engine's one store call, leaving the decision in rs.d. It
// allocates nothing. ok is false, for a 400, for a path that cannot be
// canonicalised or a host that cannot be read one way only (requestHost).
func (s *Server) decide(ctx *fasthttp.RequestCtx, st *policyState, rs *reqState) (ok bool) {
	p := st.policy
	now := ctx.Time()
	if s.clock != nil {
		now = s.clock.Now()
	}
	rs.peer = peerAddr(ctx)
	// PeekAll's result is fasthttp's scratch, overwritten by the next
	// PeekAll: use it at once. The request forward sends carries the
	// X-Forwarded-For of this same read (one scan finds the client and the
	// hops the origin hears).
	var client netip.Addr
	if fwd := ctx.Request.Header.PeekAll(p.ForwardedHeader); rs.forwarding {
		client, rs.xff = p.Client.ClientAndForwardedFor(rs.xff[:0], rs.peer, fwd)
	} else {
		client = p.Client.Client(rs.peer, fwd)
	}

	rs.canon, ok = route.AppendCanonicalPath(rs.canon[:0], ctx.Request.URI().PathOriginal())
	if !ok {
		return false
	}
	rs.match = route.AppendMatchPath(rs.match[:0], rs.canon, p.PathCaseInsensitive)

	rs.method = appendUpper(rs.method[:0], ctx.Method())
	rs.overrides = rs.overrides[:0]
	for _, h := range methodOverrideHeaders {
		for _, v := range ctx.Request.Header.PeekAll(h) {
			rs.overrides = route.AppendMethodTokens(rs.overrides, v)
		}
	}
	if !requestHost(ctx, st, rs) {
		return false
	}

	rs.fields.r = &ctx.Request
	rs.sc.Begin(p)
	rs.now, rs.st = now, st
	rs.req = rules.Request{
		Method:    rs.method,
		Overrides: rs.overrides,
		Host:      rs.host,
		Path:      rs.match,
		Client:    client,
		Fields:    &rs.fields,
	}
	x := &rs.x
	x.Reset(st.hooks.buffers)
	x.Ctx, x.Policy, x.Peer, x.Now = ctx, p, rs.peer, now
	x.Rules, x.Scratch, x.Decision = &rs.req, rs.sc, &rs.d
	for _, h := range st.hooks.deciders {
		h.BeforeDecide(x) // the fingerprint (ja4), the visitor cookie (nat), …
	}
	if rs.explain {
		rs.d = s.engine.Explain(ctx, now, p, &rs.req, rs.sc) // consumes nothing
		return true
	}
	rs.d = s.engine.Check(ctx, now, p, &rs.req, rs.sc)
	return true
}

// observe counts each matching rule's outcome and logs refusals (enforced
// ones at debug, would-be ones at info), behind a level check.
func (s *Server) observe(ctx *fasthttp.RequestCtx, st *policyState, rs *reqState, d *rules.Decision) {
	s.m.verdicts[d.Verdict].Inc()
	if rs.sc.BodyParsed {
		s.m.bodyParses.Inc()
	}
	for i := range rs.sc.Matches {
		if rs.sc.Matches[i].Value > 0 {
			continue // a further value of the rule before it: counted with it
		}
		// A rule whose identity gave several values counts once, by its
		// worst match (rules.Worst).
		m := &rs.sc.Matches[rules.Worst(rs.sc.Matches, i)]
		if c := st.counters[m.Rule.Index][m.Outcome]; c != nil {
			c.Inc()
		}
		if d.Verdict == rules.Shed && m.Outcome == rules.OutcomeDeny {
			continue // the adaptive rule that shed it: shed's own line says so
		}
		// Every refusal and would-be refusal is logged at info, the
		// decision log an incident responder follows (docs/operations.md,
		// "Decision logs"); allows are sampled (sampleAllow). An allow by
		// on_store_error comes in floods while the store is down and is
		// counted in the metrics: debug.
		var level slog.Level
		var msg string
		switch m.Outcome {
		case rules.OutcomeDryRunDeny:
			level, msg = slog.LevelInfo, "would have refused"
		case rules.OutcomeDeny, rules.OutcomeMissing, rules.OutcomeInvalid:
			level, msg = slog.LevelInfo, "refused"
		case rules.OutcomeStoreErrorAllow:
			level, msg = slog.LevelDebug, "store unavailable: allowed"
		case rules.OutcomeStoreErrorDeny:
			level, msg = slog.LevelInfo, "store unavailable: refused"
		default:
			continue
		}
		if m.Outcome == rules.OutcomeDeny {
			s.noteRefusal(rs, m) // the top refused keys (refused.go)
		}
		if !s.log.Enabled(ctx, level) {
			continue
		}
		attrs := []slog.Attr{
			slog.String("rule", m.Rule.Name),
			slog.String("decision", metricOutcome(m.Outcome)),
			slog.String("method", string(ctx.Method())),
			slog.String("path", string(rs.canon)),
			clientAttr(rs), // the client's keyed hash, never its address
		}
		if m.Op >= 0 {
			// The key's keyed hash: never the raw IP or identity.
			k := rs.sc.Ops[m.Op].Key
			attrs = append(attrs, slog.String("key", hex.EncodeToString(k[9:])))
		}
		if d.StoreErr != nil {
			attrs = append(attrs, slog.String("error", d.StoreErr.Error()))
		}
		s.log.LogAttrs(context.Background(), level, msg, attrs...)
	}
}

// forward proxies the request to the origin (docs/host-and-path.md §5) and relays its
// answer, with RateLimit headers on non-sensitive routes.
func (s *Server) forward(ctx *fasthttp.RequestCtx, st *policyState, rs *reqState, d *rules.Decision) {
	p := st.policy
	peer := rs.peer
	req := &ctx.Request

	// The origin receives the canonical path and the query as sent.
	rs.uri = append(rs.uri[:0], rs.canon...)
	if q := req.URI().QueryString(); len(q) > 0 {
		rs.uri = append(rs.uri, '?')
		rs.uri = append(rs.uri, q...)
	}
	trusted := p.Client.Trusted(peer)
	proto := forwardedProto(ctx, req, trusted) // read before sanitizeHeaders drops the client's copy

	// The client's Connection: close is about its connection to the edge,
	// not the pool to the origin.
	clientClose := req.Header.ConnectionClose()
	s.sanitizeHeaders(rs, req, trusted && p.ForwardedHeader == "Forwarded", p.HeaderNames())
	req.Header.ResetConnectionClose()
	// decide rendered rs.xff from the read that found the rules' client.
	req.Header.SetCanonical(hdrXForwardedFor, rs.xff)
	req.Header.SetCanonical(hdrXForwardedProto, proto)
	// The host the rules matched, in the one spelling they matched it
	// (requestHost): never the client's Host beside another target.
	req.Header.SetHostBytes(rs.authority)
	// The origin sees the client's Content-Type or none: fasthttp's client
	// would add application/octet-stream to a body sent without one, and
	// an origin reads such a body differently (docs/host-and-path.md §4).
	req.Header.SetNoDefaultContentType(true)
	req.SetRequestURIBytes(rs.uri)
	// The scheme is the origin's, never the client's: fasthttp's client
	// refuses a request whose scheme is not its own (a client on the TLS
	// listener to an http:// origin, or the reverse).
	if st.upstream.IsTLS {
		req.URI().SetScheme("https")
	} else {
		req.URI().SetScheme("http")
	}
	for _, h := range st.hooks.forwarders {
		// X-Edge-JA4 (ja4), X-Edge-Visitor (nat), X-Edge-Bot-Score
		// (botscore), …: the client's X-Edge-* were stripped above.
		h.OnForward(&rs.x, req)
	}
	defer func() {
		if clientClose {
			ctx.SetConnectionClose()
		}
	}()

	resp := &ctx.Response
	if rs.sc.Holds() {
		// The round trip adaptive limits measure; no clock read for a
		// request that holds nothing in flight.
		rs.sc.Forwarding(s.now())
	}
	sent := time.Now() // edge_upstream_duration_seconds: the real clock, whatever the test's
	err := st.upstream.Do(req, resp)
	took := time.Since(sent)
	if err != nil {
		s.m.upstreamErrors.Inc()
		reason := upstreamFailure(err)
		s.m.observeUpstream(took, false, reason)
		s.upstreamFailed(st.origin, reason, err) // its health and log (upstream_health.go)
		status := fasthttp.StatusBadGateway
		if reason == failTimeout {
			status = fasthttp.StatusGatewayTimeout
			// The origin may still be working on it: its concurrency
			// leases stay until their lease ends (rules/inflight.go).
			rs.sc.TimedOut()
		}
		plain(ctx, status)
		return
	}
	s.m.observeUpstream(took, true, 0)
	s.upstreamAnswered(st.origin, resp.StatusCode())
	s.relay(ctx, st, rs, d, resp)
}

// relay makes the origin's answer the client's: hop-by-hop and settle
// headers gone, Settle's call where a rule or an extension needs it, the
// extensions' additions and the RateLimit headers of an ordinary route.
func (s *Server) relay(ctx *fasthttp.RequestCtx, st *policyState, rs *reqState, d *rules.Decision, resp *fasthttp.Response) {
	stripHopByHopResponse(&resp.Header)
	// A shared cache would serve this client's state to others
	// (docs/headers.md): neither its RateLimit values nor its new visitor
	// cookie go on such an answer. The client stays in its IP's cookieless
	// bucket and is offered a cookie on its next uncacheable answer.
	rs.x.Storable = sharedStorable(&resp.Header)
	settle := d.Settle
	for _, h := range st.hooks.settlers {
		// A cookie from the visitor mint reserve is a take of the reserve
		// in the settle call (nat), …
		settle = h.OnOrigin(&rs.x, resp) || settle
	}
	if settle {
		// reset_on_success, settle_from, in-flight releases, known
		// callers' markers: one more store call, only on routes whose
		// rules need it. The origin's X-Edge-Outcome overrides its status.
		rs.sc.SetResponse(&resp.Header) // settle_from reads the real cost (gateway/cost.go)
		if _, err := s.engine.Settle(ctx, s.now(), rs.sc, resp.StatusCode(), resp.Header.Peek("X-Edge-Outcome")); err != nil {
			s.m.settleErrors.Inc()
		}
		s.countSettleInvalid(rs)
	}
	resp.Header.Del("X-Edge-Outcome")
	stripSettleHeaders(st.policy, &resp.Header)
	for _, h := range st.hooks.responders {
		h.OnResponse(&rs.x, resp) // a new visitor's Set-Cookie (nat), …
	}
	if d.Sensitive {
		stripRateLimitHeaders(rs, &resp.Header)
		return
	}
	if rs.x.Storable {
		return
	}
	s.setRateLimitHeaders(ctx, rs)
}

// clientIPHeaders name the client's address to origins that trust them.
// The edge is the one authority on who the client is (X-Forwarded-For, which
// it rewrites), so client-sent copies never reach the origin, in any
// spelling (dropHeader).
var clientIPHeaders = [...]string{
	"x-forwarded-for", "x-real-ip", "forwarded", "true-client-ip", "x-client-ip",
	"x-cluster-client-ip", "cf-connecting-ip", "fastly-client-ip", "x-original-forwarded-for",
}

// originRouteHeaders are headers from which origins behind a proxy take the
// request's host or path instead of Host and the request-target:
// X-Forwarded-Host (Express with "trust proxy", Django's
// USE_X_FORWARDED_HOST, Werkzeug's ProxyFix, Rails), X-Host,
// X-Forwarded-Server and X-Original-Host (host), X-Original-URL and
// X-Rewrite-URL (IIS URL Rewrite, older Symfony: the path), X-Forwarded-Port
// and X-Forwarded-Prefix (Spring's ForwardedHeaderFilter, ASP.NET Core's
// forwarded headers, Werkzeug's ProxyFix x_port and x_prefix, Rack: the
// port and path prefix of the URLs they build). The edge
// matched Host and the target; a client-sent copy would let the origin
// route elsewhere, so none reaches it (docs/host-and-path.md §1).
var originRouteHeaders = [...]string{
	"x-forwarded-host", "x-host", "x-forwarded-server", "x-original-host", "x-original-url", "x-rewrite-url",
	"x-forwarded-port", "x-forwarded-prefix",
}

// originSchemeHeaders tell origins behind a proxy which scheme the client
// used: X-Forwarded-Proto (Express's req.protocol with "trust proxy",
// Django's SECURE_PROXY_SSL_HEADER, Werkzeug's ProxyFix, Rails),
// X-Forwarded-Scheme and X-Url-Scheme (Rack), X-Forwarded-Ssl and
// Front-End-Https (Rack, IIS), X-Forwarded-Protocol. An origin that took a
// client's copy would treat a plain-HTTP request as one over TLS (secure
// cookies, CSRF origin checks, redirects). The edge is the one authority:
// no client-sent copy reaches the origin, in any spelling (dropHeader), and
// X-Forwarded-Proto says what the edge saw (forwardedProto;
// docs/deploying.md, "TLS on the public listener").
var originSchemeHeaders = [...]string{
	"x-forwarded-proto", "x-forwarded-scheme", "x-url-scheme", "x-forwarded-ssl", "front-end-https", "x-forwarded-protocol",
}

// The names of the headers the edge sets on the forwarded request (and
// Connection, which it reads), in fasthttp's canonical form (what
// SetBytesV and Peek would normalise them to), so that SetCanonical and
// PeekCanonical use them without normalising a constant per request.
var (
	hdrConnection      = []byte("Connection")
	hdrXForwardedFor   = []byte("X-Forwarded-For")
	hdrXForwardedProto = []byte("X-Forwarded-Proto")
)

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

// forwardedProto is the X-Forwarded-Proto the origin receives: "https" when
// the client's connection to the edge is TLS, "http" otherwise; from a
// trusted proxy (which terminated the client's TLS itself), the right-most
// element of the last X-Forwarded-Proto line when that is http or https in
// any case.
// It returns one of two static slices: nothing allocated.
func forwardedProto(ctx *fasthttp.RequestCtx, req *fasthttp.Request, trusted bool) []byte {
	proto := schemeHTTP
	if ctx.IsTLS() {
		proto = schemeHTTPS
	}
	if !trusted {
		return proto
	}
	// The last line's right-most element: a proxy that appends its own
	// line after the client's (HAProxy's add-header) is the one that saw
	// the client, as X-Forwarded-For is read (ipv6.Extractor).
	lines := req.Header.PeekAll("X-Forwarded-Proto")
	if len(lines) == 0 {
		return proto
	}
	v := lines[len(lines)-1]
	if i := bytes.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	switch v = bytes.TrimSpace(v); {
	case bytes.EqualFold(v, schemeHTTPS):
		return schemeHTTPS
	case bytes.EqualFold(v, schemeHTTP):
		return schemeHTTP
	}
	return proto
}

// sanitizeHeaders removes the hop-by-hop headers (stripHopByHop) and, in
// every spelling, the client-sent headers only the edge may speak to the
// origin (dropHeader). keepForwarded keeps a canonical Forwarded header from
// a trusted proxy under forwarded_header = "forwarded". read are the
// headers the policy reads (rules.Policy's HeaderNames): another spelling
// of one is removed too (otherSpelling).
//
// One pass over the header finds both kinds: a request without a
// hop-by-hop header (nearly all of them) pays no lookup per hop-by-hop name.
// One with any, or with a Trailer field, has stripHopByHop's deletions in
// their order and then a second pass, since deleting Trailer moves the
// request's trailer fields into its header, where the pass must see them.
func (s *Server) sanitizeHeaders(rs *reqState, req *fasthttp.Request, keepForwarded bool, read []string) {
	h := &req.Header
	stripConnectionTokens(h)
	if s.dropClientHeaders(rs, h, keepForwarded, read) {
		stripHopByHop(h)
		s.dropClientHeaders(rs, h, keepForwarded, read)
	}
}

// dropClientHeaders deletes the names dropHeader and otherSpelling refuse,
// and reports whether the header holds a hop-by-hop name (isHopByHop),
// which it leaves in place.
func (s *Server) dropClientHeaders(rs *reqState, h *fasthttp.RequestHeader, keepForwarded bool, read []string) (hop bool) {
	rs.edgeHdrs = rs.edgeHdrs[:0]
	for k := range h.All() {
		if !knownShape(k) {
			// Neither hop-by-hop nor dropHeader's (nearly every name):
			// only the policy's own names are left to compare.
			if otherSpelling(k, read) {
				rs.edgeHdrs = append(rs.edgeHdrs, k...)
				rs.edgeHdrs = append(rs.edgeHdrs, 0)
			}
		} else if isHopByHop(k) {
			hop = true
		} else if dropHeader(k, keepForwarded) || otherSpelling(k, read) {
			rs.edgeHdrs = append(rs.edgeHdrs, k...)
			rs.edgeHdrs = append(rs.edgeHdrs, 0)
		}
	}
	names := rs.edgeHdrs
	for len(names) > 0 {
		i := bytes.IndexByte(names, 0)
		h.DelBytes(names[:i])
		names = names[i+1:]
	}
	return hop
}

// dropHeader reports whether a client-sent header name must not reach the
// origin. Names are compared as origins compare them: case-insensitively,
// and with every byte other than a letter or digit read as "-", since CGI
// (RFC 3875 §4.1.18), PHP's $_SERVER, WSGI (Django's request.META) and Rack
// name a header HTTP_ plus its name with "-" as "_" (PHP also turns "." and
// " " into "_"), so "X_Edge_Visitor" and "X.Edge.Visitor" are X-Edge-Visitor
// to them. Dropped, whatever the name's length:
//
//   - the X-Edge-* namespace: only the edge speaks in it to the origin;
//   - clientIPHeaders, but for keepForwarded's own "Forwarded";
//   - originRouteHeaders and originSchemeHeaders;
//   - a method override header (methodOverrideHeaders) in a spelling other
//     than the one the edge matched (letters in any case, "-" between):
//     matched or removed, never forwarded unmatched.
func dropHeader(k []byte, keepForwarded bool) bool {
	if headerNameHasPrefix(k, "x-edge-") {
		return true
	}
	for _, h := range clientIPHeaders {
		if headerNameIs(k, h) {
			return !(keepForwarded && h == "forwarded" && bytes.Equal(k, []byte("Forwarded")))
		}
	}
	for _, h := range originRouteHeaders {
		if headerNameIs(k, h) {
			return true
		}
	}
	for _, h := range originSchemeHeaders {
		if headerNameIs(k, h) {
			return true
		}
	}
	for _, h := range methodOverrideHeaders {
		if headerNameIs(k, h) {
			return !bytes.EqualFold(k, []byte(h))
		}
	}
	return false
}

// otherSpelling reports whether the client-sent name k is another
// spelling of a header the policy reads (read: header:NAME keys and
// identity sources): one an origin reads as that header (headerNameIs:
// "X_Api_Key", "X.Api.Key", "x-api_key" for X-Api-Key) but that is not its
// name in some case, which is all the edge read it under (fasthttp's Peek).
// Such a spelling is removed, so the origin only ever sees the value the
// edge counted (docs/host-and-path.md §3). A policy that reads no header
// pays nothing.
func otherSpelling(k []byte, read []string) bool {
	for _, h := range read {
		if headerNameIs(k, h) {
			return !bytes.EqualFold(k, []byte(h))
		}
	}
	return false
}

// nameShapes[c] has bit n set when a name isHopByHop or dropHeader
// matches can start with the folded byte c (headerNameByte) and be n bytes
// long; bit 63 stands for every length from 63 up. The X-Edge-* prefix sets
// every length from 7 for 'x'. Built once from the lists above.
var nameShapes = func() (t [256]uint64) {
	add := func(name string) { t[headerNameByte(name[0])] |= 1 << min(len(name), 63) }
	for _, l := range [][]string{hopByHop[:], clientIPHeaders[:], originRouteHeaders[:], originSchemeHeaders[:], methodOverrideHeaders[:]} {
		for _, name := range l {
			add(name)
		}
	}
	t['x'] |= ^uint64(1<<len("x-edge-") - 1)
	return t
}()

// knownShape reports whether k could be a name isHopByHop or dropHeader
// matches (nameShapes): when it is false, neither does, and the pass over
// the header skips their comparisons. It never says false for a name they
// match: both fold the first byte as headerNameByte does (isHopByHop's
// EqualFold agrees on letters, and every listed name starts with one) and
// match only names of a listed length, or the X-Edge-* prefix.
func knownShape(k []byte) bool {
	return len(k) > 0 && nameShapes[headerNameByte(k[0])]&(1<<min(len(k), 63)) != 0
}

// headerNameByte folds one byte of a header name as dropHeader compares
// names: ASCII letters to lower case, digits kept, anything else "-".
func headerNameByte(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return c
	}
	return '-'
}

// headerNameIs reports whether the names k and want fold (headerNameByte)
// alike.
func headerNameIs(k []byte, want string) bool {
	return len(k) == len(want) && headerNameHasPrefix(k, want)
}

// headerNameHasPrefix reports whether the name k, folded, starts with want,
// folded.
func headerNameHasPrefix(k []byte, want string) bool {
	if len(k) < len(want) {
		return false
	}
	for i := 0; i < len(want); i++ {
		if headerNameByte(k[i]) != headerNameByte(want[i]) {
			return false
		}
	}
	return true
}

// hopByHop are the RFC 9110 §7.6.1 connection-specific headers a proxy must
// not forward (fasthttp manages Connection itself).
var hopByHop = [...]string{
	"Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Upgrade",
}

// endToEnd are headers a Connection token may not remove: the request's
// framing and routing.
var endToEnd = [...]string{"host", "content-length", "transfer-encoding", "content-type", "close", "keep-alive"}

// isHopByHop reports whether the header name k is one of hopByHop, in any
// case: fasthttp has normalised the names it parsed, and Del matches them
// so.
func isHopByHop(k []byte) bool {
	for _, h := range hopByHop {
		if len(k) == len(h) && bytes.EqualFold(k, []byte(h)) {
			return true
		}
	}
	return false
}

// stripConnectionTokens deletes the headers the request's Connection header
// names: they are hop-by-hop too, except the request's framing and routing
// ("Connection: Host" must not unroute it).
func stripConnectionTokens(h *fasthttp.RequestHeader) {
	c := h.PeekCanonical(hdrConnection) // Peek("Connection"), its name canonical
	if len(c) == 0 {
		return
	}
tokens:
	for tok := range bytes.SplitSeq(c, []byte(",")) {
		tok = bytes.TrimSpace(tok)
		if len(tok) == 0 {
			continue
		}
		for _, e := range endToEnd {
			if bytes.EqualFold(tok, []byte(e)) {
				continue tokens
			}
		}
		h.DelBytes(tok)
	}
}

// stripHopByHop deletes the hopByHop headers, in their order (Trailer
// before Upgrade: deleting Trailer moves trailer fields into the header).
func stripHopByHop(h *fasthttp.RequestHeader) {
	for _, k := range hopByHop {
		h.Del(k)
	}
}

// stripHopByHopResponse deletes the hopByHop headers from the origin's
// answer. One pass finds whether it has any: an answer with none (nearly
// all) pays no lookup per name. An answer with trailer fields has a
// Trailer line in the pass (fasthttp announces them), so it takes the
// deletions too.
func stripHopByHopResponse(h *fasthttp.ResponseHeader) {
	hop := false
	for k := range h.All() {
		if isHopByHop(k) {
			hop = true
			break
		}
	}
	if !hop {
		return
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}

// stripRateLimitHeaders removes, from the origin's answer on a sensitive
// route, every header that could tell capacity: RateLimit*, X-RateLimit-*,
// X-Rate-Limit-*, any other name containing "ratelimit" or "rate-limit",
// and Retry-After. Nothing an attacker can learn from (docs/policy.md, "sensitive").
func stripRateLimitHeaders(rs *reqState, h *fasthttp.ResponseHeader) {
	rs.edgeHdrs = rs.edgeHdrs[:0]
	for k := range h.All() {
		if isRateLimitHeader(k) {
			rs.edgeHdrs = append(rs.edgeHdrs, k...)
			rs.edgeHdrs = append(rs.edgeHdrs, 0)
		}
	}
	for names := rs.edgeHdrs; len(names) > 0; {
		i := bytes.IndexByte(names, 0)
		h.DelBytes(names[:i])
		names = names[i+1:]
	}
}

func isRateLimitHeader(k []byte) bool {
	if bytes.EqualFold(k, []byte("Retry-After")) {
		return true
	}
	// Letters only, lower case: "X-Rate_Limit-Used" → "xratelimitused".
	var buf [64]byte
	n := 0
	for _, c := range k {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'a' <= c && c <= 'z' && n < len(buf) {
			buf[n] = c
			n++
		}
	}
	return bytes.Contains(buf[:n], []byte("ratelimit"))
}

// appendUpper appends b upper-cased (ASCII).
func appendUpper(dst, b []byte) []byte {
	for _, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// requestHost reads the host the request names into rs.host (for the
// rules) and rs.authority (the Host the origin receives): one host for both
// (docs/host-and-path.md §1). It is the absolute-form target's authority if
// the target has one, which replaces Host (RFC 9112 §3.2.2; fasthttp's
// URI().Host() already prefers it and drops userinfo), or else Host;
// rules.AppendHost normalises it. ok is false, for a 400, for an HTTP/1.1
// request without a Host header or with an empty one (RFC 9112 §3.2: a
// server MUST answer 400; two Host headers never get here, fasthttp answers
// them 400) and for a host AppendHost refuses. An HTTP/1.0 request without
// a host is matched and forwarded under the upstream's address, the Host
// the origin receives.
func requestHost(ctx *fasthttp.RequestCtx, st *policyState, rs *reqState) (ok bool) {
	if ctx.Request.Header.IsHTTP11() && len(ctx.Request.Header.Host()) == 0 {
		return false
	}
	h := ctx.Request.URI().Host()
	if len(h) == 0 {
		rs.authority = append(rs.authority[:0], st.upstreamAuthority...)
		rs.host = append(rs.host[:0], st.upstreamHost...)
		return true
	}
	rs.authority, rs.host, ok = route.AppendHost(rs.authority[:0], rs.host[:0], h)
	return ok
}
