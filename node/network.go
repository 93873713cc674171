package node

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// The store block's network shares (docs/memory-store.md, "Network
// shares"): what one client network may hold of the memory store's key
// budgets. rules enforces them (rules/network.go); this file compiles the
// store block's part.

// storeNetwork compiles the store block's network_share,
// network_ipv4_prefix and network_ipv6_prefix into sc: the memory store's
// only. A Redis store has no key budgets: they are errors there, and sc
// has no shares.
func (c *compiler) storeNetwork(b *storeBlock, sc *StoreConfig) {
	if b.Kind == "redis" {
		c.refuseAttrs([]storeAttr{
			{b.NetworkShare != nil, "network_share", b.NetworkShareRange},
			{b.NetworkIPv4Prefix != nil, "network_ipv4_prefix", b.NetworkIPv4PrefixRange},
			{b.NetworkIPv6Prefix != nil, "network_ipv6_prefix", b.NetworkIPv6PrefixRange},
		}, "%s bounds what one network holds of the memory store's key budgets; Redis has no key budgets")
		sc.NetworkShare, sc.NetworkIPv4Prefix, sc.NetworkIPv6Prefix = 0, 0, 0
		return
	}
	if b.NetworkShare != nil {
		if ppm, ok := c.NetworkShare(*b.NetworkShare, b.NetworkShareRange); ok {
			sc.NetworkShare = ppm
		}
	}
	if b.NetworkIPv4Prefix != nil {
		sc.NetworkIPv4Prefix = c.networkPrefix(*b.NetworkIPv4Prefix, 32, c.n.IPv4Prefix, rules.DefaultNetworkIPv4Prefix, b.NetworkIPv4PrefixRange, "network_ipv4_prefix", "ipv4_prefix")
	}
	if b.NetworkIPv6Prefix != nil {
		sc.NetworkIPv6Prefix = c.networkPrefix(*b.NetworkIPv6Prefix, 128, c.n.IPv6Prefix, rules.DefaultNetworkIPv6Prefix, b.NetworkIPv6PrefixRange, "network_ipv6_prefix", "ipv6_prefix")
	}
}

// networkPrefix checks a network prefix length n of a family of max bits
// (returning def when it is out of range), warning of one so coarse that
// whole organisations share a share, and of one finer than the client key
// (client bits: the edge block's ipv4_prefix or ipv6_prefix), which makes
// every client a network: a client rotating its addresses, as an IPv6 host
// does inside its /48, then gets a share per address.
func (c *compiler) networkPrefix(n, max, client, def int, rng hcl.Range, attr, clientAttr string) int {
	switch {
	case n < 0 || n > max:
		c.Errorf(rng, "Invalid "+attr, "%s must be between 0 and %d, got %d", attr, max, n)
		return def
	case max == 32 && n < 16 || max == 128 && n < 32:
		c.Warnf(rng, "Very coarse "+attr, "%s = %d makes every 2^%d addresses one network: all their clients together hold one network's share of each key budget", attr, n, max-n)
	case n > client:
		c.Warnf(rng, "Network finer than a client", "%s = %d is finer than the client key (%s = %d): every client is a network of its own, and one that rotates its addresses gets a share for each", attr, n, clientAttr, client)
	}
	return n
}
