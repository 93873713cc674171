package gateway

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/gateway/ext"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// POST /admin/explain (docs/operations.md): a described request in, the
// decision the edge would make for it out, consuming nothing. The request
// is built as the public listener would read it off the wire (the same
// fasthttp parser, the policy's max_body_bytes), decided by the same path
// as a real one (Server.decide), with the Engine in its peek-only mode
// (rules.Engine.Explain): no counter, mint budget, ban or known-visitor
// marker changes, no metric counts it, and no log line names it.
//
// "from" is the socket peer of the described request. A client behind a
// trusted proxy is described as the proxy sees it: "from" the proxy's
// address, and the policy's forwarded_header among "headers" as the proxy
// sends it; the edge then picks the client out of it exactly as it does
// for real traffic (docs/client-address.md).

// explainRequest is the body of POST /admin/explain.
type explainRequest struct {
	// Method is the request method; GET when empty.
	Method string `json:"method"`
	// Path is the request target as sent: an origin-form path with an
	// optional query ("/login?next=/"), or an absolute URL.
	Path string `json:"path"`
	// Host is the Host header; the upstream's address when empty, as for
	// an HTTP/1.0 request without one.
	Host string `json:"host"`
	// From is the socket peer's IP address (required).
	From string `json:"from"`
	// Headers are header lines in the order given (the bot score reads the
	// order); a name may repeat.
	Headers pairs `json:"headers"`
	// JSON is a JSON body, sent byte for byte as given, as
	// application/json unless ContentType or a Content-Type header says
	// otherwise.
	JSON json.RawMessage `json:"json"`
	// Form is an application/x-www-form-urlencoded body, fields in order.
	Form pairs `json:"form"`
	// Body is a raw body, sent with ContentType.
	Body *string `json:"body"`
	// ContentType is the body's Content-Type.
	ContentType string `json:"content_type"`
}

// pairs is a JSON object of string values, kept in the order written and
// with repeated names (encoding/json's maps keep neither).
type pairs [][2]string

// UnmarshalJSON reads {"Name": "value", ...} into p, in order.
func (p *pairs) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("want an object of strings")
	}
	*p = (*p)[:0]
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("value of %q: want a string", k)
		}
		*p = append(*p, [2]string{k.(string), v})
	}
	_, err := dec.Token()
	return err
}

// explainMatch is one matching rule in the answer.
type explainMatch struct {
	Rule    string `json:"rule"`
	Outcome string `json:"outcome"`
	// Key is the hex of the rule's 24-byte counter key (8 bytes of the
	// rule's name, a tag byte, 15 of the keyed hash of the values): never
	// the values themselves. Empty when the rule made no store op.
	Key string `json:"key,omitempty"`
	// Remaining is what the counter has left now, before this request (a
	// real request it admits leaves one fewer).
	Remaining *int64 `json:"remaining,omitempty"`
	// RetryAfter is, when the counter refuses, the wait until it admits a
	// request like this one.
	RetryAfter string `json:"retry_after,omitempty"`
	// CeilingKey is a visitor rule's IP-ceiling key, with its remaining.
	CeilingKey       string `json:"ceiling_key,omitempty"`
	CeilingRemaining *int64 `json:"ceiling_remaining,omitempty"`
	// DryRun is true when the rule is in dry-run for this request.
	DryRun bool `json:"dry_run,omitempty"`
	// Known is true when known_visitors recognised the visitor.
	Known bool `json:"known,omitempty"`
	// Value is, for a rule keyed on an identity whose sources gave several
	// values, which of them this line counts (the rule's first line is 0
	// and says nothing): each value is its own key (docs/policy.md,
	// "identity { }").
	Value int `json:"value,omitempty"`
}

// explainAnswer is the answer of POST /admin/explain.
type explainAnswer struct {
	// Verdict: forward, deny (429), forbidden (403), reject (400) or
	// unavailable (503).
	Verdict string `json:"verdict"`
	// Status is the HTTP status the edge would answer with, 0 when it
	// would forward.
	Status int `json:"status,omitempty"`
	// Reason says why a request is rejected before any rule (a path that
	// cannot be canonicalised, a host that cannot be read one way).
	Reason string `json:"reason,omitempty"`
	// Refusing is the first rule that refused.
	Refusing   string         `json:"refusing,omitempty"`
	RetryAfter string         `json:"retry_after,omitempty"`
	Sensitive  bool           `json:"sensitive,omitempty"`
	StoreError string         `json:"store_error,omitempty"`
	Matches    []explainMatch `json:"matches"`
	// Extra are the extensions' fields (ext.Explainer: bot_score and
	// bot_reasons with a botscore block), after the others.
	Extra []ext.Field `json:"-"`
}

