package ja4

import (
	"net"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/internal/httpsyntax"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// JA4 fingerprints through the gateway (docs/deploying.md, "JA4
// fingerprints"): a request's rules.Request.JA4 comes from one of two
// places.
//
//   - The policy's ja4_header, when the socket peer is a trusted proxy
//     (trusted_proxies): a load balancer that terminates TLS computes the
//     client's JA4 and forwards it. It comes first, because behind such a
//     proxy the connection the edge sees is the proxy's, and so would be
//     its fingerprint.
//   - The connection, when the edge terminated TLS itself: the extension
//     wraps each connection of the TLS listener in a Conn, which computed
//     it once from the ClientHello.
//
// Without either, JA4 is nil and the ja4 characteristic is absent: rules
// keyed on it skip. A ja4_header from a peer that is not trusted is
// ignored, and removed before the request reaches the origin, so no client
// can hand the origin a fingerprint either. The origin learns the
// fingerprint the edge used in X-Edge-JA4.

// Extension returns the ja4 feature's HTTP half (package gateway/ext): it
// wraps the TLS listener's connections (a Conn under each), gives each
// request its fingerprint before it is decided and tells the origin the
// one used. It serves every policy: a connection's fingerprint needs no
// block.
func Extension() ext.Extension { return extension{} }

type extension struct{}

func (extension) Name() string { return "ja4" }

// WrapConn records the ClientHello of a connection of the TLS listener.
func (extension) WrapConn(raw net.Conn) net.Conn { return NewConn(raw) }

func (extension) Open(p *rules.Policy, env *ext.Env) (ext.Instance, error) {
	return instance{buf: env.Buffer(), header: node.Of(p).JA4Header}, nil
}

// instance is the extension's part in serving a policy.
type instance struct {
	buf    int    // the request buffer holding a ja4_header value
	header string // the edge block's ja4_header, canonical; "" for none
}

// maxHeader is the longest ja4_header value copied: a JA4 is 36 bytes.
// A longer value, or the header twice (a proxy that appends rather than
// sets it, after a client's own copy), is not a fingerprint the edge can
// trust: it becomes invalid, which the ja4 characteristic takes as
// invalid (its rule's invalid_identity decides).
const maxHeader = 64

// invalid stands for a ja4_header value the edge cannot use. Read only.
var invalid = []byte("invalid")

// BeforeDecide sets the request's JA4 fingerprint (nil without one). A
// header value is copied into the request's buffer (the header block
// changes before the origin call, and the bot score reads the
// fingerprint then). It allocates nothing once the buffer is warm.
func (in instance) BeforeDecide(r *ext.Request) {
	r.Rules.JA4 = in.requestJA4(r)
}

func (in instance) requestJA4(r *ext.Request) []byte {
	if in.header != "" && r.Policy.Client.Trusted(r.Peer) {
		vs := r.Ctx.Request.Header.PeekAll(in.header)
		switch {
		case len(vs) > 1:
			return invalid
		case len(vs) == 1:
			v := httpsyntax.TrimOWS(vs[0])
			if len(v) > maxHeader {
				return invalid
			}
			if len(v) > 0 {
				b := r.Buffer(in.buf)
				*b = append((*b)[:0], v...)
				return *b
			}
		}
	}
	return connJA4(r.Ctx.Conn())
}

// fingerprinted is a connection that knows its client's JA4 (Conn).
type fingerprinted interface{ Fingerprint() []byte }

// netConn is a connection over another: tls.Conn's NetConn, the
// connection under TLS.
type netConn interface{ NetConn() net.Conn }

// connJA4 returns the fingerprint of c, or of the connection it is over
// (the gateway's TLS connection is over a Conn), nil without one.
func connJA4(c net.Conn) []byte {
	for c != nil {
		if f, ok := c.(fingerprinted); ok {
			return f.Fingerprint()
		}
		n, ok := c.(netConn)
		if !ok {
			return nil
		}
		c = n.NetConn()
	}
	return nil
}

// OnForward removes the policy's ja4_header from a request whose peer is
// not a trusted proxy (the edge ignored it, and the origin must not take
// it for the proxy's; its other spellings go with the headers the policy
// reads, as the gateway forwards them), and tells the origin the
// fingerprint the edge used, in X-Edge-JA4 (the client's copies of X-Edge-*
// are stripped), when it is one of JA4's shape.
func (in instance) OnForward(r *ext.Request, req *fasthttp.Request) {
	if in.header != "" && !r.Policy.Client.Trusted(r.Peer) {
		req.Header.Del(in.header)
	}
	if Valid(r.Rules.JA4) {
		req.Header.SetBytesV("X-Edge-JA4", r.Rules.JA4)
	}
}

var (
	_ ext.ConnWrapper = extension{}
	_ ext.Decider     = instance{}
	_ ext.Forwarder   = instance{}
)
