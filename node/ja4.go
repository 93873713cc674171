package node

import (
	"net/textproto"
	"strings"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// edgeJA4 compiles ja4_header (docs/policy.md, docs/deploying.md "JA4
// fingerprints"): the request header in which a trusted proxy that
// terminates TLS forwards the client's JA4 fingerprint. Its name must be
// an HTTP field name (RFC 9110 §5.1, a token), in canonical form in
// Config.JA4Header; the X-Edge-* namespace, Host, the client-address
// headers and the hop-by-hop headers are refused, since the edge sets,
// strips or reads them as something else. The policy reads the header, so
// another spelling of it never reaches the origin (ReadsHeader).
func (c *compiler) edgeJA4(e *edgeBlock) {
	if e.JA4Header == nil {
		return
	}
	name := *e.JA4Header
	switch {
	case name == "" || len(name) > 128 || !httpsyntax.IsToken(name):
		c.Errorf(e.JA4HeaderRange, "Invalid ja4_header", "%q is not a header name (1 to 128 letters, digits and !#$%%&'*+-.^_`|~), such as \"X-JA4\"", name)
		return
	case reservedJA4Header(name):
		c.Errorf(e.JA4HeaderRange, "Invalid ja4_header", "%q is a header the edge sets, strips or reads as something else; name another, such as \"X-JA4\"", name)
		return
	}
	c.cfg.JA4Header = textproto.CanonicalMIMEHeaderKey(name)
	c.ReadsHeader(c.cfg.JA4Header)
}

// reservedJA4Header reports whether name is one ja4_header cannot be.
func reservedJA4Header(name string) bool {
	n := strings.ToLower(name)
	if strings.HasPrefix(n, "x-edge-") || strings.HasPrefix(n, "proxy-") {
		return true
	}
	switch n {
	case "host", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
		"content-length", "content-type", "cookie", "user-agent",
		"x-forwarded-for", "x-real-ip", "forwarded", "true-client-ip", "x-client-ip",
		"x-cluster-client-ip", "cf-connecting-ip", "fastly-client-ip", "x-original-forwarded-for",
		"x-forwarded-host", "x-forwarded-proto", "x-http-method-override", "x-method-override", "x-http-method":
		return true
	}
	return false
}
