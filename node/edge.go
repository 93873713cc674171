package node

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/ipv6"
)

// The edge { } block: the listeners, the client address and the node-wide
// settings; its origin (upstream.go), TLS (tls.go), ja4_header (ja4.go),
// decide_listen (decide.go) and connections (conns.go) have files of
// their own, and behaviour/shed compiles its load_shedding { }.

// edge compiles the edge block into c.cfg and c.n.
func (c *compiler) edge(e *edgeBlock) {
	if e.Listen != nil {
		c.cfg.Listen = c.hostPort(*e.Listen, e.ListenRange, "listen")
	}
	if e.AdminListen != nil {
		c.cfg.AdminListen = c.hostPort(*e.AdminListen, e.AdminListenRange, "admin_listen")
	}
	c.edgeUpstream(e)
	c.edgeTLS(e)
	c.edgeJA4(e)
	c.edgeDecide(e)
	c.cfg.LoadShedding = e.LoadShedding // behaviour/shed compiles it
	c.edgeConns(e)
	c.client(e)
	c.edgeValues(e)
}

// client compiles the client address: trusted_proxies, nat64_prefixes,
// forwarded_header, and the prefixes that group clients.
func (c *compiler) client(e *edgeBlock) {
	trusted := c.prefixes(e.TrustedProxies, "trusted_proxies")
	nat64 := c.nat64Prefixes(e.NAT64Prefixes)
	kind := ipv6.XForwardedFor
	if e.ForwardedHeader != nil {
		k, ok := ipv6.ParseHeaderKind(*e.ForwardedHeader)
		if !ok {
			c.Errorf(e.ForwardedHeaderRange, "Invalid forwarded_header", "%q is not \"x-forwarded-for\" or \"forwarded\"", *e.ForwardedHeader)
		}
		kind = k
		if k == ipv6.Forwarded {
			c.n.ForwardedHeader = "Forwarded"
		}
	}
	if e.IPv4Prefix != nil {
		c.n.IPv4Prefix = c.PrefixLen(*e.IPv4Prefix, 32, e.IPv4PrefixRange, "ipv4_prefix")
	}
	if e.IPv6Prefix != nil {
		c.n.IPv6Prefix = c.PrefixLen(*e.IPv6Prefix, 128, e.IPv6PrefixRange, "ipv6_prefix")
	}
	c.n.Client = ipv6.New(ipv6.Options{Trusted: trusted, Header: kind, NAT64: nat64})
}

// edgeValues compiles max_body_bytes, path_case, dry_run and
// key_secret_env.
func (c *compiler) edgeValues(e *edgeBlock) {
	if e.MaxBodyBytes != nil {
		c.cfg.MaxBodyBytes = *e.MaxBodyBytes
		if n := c.cfg.MaxBodyBytes; n < 1 || n > 64<<20 {
			c.Errorf(e.MaxBodyBytesRange, "Invalid max_body_bytes", "max_body_bytes must be between 1 and %d bytes, got %d", 64<<20, n)
		}
	}
	if e.PathCase != nil {
		switch *e.PathCase {
		case "insensitive":
		case "sensitive":
			c.n.PathCaseInsensitive = false
		default:
			c.Errorf(e.PathCaseRange, "Invalid path_case", "%q is not \"insensitive\" or \"sensitive\"", *e.PathCase)
		}
	}
	if e.DryRun != nil {
		c.n.DryRun = *e.DryRun
	}
	if e.KeySecretEnv != nil {
		c.cfg.KeySecretEnv = *e.KeySecretEnv
		if c.cfg.KeySecretEnv == "" {
			c.Errorf(e.KeySecretEnvRange, "Invalid key_secret_env", "key_secret_env names an environment variable and cannot be empty")
		}
	}
}

// hostPort checks a listener's HOST:PORT, written as attr at rng.
func (c *compiler) hostPort(s string, rng hcl.Range, attr string) string {
	if _, _, err := splitHostPort(s); err != nil {
		c.Errorf(rng, "Invalid "+attr, "%q is not a HOST:PORT address: %v", s, err)
	}
	return s
}

// splitHostPort splits HOST:PORT (a bracketed IPv6 host unbracketed),
// the port a number from 0 to 65535.
func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("missing port")
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port %q", s[i+1:])
	}
	return strings.Trim(s[:i], "[]"), port, nil
}

// prefixes compiles a list of CIDRs (trusted_proxies) written as attr: a
// bare address is its own /32 or /128; host bits are masked, with a
// warning, and a /0 is warned about.
func (c *compiler) prefixes(expr hcl.Expression, attr string) []netip.Prefix {
	vals, rngs := c.StringList(expr, attr)
	var out []netip.Prefix
	for i, s := range vals {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				pfx = netip.PrefixFrom(a, a.BitLen())
			} else {
				c.Errorf(rngs[i], "Invalid CIDR", "%q is not a CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\": %v", s, err)
				continue
			}
		}
		if pfx.Bits() == 0 {
			c.Warnf(rngs[i], "Every address trusted", "%q trusts every peer to name the client: any client can pick its own key with %s", s, attr)
		} else if pfx.Masked() != pfx {
			c.Warnf(rngs[i], "Host bits set", "%q has host bits set; it means %s", s, pfx.Masked())
		}
		out = append(out, pfx.Masked())
	}
	return out
}

// nat64Prefixes compiles nat64_prefixes: IPv6 prefixes, each with one of
// the lengths RFC 6052 §2.2 places an IPv4 address after (/32, /40, /48,
// /56, /64, /96), none overlapping another or a prefix whose embedded IPv4
// the edge already knows (ipv6.CheckNAT64Prefix). Host bits are masked
// with a warning, as in trusted_proxies.
func (c *compiler) nat64Prefixes(expr hcl.Expression) []netip.Prefix {
	vals, rngs := c.StringList(expr, "nat64_prefixes")
	var out []netip.Prefix
	var outRngs []hcl.Range
	for i, s := range vals {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			c.Errorf(rngs[i], "Invalid NAT64 prefix", "%q is not an IPv6 prefix with its length, such as \"2001:db8:64::/96\": the length says where the IPv4 address sits (RFC 6052 §2.2)", s)
			continue
		}
		switch err := ipv6.CheckNAT64Prefix(pfx); {
		case err == nil:
		case errors.Is(err, ipv6.ErrNAT64NotIPv6):
			c.Errorf(rngs[i], "Invalid NAT64 prefix", "%q is %v: a NAT64 prefix looks like \"2001:db8:64::/96\"", s, err)
			continue
		case errors.Is(err, ipv6.ErrNAT64Length):
			c.Errorf(rngs[i], "Invalid NAT64 prefix length", "%q is a /%d, but RFC 6052 §2.2 places the IPv4 address only after a /32, /40, /48, /56, /64 or /96", s, pfx.Bits())
			continue
		default:
			c.Errorf(rngs[i], "Built-in IPv4 embedding", "%q %v: list only local NAT64 prefixes here", s, err)
			continue
		}
		if pfx.Masked() != pfx {
			c.Warnf(rngs[i], "Host bits set", "%q has host bits set; it means %s", s, pfx.Masked())
		}
		pfx = pfx.Masked()
		overlap := false
		for j, q := range out {
			if q.Overlaps(pfx) {
				c.Errorf(rngs[i], "Overlapping NAT64 prefixes", "%q overlaps %s at %s: an address in both would embed two different IPv4 addresses", s, q, outRngs[j])
				overlap = true
				break
			}
		}
		if !overlap {
			out, outRngs = append(out, pfx), append(outRngs, rngs[i])
		}
	}
	return out
}