// MarshalJSON encodes a's fields, then its Extra ones in order.
func (a explainAnswer) MarshalJSON() ([]byte, error) {
	type plain explainAnswer // without this method
	b, err := json.Marshal(plain(a))
	if err != nil || len(a.Extra) == 0 {
		return b, err
	}
	b = b[:len(b)-1] // "}": the object has verdict, so it is never empty
	for _, f := range a.Extra {
		k, _ := json.Marshal(f.Name) // a string encodes
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("explain field %s: %w", f.Name, err)
		}
		b = append(append(append(append(b, ','), k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// adminExplain answers POST /admin/explain.
func (s *Server) adminExplain(ctx *fasthttp.RequestCtx) {
	var in explainRequest
	if !readAdminJSON(ctx, &in) {
		return
	}
	st := s.state.Load()
	wire, err := in.wire(string(st.upstreamAuthority))
	if err != nil {
		adminError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	from, err := netip.ParseAddr(in.From)
	if err != nil {
		adminError(ctx, fasthttp.StatusBadRequest, `"from": want the client's IP address`)
		return
	}
	var rc fasthttp.RequestCtx
	rc.Init(&fasthttp.Request{}, &net.TCPAddr{IP: from.AsSlice(), Zone: from.Zone(), Port: 1}, nil)
	if err := rc.Request.ReadLimitBody(bufio.NewReader(bytes.NewReader(wire)), nodecfg.Of(st.policy).MaxBodyBytes); err != nil {
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			adminJSON(ctx, fasthttp.StatusOK, explainAnswer{Verdict: "reject", Status: fasthttp.StatusRequestEntityTooLarge,
				Reason: "body over the policy's max_body_bytes", Matches: []explainMatch{}})
			return
		}
		adminError(ctx, fasthttp.StatusBadRequest, "the described request does not parse: "+err.Error())
		return
	}
	adminJSON(ctx, fasthttp.StatusOK, s.explain(&rc, st))
}

// explain decides rc's request in peek-only mode and renders the answer.
func (s *Server) explain(rc *fasthttp.RequestCtx, st *policyState) explainAnswer {
	rs := s.pool.Get().(*reqState)
	rs.explain = true
	defer func() {
		rs.explain = false
		s.release(rs)
	}()
	if !s.decide(rc, st, rs) {
		return explainAnswer{Verdict: "reject", Status: fasthttp.StatusBadRequest,
			Reason:  "the path cannot be canonicalised or the host cannot be read one way only (docs/host-and-path.md)",
			Matches: []explainMatch{}}
	}
	d := &rs.d
	a := explainAnswer{Verdict: verdictName(d.Verdict), Status: verdictStatus(d), Sensitive: d.Sensitive, Matches: []explainMatch{}}
	if d.Refusing != nil {
		a.Refusing = d.Refusing.Name
	}
	if d.RetryAfter > 0 {
		a.RetryAfter = d.RetryAfter.String()
	}
	if d.StoreErr != nil {
		a.StoreError = d.StoreErr.Error()
	}
	sc := rs.sc
	decided := d.StoreErr == nil || errors.Is(d.StoreErr, rules.ErrStoreFallback) // Res holds results
	for i := range sc.Matches {
		m := &sc.Matches[i]
		em := explainMatch{Rule: m.Rule.Name, Outcome: m.Outcome.String(), DryRun: !m.Enforce, Known: m.Known, Value: int(m.Value)}
		if m.Op >= 0 {
			em.Key = hex.EncodeToString(sc.Ops[m.Op].Key[:])
			if decided && m.Op < len(sc.Res) {
				res := sc.Res[m.Op]
				em.Remaining = &res.Remaining
				if !res.Allowed {
					em.RetryAfter = res.RetryAfter.String()
				}
			}
		}
		if m.CeilingOp >= 0 {
			em.CeilingKey = hex.EncodeToString(sc.Ops[m.CeilingOp].Key[:])
			if decided && m.CeilingOp < len(sc.Res) {
				r := sc.Res[m.CeilingOp].Remaining
				em.CeilingRemaining = &r
				if !sc.Res[m.CeilingOp].Allowed && em.RetryAfter == "" {
					em.RetryAfter = sc.Res[m.CeilingOp].RetryAfter.String()
				}
			}
		}
		if m.Op < 0 && m.Outcome == rules.OutcomeDeny && d.Refusing == m.Rule && d.RetryAfter > 0 {
			em.RetryAfter = d.RetryAfter.String() // a ban: no op, the ban's time left
		}
		a.Matches = append(a.Matches, em)
	}
	for _, h := range st.hooks.explainers {
		a.Extra = h.Explain(&rs.x, a.Extra) // bot_score (botscore), …
	}
	return a
}

// verdictName is a verdict as the explain answer names it.
func verdictName(v rules.Verdict) string {
	switch v {
	case rules.Forward:
		return "forward"
	case rules.RefuseLimit:
		return "deny"
	case rules.RefuseForbidden:
		return "forbidden"
	case rules.RejectMissing, rules.RejectInvalid:
		return "reject"
	case rules.Unavailable:
		return "unavailable"
	}
	return "unknown"
}

// verdictStatus is the status the handler answers a verdict with (0: it
// forwards).
func verdictStatus(d *rules.Decision) int {
	switch d.Verdict {
	case rules.RefuseLimit:
		return fasthttp.StatusTooManyRequests
	case rules.RefuseForbidden:
		return fasthttp.StatusForbidden
	case rules.RejectMissing, rules.RejectInvalid:
		return fasthttp.StatusBadRequest
	case rules.Unavailable:
		return fasthttp.StatusServiceUnavailable
	}
	return 0
}

// wire renders the described request as HTTP/1.1 bytes, for the public
// listener's parser. defaultHost is the Host when none is given. Every
// field is checked first: no value can smuggle a line of its own in.
func (in *explainRequest) wire(defaultHost string) ([]byte, error) {
	method := in.Method
	if method == "" {
		method = fasthttp.MethodGet
	}
	if !isToken(method) {
		return nil, errors.New(`"method": want an HTTP method token`)
	}
	target := in.Path
	if target == "" {
		target = "/"
	}
	if !strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://") {
		return nil, errors.New(`"path": want a path starting with "/" or an absolute URL`)
	}
	for i := 0; i < len(target); i++ {
		if target[i] <= ' ' || target[i] == 0x7f {
			return nil, errors.New(`"path": a space or control byte; percent-encode it as a client would`)
		}
	}
	var body []byte
	ctype := ""
	bodies := 0
	if len(in.JSON) > 0 {
		bodies++
		body, ctype = in.JSON, "application/json"
	}
	if in.Form != nil {
		bodies++
		var b strings.Builder
		for i, kv := range in.Form {
			if i > 0 {
				b.WriteByte('&')
			}
			b.WriteString(url.QueryEscape(kv[0]))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(kv[1]))
		}
		body, ctype = []byte(b.String()), "application/x-www-form-urlencoded"
	}
	if in.Body != nil {
		bodies++
		body = []byte(*in.Body)
	}
	if bodies > 1 {
		return nil, errors.New(`give at most one of "json", "form" and "body"`)
	}
	if in.ContentType != "" {
		ctype = in.ContentType
	}
	var hdrs bytes.Buffer
	hostGiven := false
	for _, kv := range in.Headers {
		name, value := kv[0], kv[1]
		if !isToken(name) {
			return nil, fmt.Errorf("header %q: not a header name", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("header %q: a line break or NUL in its value", name)
		}
		switch {
		case strings.EqualFold(name, "Host"):
			if in.Host != "" {
				return nil, errors.New(`a Host header and "host": give one`)
			}
			hostGiven = true // kept in its place: the bot score reads the order
		case strings.EqualFold(name, "Content-Length"), strings.EqualFold(name, "Transfer-Encoding"):
			return nil, fmt.Errorf("header %q: the body's framing is the edge's to write", name)
		case strings.EqualFold(name, "Content-Type"):
			if in.ContentType != "" {
				return nil, errors.New(`a Content-Type header and "content_type": give one`)
			}
			ctype = "" // the header is the request's Content-Type
		}
		hdrs.WriteString(name + ": " + value + "\r\n")
	}
	var b bytes.Buffer
	b.WriteString(method + " " + target + " HTTP/1.1\r\n")
	if !hostGiven {
		host := in.Host
		if host == "" {
			host = defaultHost
		}
		if strings.ContainsAny(host, "\r\n\x00") {
			return nil, errors.New(`"host": a line break or NUL`)
		}
		b.WriteString("Host: " + host + "\r\n") // first, as clients send it
	}
	b.Write(hdrs.Bytes())
	if ctype != "" {
		if strings.ContainsAny(ctype, "\r\n\x00") {
			return nil, errors.New(`"content_type": a line break or NUL`)
		}
		b.WriteString("Content-Type: " + ctype + "\r\n")
	}
	if len(body) > 0 || method == fasthttp.MethodPost || method == fasthttp.MethodPut || method == fasthttp.MethodPatch {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes(), nil
}

// isToken reports whether s is an RFC 9110 §5.6.2 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
