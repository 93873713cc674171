package rules

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The public listener's connection budgets and read deadlines
// (docs/policy.md, "Connections"): the edge block's max_conns,
// max_conns_per_ip, max_conns_per_ipv6_prefix, header_timeout and
// body_timeout. The gateway enforces them (gateway/conns.go).

// Defaults and bounds of the connection attributes.
const (
	// DefaultMaxConns is the node's open connections on the public
	// listener (max_conns).
	DefaultMaxConns = 10000
	// MaxConnsLimit bounds max_conns: each open connection holds a
	// goroutine and its read and write buffers (about 20 KiB), so 100,000
	// is about 2 GiB, and the process needs as many file descriptors.
	MaxConnsLimit = 100000
	// DefaultMaxConnsPerClient is max_conns_per_ip's and
	// max_conns_per_ipv6_prefix's default: a browser opens at most 6
	// HTTP/1.1 connections to a host (the edge has no HTTP/2), so 256 is
	// about 40 browsers loading a page at once behind one address (a CGNAT
	// address, an office), and one peer holds at most 2.6% of the default
	// max_conns (docs/attacks.md, "Connections").
	DefaultMaxConnsPerClient = 256
	// DefaultHeaderTimeout bounds the reading of a request's header
	// (header_timeout): from the connection's opening for its first
	// request, from the request's first byte for the next ones.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout bounds the reading of a request's body, from the
	// end of its header (body_timeout): max_body_bytes' 64 KiB at about 17
	// kbit/s, the slowest mobile link still in use.
	DefaultBodyTimeout = 30 * time.Second
)

// Bounds of header_timeout and body_timeout: under a second refuses real
// clients on slow links (a TLS handshake over a 2G link is several round
// trips of up to a second); past the maximum a peer holds a connection
// that long for every request it never finishes.
const (
	minReadTimeout   = time.Second
	maxHeaderTimeout = 5 * time.Minute
	maxBodyTimeout   = 10 * time.Minute
	// lowConnsPerClient is the per-client cap under which validate warns:
	// one browser opens 6 connections to a host.
	lowConnsPerClient = 8
)

// Conns is the public listener's connection budgets and read deadlines.
type Conns struct {
	// Max is the node's open connections on the public listener
	// (max_conns); one more is answered 503 and closed.
	Max int
	// PerIP is the open connections of one untrusted socket peer
	// (max_conns_per_ip): an IPv4 address, or an IPv6 address (one that
	// embeds an IPv4 address counts as it, ipv6.Extractor.Counted); one
	// more is answered 429 and closed. A peer in trusted_proxies is held
	// to Max alone.
	PerIP int
	// PerIPv6Prefix is the open connections of the untrusted IPv6 peers of
	// one prefix of the policy's ipv6_prefix bits
	// (max_conns_per_ipv6_prefix), /64 by default: a host picks its own
	// interface ID, so a /64 is one client.
	PerIPv6Prefix int
	// HeaderTimeout bounds the reading of a request's header; past it the
	// request is answered 408 and its connection closed.
	HeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body, from the end of
	// its header; past it, 408 and the connection is closed.
	BodyTimeout time.Duration
}

// defaultConns is Conns without an edge block's attributes.
var defaultConns = Conns{
	Max:           DefaultMaxConns,
	PerIP:         DefaultMaxConnsPerClient,
	PerIPv6Prefix: DefaultMaxConnsPerClient,
	HeaderTimeout: DefaultHeaderTimeout,
	BodyTimeout:   DefaultBodyTimeout,
}

// edgeConns compiles the edge block's connection attributes.
func (c *Compiler) edgeConns(e *edgeBlock) {
	cs := &c.p.Conns
	if e.MaxConns != nil {
		if n := *e.MaxConns; n < 1 || n > MaxConnsLimit {
			c.Errorf(e.MaxConnsRange, "Invalid max_conns", "max_conns is the node's open connections on the public listener, from 1 to %d, got %d", MaxConnsLimit, n)
		} else {
			cs.Max = n
		}
	}
	cs.PerIP = c.connsPerClient(e.MaxConnsPerIP, e.MaxConnsPerIPRange, "max_conns_per_ip", cs.Max)
	cs.PerIPv6Prefix = c.connsPerClient(e.MaxConnsPerIPv6Prefix, e.MaxConnsPerIPv6PrefixRange, "max_conns_per_ipv6_prefix", cs.Max)
	cs.HeaderTimeout = c.readTimeout(e.HeaderTimeout, e.HeaderTimeoutRange, "header_timeout", DefaultHeaderTimeout, maxHeaderTimeout)
	cs.BodyTimeout = c.readTimeout(e.BodyTimeout, e.BodyTimeoutRange, "body_timeout", DefaultBodyTimeout, maxBodyTimeout)
}

// connsPerClient compiles a per-client cap: from 1 to max, the node's cap
// (a cap over it could never refuse). Unset, it is the default, or max
// when max is lower.
func (c *Compiler) connsPerClient(v *int, rng hcl.Range, attr string, max int) int {
	if v == nil {
		return min(DefaultMaxConnsPerClient, max)
	}
	n := *v
	switch {
	case n < 1 || n > max:
		c.Errorf(rng, "Invalid "+attr, "%s must be between 1 and max_conns (%d), got %d", attr, max, n)
		return min(DefaultMaxConnsPerClient, max)
	case n < lowConnsPerClient:
		c.Warnf(rng, "Very low "+attr, "%s = %d: one browser opens up to 6 connections to a host, and the users behind one NAT share its address; they are refused past %d connections together", attr, n, n)
	}
	return n
}

// readTimeout compiles header_timeout or body_timeout: a duration from
// minReadTimeout to max.
func (c *Compiler) readTimeout(v *string, rng hcl.Range, attr string, def, max time.Duration) time.Duration {
	if v == nil {
		return def
	}
	d, err := ParseDuration(*v)
	if err != nil || d < minReadTimeout || d > max {
		c.Errorf(rng, "Invalid "+attr, "%s %q must be a duration from %v to %v, such as \"%v\"", attr, *v, minReadTimeout, max, def)
		return def
	}
	return d
}
