package gateway

import (
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/ja4"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// JA4 fingerprints (docs/deploying.md, "JA4 fingerprints"): a request's
// rules.Request.JA4 comes from one of two places.
//
//   - The policy's ja4_header, when the socket peer is a trusted proxy
//     (trusted_proxies): a load balancer that terminates TLS computes the
//     client's JA4 and forwards it. It comes first, because behind such a
//     proxy the connection the edge sees is the proxy's, and so would be
//     its fingerprint.
//   - The connection, when the edge terminated TLS itself (gateway/tls.go):
//     package ja4 computed it once from the ClientHello.
//
// Without either, JA4 is nil and the ja4 characteristic is absent: rules
// keyed on it skip. A ja4_header from a peer that is not trusted is
// ignored, and removed before the request reaches the origin, so no client
// can hand the origin a fingerprint either. The origin learns the
// fingerprint the edge used in X-Edge-JA4.

// maxJA4Header is the longest ja4_header value copied: a JA4 is 36 bytes.
// A longer value, or the header twice (a proxy that appends rather than
// sets it, after a client's own copy), is not a fingerprint the edge can
// trust: it becomes invalidJA4, which the ja4 characteristic takes as
// invalid (its rule's invalid_identity decides).
const maxJA4Header = 64

// invalidJA4 stands for a ja4_header value the edge cannot use. Read only.
var invalidJA4 = []byte("invalid")

// ja4Conn is the method the TLS listener's connections have (tlsConn).
type ja4Conn interface{ JA4() []byte }

// requestJA4 returns the request's JA4 fingerprint, or nil. A header
// value is copied into rs (the header block changes before the origin
// call, and the bot score reads the fingerprint then). It allocates
// nothing once rs is warm.
func requestJA4(ctx *fasthttp.RequestCtx, p *rules.Policy, rs *reqState) []byte {
	if h := nodecfg.Of(p).JA4Header; h != "" && p.Client.Trusted(rs.peer) {
		vs := ctx.Request.Header.PeekAll(h)
		switch {
		case len(vs) > 1:
			return invalidJA4
		case len(vs) == 1:
			v := trimOWS(vs[0])
			if len(v) > maxJA4Header {
				return invalidJA4
			}
			if len(v) > 0 {
				rs.ja4 = append(rs.ja4[:0], v...)
				return rs.ja4
			}
		}
	}
	if c, ok := ctx.Conn().(ja4Conn); ok {
		return c.JA4()
	}
	return nil
}

// stripJA4Header removes the policy's ja4_header from a request whose peer
// is not a trusted proxy: the edge ignored it, and the origin must not
// take it for the proxy's. Its other spellings go with the headers the
// policy reads (sanitizeHeaders, otherSpelling).
func stripJA4Header(req *fasthttp.Request, p *rules.Policy, trusted bool) {
	if h := nodecfg.Of(p).JA4Header; h != "" && !trusted {
		req.Header.Del(h)
	}
}

// setJA4Header tells the origin the fingerprint the edge used, in
// X-Edge-JA4 (the client's copies of X-Edge-* are stripped), when it is one
// of JA4's shape.
func setJA4Header(req *fasthttp.Request, rs *reqState) {
	if ja4.Valid(rs.req.JA4) {
		req.Header.SetBytesV("X-Edge-JA4", rs.req.JA4)
	}
}

// trimOWS trims optional whitespace (RFC 9110 §5.6.3) around v.
func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}
