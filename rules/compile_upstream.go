package rules

import "net/url"

// upstreamTLSBlock is `edge { upstream_tls { } }`. Owner: the upstream TLS work (issue 14, item 6).
type upstreamTLSBlock struct{}

// UpstreamTLS is the compiled upstream_tls block.
type UpstreamTLS struct{}

// edgeUpstream compiles upstream and upstream_tls.
func (c *Compiler) edgeUpstream(e *edgeBlock) {
	p := c.p
	if e.Upstream != nil {
		p.Upstream = *e.Upstream
		if u, err := url.Parse(p.Upstream); err != nil || u.Scheme != "http" || u.Host == "" {
			c.Errorf(e.UpstreamRange, "Invalid upstream", "%q is not an http://HOST:PORT address", p.Upstream)
		}
	}
}
