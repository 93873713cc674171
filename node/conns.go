package node

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// The public listener's connection budgets and read deadlines
// (docs/policy.md, "Connections"): the edge block's max_conns,
// max_conns_per_ip, max_conns_per_ipv6_prefix, max_conns_per_network,
// header_timeout and body_timeout. The gateway enforces them
// (gateway/conns.go).

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
	// DefaultMaxConnsPerNetwork is max_conns_per_network's default: the
	// open connections of the untrusted peers of one client network (an
	// IPv4 /24, an IPv6 /48: the store's network prefixes). One IPv6 /48
	// holds 65,536 /64s and one IPv4 /24 256 addresses, each under its own
	// cap, so without it one network could fill max_conns; at 1024, filling
	// the default 10,000 takes ⌈10,000 ÷ 1024⌉ = 10 networks, and a network
	// is still 4 addresses' (or /64s') full caps, about 170 browsers
	// loading a page at once (docs/attacks.md, "Connections").
	DefaultMaxConnsPerNetwork = 1024
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
	// lowConnsPerNetwork is the per-network cap under which validate
	// warns: a network is many clients (an office, a campus, a mobile
	// carrier's block), and 64 is about 10 browsers loading a page.
	lowConnsPerNetwork = 64
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
	// PerNetwork is the open connections of the untrusted peers of one
	// client network (max_conns_per_network): their counted addresses
	// masked to NetworkIPv4Prefix or NetworkIPv6Prefix bits, a /24 or a
	// /48 by default, whichever addresses and /64s in it they use.
	PerNetwork int
	// NetworkIPv4Prefix and NetworkIPv6Prefix are what one network is for
	// PerNetwork: the memory store's network_ipv4_prefix and
	// network_ipv6_prefix, the prefixes its network shares use (a /24 and
	// a /48 by default, and with a Redis store, which has no such
	// attributes).
	NetworkIPv4Prefix, NetworkIPv6Prefix int
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
	PerNetwork:    DefaultMaxConnsPerNetwork,
	// The network prefixes: the default store's, or the store block's
	// (connsNetwork).
	NetworkIPv4Prefix: rules.DefaultNetworkIPv4Prefix,
	NetworkIPv6Prefix: rules.DefaultNetworkIPv6Prefix,
	HeaderTimeout:     DefaultHeaderTimeout,
	BodyTimeout:       DefaultBodyTimeout,
}

// edgeConns compiles the edge block's connection attributes.
func (c *compiler) edgeConns(e *edgeBlock) {
	cs := &c.cfg.Conns
	if e.MaxConns != nil {
		if n := *e.MaxConns; n < 1 || n > MaxConnsLimit {
			c.Errorf(e.MaxConnsRange, "Invalid max_conns", "max_conns is the node's open connections on the public listener, from 1 to %d, got %d", MaxConnsLimit, n)
		} else {
			cs.Max = n
		}
	}
	cs.PerIP = c.connsPerClient(e.MaxConnsPerIP, e.MaxConnsPerIPRange, "max_conns_per_ip", cs.Max)
	cs.PerIPv6Prefix = c.connsPerClient(e.MaxConnsPerIPv6Prefix, e.MaxConnsPerIPv6PrefixRange, "max_conns_per_ipv6_prefix", cs.Max)
	cs.PerNetwork = c.connsPerNetwork(e.MaxConnsPerNetwork, e.MaxConnsPerNetworkRange, cs.Max)
	cs.HeaderTimeout = c.readTimeout(e.HeaderTimeout, e.HeaderTimeoutRange, "header_timeout", DefaultHeaderTimeout, maxHeaderTimeout)
	cs.BodyTimeout = c.readTimeout(e.BodyTimeout, e.BodyTimeoutRange, "body_timeout", DefaultBodyTimeout, maxBodyTimeout)
}

// connsPerClient compiles a per-client cap: from 1 to max, the node's cap
// (a cap over it could never refuse). Unset, it is the default, or max
// when max is lower.
func (c *compiler) connsPerClient(v *int, rng hcl.Range, attr string, max int) int {
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

// connsPerNetwork compiles max_conns_per_network: from 1 to max, the
// node's cap. Unset, it is DefaultMaxConnsPerNetwork, or max when max is
// lower. Under lowConnsPerNetwork it is legal but warned about.
func (c *compiler) connsPerNetwork(v *int, rng hcl.Range, max int) int {
	if v == nil {
		return min(DefaultMaxConnsPerNetwork, max)
	}
	n := *v
	switch {
	case n < 1 || n > max:
		c.Errorf(rng, "Invalid max_conns_per_network", "max_conns_per_network must be between 1 and max_conns (%d), got %d", max, n)
		return min(DefaultMaxConnsPerNetwork, max)
	case n < lowConnsPerNetwork:
		c.Warnf(rng, "Very low max_conns_per_network", "max_conns_per_network = %d: a network (an IPv4 /24, an IPv6 /48) is many clients, an office or a carrier's block, and its browsers open up to 6 connections each; they are refused past %d connections together", n, n)
	}
	return n
}

// connsNetwork sets what one network is for max_conns_per_network: the
// store's network prefixes (network.go), or their defaults with a store
// that has none (Redis).
func connsNetwork(cs *Conns, sc *StoreConfig) {
	cs.NetworkIPv4Prefix, cs.NetworkIPv6Prefix = rules.DefaultNetworkIPv4Prefix, rules.DefaultNetworkIPv6Prefix
	if sc.Kind == "memory" {
		cs.NetworkIPv4Prefix, cs.NetworkIPv6Prefix = sc.NetworkIPv4Prefix, sc.NetworkIPv6Prefix
	}
}

// readTimeout compiles header_timeout or body_timeout: a duration from
// minReadTimeout to max.
func (c *compiler) readTimeout(v *string, rng hcl.Range, attr string, def, max time.Duration) time.Duration {
	if v == nil {
		return def
	}
	d, err := rules.ParseDuration(*v)
	if err != nil || d < minReadTimeout || d > max {
		c.Errorf(rng, "Invalid "+attr, "%s %q must be a duration from %v to %v, such as \"%v\"", attr, *v, minReadTimeout, max, def)
		return def
	}
	return d
}
