package node

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// The origin: upstream, upstream_timeout and upstream_tls in the edge block
// (docs/policy.md, "edge { }"; docs/deploying.md, "The origin over HTTPS,
// and its health").

// The bounds a policy's upstream_timeout must keep to (docs/policy.md;
// rules.DefaultUpstreamTimeout is its default, in rules.Node).
const (
	minUpstreamTimeout = 10 * time.Millisecond
	maxUpstreamTimeout = 5 * time.Minute
)

// upstreamTLSBlock is `edge { upstream_tls { } }`: how the edge speaks TLS
// to an https:// upstream. Every attribute is optional; paths are relative
// to the policy file's directory.
type upstreamTLSBlock struct {
	// ca_file is a PEM file of the CA certificates the origin's chain must
	// end in, instead of the system's pool.
	CAFile *string `hcl:"ca_file,optional"`
	// cert_file and key_file are the edge's client certificate (PEM; the
	// chain, leaf first) and its private key, for an origin that asks for
	// one (mTLS). Both or neither.
	CertFile *string `hcl:"cert_file,optional"`
	KeyFile  *string `hcl:"key_file,optional"`
	// server_name is sent as SNI and is the name the origin's certificate
	// is verified against (default: the upstream URL's host).
	ServerName *string `hcl:"server_name,optional"`

	DefRange        hcl.Range `hcl:",def_range"`
	CAFileRange     hcl.Range `hcl:"ca_file,attr_value_range"`
	CertFileRange   hcl.Range `hcl:"cert_file,attr_value_range"`
	KeyFileRange    hcl.Range `hcl:"key_file,attr_value_range"`
	ServerNameRange hcl.Range `hcl:"server_name,attr_value_range"`
}

// UpstreamTLS is the compiled upstream_tls block: the files' contents,
// read and checked when the policy compiled. A reload reads them again.
type UpstreamTLS struct {
	// CAFile, CertFile and KeyFile are the paths the files were read from,
	// resolved against the policy file's directory; empty when not set.
	CAFile, CertFile, KeyFile string
	// ServerName is server_name, lowercased; empty: the upstream's host.
	ServerName string
	// RootCAs holds ca_file's certificates; nil: the system's pool.
	RootCAs *x509.CertPool
	// Certificate is the client certificate of cert_file and key_file;
	// nil: the edge presents none.
	Certificate *tls.Certificate
	// Digest is a SHA-256 over the files' contents and ServerName: two
	// blocks with one digest configure TLS alike (the gateway keeps its
	// connections to the origin across a reload that changes nothing).
	Digest [sha256.Size]byte
}

// ParseUpstream checks an upstream address and returns its scheme ("http"
// or "https") and its authority as written ("host", "host:port",
// "[v6]:port"). It takes http://HOST[:PORT] and https://HOST[:PORT], with
// at most a "/" after the authority: no path, query, fragment or userinfo
// (the edge forwards each request's own path). The compiler and the
// gateway's -upstream flag check alike.
func ParseUpstream(s string) (scheme, authority string, err error) {
	u, perr := url.Parse(s)
	switch {
	case perr != nil:
		return "", "", fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", fmt.Errorf("%q is not an http:// or https:// address", s)
	case u.Opaque != "" || u.Host == "":
		return "", "", fmt.Errorf("%q has no host: want http://HOST:PORT or https://HOST:PORT", s)
	case u.User != nil:
		return "", "", fmt.Errorf("%q carries userinfo; an origin's credentials do not go in its address", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", "", fmt.Errorf("%q has a path or query; the edge forwards each request's own path, so the upstream is HOST:PORT only", s)
	case u.Hostname() == "":
		return "", "", fmt.Errorf("%q has no host: want http://HOST:PORT or https://HOST:PORT", s)
	}
	return u.Scheme, u.Host, nil
}

// edgeUpstream compiles upstream, upstream_timeout and upstream_tls.
func (c *compiler) edgeUpstream(e *edgeBlock) {
	p := c.cfg
	scheme := "http"
	if e.Upstream != nil {
		p.Upstream = *e.Upstream
		s, _, err := ParseUpstream(p.Upstream)
		if err != nil {
			c.Errorf(e.UpstreamRange, "Invalid upstream", "%v", err)
		}
		scheme = s
	}
	if e.UpstreamTimeout != nil {
		d, err := rules.ParseDuration(*e.UpstreamTimeout)
		switch {
		case err != nil || d <= 0:
			c.Errorf(e.UpstreamTimeoutRange, "Invalid upstream_timeout", "%q is not a positive duration such as \"10s\"", *e.UpstreamTimeout)
		case d < minUpstreamTimeout || d > maxUpstreamTimeout:
			c.Errorf(e.UpstreamTimeoutRange, "Invalid upstream_timeout", "%q: the origin's budget is between %v and %v", *e.UpstreamTimeout, minUpstreamTimeout, maxUpstreamTimeout)
		default:
			c.n.UpstreamTimeout = d // rules checks leases against it
		}
	}
	b := e.UpstreamTLS
	if b == nil {
		return
	}
	if scheme == "http" {
		c.Errorf(b.DefRange, "Unexpected upstream_tls", "upstream_tls configures TLS to an https:// upstream; the upstream is %q", p.Upstream)
	}
	t := &UpstreamTLS{}
	h := sha256.New()
	field := func(name string, b []byte) {
		// Length-prefixed, so that no two settings hash alike.
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	if b.ServerName != nil {
		t.ServerName = c.serverName(*b.ServerName, b.ServerNameRange)
		field("server_name", []byte(t.ServerName))
	}
	if b.CAFile != nil {
		var pemBytes []byte
		if t.CAFile, pemBytes, t.RootCAs = c.caFile(*b.CAFile, b.CAFileRange, ""); t.RootCAs != nil {
			field("ca_file", pemBytes)
		}
	}
	cc := c.clientCert(clientCertAttrs{cert: b.CertFile, key: b.KeyFile, certRange: b.CertFileRange, keyRange: b.KeyFileRange,
		refuser: "an origin that verifies it"})
	t.CertFile, t.KeyFile = cc.certFile, cc.keyFile
	if cc.pair != nil {
		t.Certificate = cc.pair
		field("cert_file", cc.certPEM)
		field("key_file", cc.keyPEM)
	}
	copy(t.Digest[:], h.Sum(nil))
	p.UpstreamTLS = t
}
