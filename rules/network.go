package rules

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/internal/keybudget"
	"github.com/edge-gateway/edge/internal/netshare"
)

// Network shares (docs/memory-store.md, "Network shares"; package
// internal/netshare): one client network may not fill a rule's key budget.
const (
	// DefaultNetworkShare is network_share's default, in parts per
	// million: 5%.
	DefaultNetworkShare = 50_000
	// DefaultNetworkIPv4Prefix and DefaultNetworkIPv6Prefix are what one
	// network is by default: an IPv4 /24 (the smallest block routed on
	// the Internet) and an IPv6 /48 (a site's allocation, RFC 6177).
	DefaultNetworkIPv4Prefix = 24
	DefaultNetworkIPv6Prefix = 48
)

// NetworkShare parses a network_share (a rule's, or the store block's:
// package node), a percentage above 0% and at most 100% ("5%", "0.5%"),
// into parts per million; false after an error at rng.
func (c *Compiler) NetworkShare(s string, rng hcl.Range) (int, bool) {
	ppm, ok := netshare.Parse(s)
	if !ok {
		c.Errorf(rng, "Invalid network_share", "network_share %q must be a percentage above 0%% and at most 100%% (no bound), such as \"5%%\"", s)
	}
	return ppm, ok
}

// ruleNetwork compiles a rule's network_share: a rule that counts
// nothing has no budget to share.
func (c *Compiler) ruleNetwork(rb *ruleBlock, r *Rule) bool {
	if rb.NetworkShare == nil {
		return true
	}
	if !r.counts() {
		c.Errorf(rb.NetworkShareRange, "Unused network_share", "action = %q counts nothing, so it holds no keys; remove network_share", *rb.Action)
		return false
	}
	ppm, ok := c.NetworkShare(*rb.NetworkShare, rb.NetworkShareRange)
	r.networkShare, r.networkShareRange = ppm, rb.NetworkShareRange.Ptr()
	return ok
}

// networkShares sets each counting rule's NetworkKeys once its budget is
// known (keyBudgets): netshare.Bound of its MaxKeys. The share is the rule's own network_share, else, on a
// sensitive rule only, the store's (default or set): an ordinary rule
// fails open, evicting its least recently used key when its budget is
// full, so a network filling it harms no one, while a share would refuse
// the real users of a large NAT whose /24 legitimately fills it (a
// tester's finding F5 on issue 24; docs/policy.md, "network_share"). With
// a Redis store there is no bound. A rule's own network_share under a
// Redis store is warned about: it bounds nothing there.
func (c *Compiler) networkShares(p *Policy) {
	p.networkShares = false
	for _, r := range p.Rules {
		share := 0
		if r.Sensitive {
			share = p.Keys.NetworkShare
		}
		if r.networkShare > 0 {
			share = r.networkShare
			if p.Keys.NetworkShare == 0 {
				c.Warnf(*r.networkShareRange, "Unused network_share", "rule %q: network_share bounds what one network holds of the memory store's key budgets; the Redis store has none", r.Name)
			}
		}
		if p.Keys.NetworkShare > 0 && r.counts() && r.local == nil {
			least := int64(1) // the keys one request makes: a visitor and its IP's ceiling
			if r.IPCeiling > 0 {
				least = 2
			}
			r.NetworkKeys = netshare.Bound(r.MaxKeys, share, least)
		}
		p.networkShares = p.networkShares || r.NetworkKeys > 0
	}
	// A budget under PerNetwork is one too: an attacker that logs in from
	// many visitors of one network must not fill a known block's markers,
	// or no other caller could become known (docs/attacks.md, "Known
	// callers").
	p.networkShares = keybudget.Bound(p.budgets, p.Keys.NetworkShare) || p.networkShares
}
