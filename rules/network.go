package rules

import (
	"encoding/binary"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/dchest/siphash"
	"github.com/hashicorp/hcl/v2"
)

// Network shares (docs/memory-store.md, "Network shares"; issue 24, §3a):
// one client network may not fill a rule's key budget. An attacker once
// filled otp-send-per-phone's 50,000 keys in about 50 s from 2,500 /64s of
// one IPv6 /48, and every real user sending to a new phone got 503 for up
// to 15 minutes (a sensitive rule whose budget is full of live state fails
// closed). With network_share = "5%", each network (an IPv6 /48, an IPv4
// /24) may make at most 5% of each sensitive rule's budget (and of an
// ordinary rule's that sets network_share itself); a new key from a network
// at its share is refused by that rule, for that network only, as any
// refusal is: 429 (bare on a sensitive route), nothing consumed.
//
// The Engine computes the request's network once (a keyed hash of the
// client address masked to the network prefixes, never the address) and
// sets it on every op of the request (Op.Network); each op carries its
// rule's bound (Op.NetworkKeys). The memory store enforces it; Redis has
// no key budgets and ignores both.

const (
	// DefaultNetworkShare is network_share's default, in parts per
	// million: 5%.
	DefaultNetworkShare = 50_000
	// DefaultNetworkIPv4Prefix and DefaultNetworkIPv6Prefix are what one
	// network is by default: an IPv4 /24 (the smallest block routed on
	// the Internet) and an IPv6 /48 (a site's allocation, RFC 6177).
	DefaultNetworkIPv4Prefix = 24
	DefaultNetworkIPv6Prefix = 48

	// sharePPM is a whole share, 100%, in parts per million.
	sharePPM = 1_000_000
)

// NetworkShare parses a network_share (a rule's, or the store block's:
// package node), a percentage above 0% and at most 100% ("5%", "0.5%"),
// into parts per million; false after an error at rng.
func (c *Compiler) NetworkShare(s string, rng hcl.Range) (int, bool) {
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	ppm := math.Round(f * sharePPM / 100)
	if !pct || err != nil || math.IsNaN(f) || ppm < 1 || f > 100 {
		c.Errorf(rng, "Invalid network_share", "network_share %q must be a percentage above 0%% and at most 100%% (no bound), such as \"5%%\"", s)
		return 0, false
	}
	return int(ppm), true
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
// known (keyBudgets): its share of MaxKeys, rounded down, and never fewer
// than the keys one request makes in the budget (a visitor rule's visitor
// and its ip_ceiling), so that one new client of a network can always be
// counted. The share is the rule's own network_share, else, on a
// sensitive rule only, the store's (default or set): an ordinary rule
// fails open, evicting its least recently used key when its budget is
// full, so a network filling it harms no one, while a share would refuse
// the real users of a large NAT whose /24 legitimately fills it (a
// tester's finding F5 on issue 24; docs/policy.md, "network_share"). A
// share of 100%, or one that rounds to the whole budget, is no bound;
// with a Redis store there is none. A rule's own network_share under a
// Redis store is warned about: it bounds nothing there.
func (c *Compiler) networkShares(p *Policy) {
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
		if p.Keys.NetworkShare == 0 || share == 0 || !r.counts() || r.local != nil || share >= sharePPM {
			continue
		}
		perRequest := int64(1)
		if r.IPCeiling > 0 {
			perRequest = 2
		}
		n := max(int64(r.MaxKeys)*int64(share)/sharePPM, perRequest)
		if n < int64(r.MaxKeys) {
			r.NetworkKeys = int(n)
		}
	}
	// A budget under Compiler.PerNetwork is one too: an attacker that
	// logs in from many visitors of one network must not fill a known
	// block's markers, or no other caller could become known
	// (docs/attacks.md, "Known callers").
	for _, b := range p.budgets {
		b.networkKeys = 0
		if share := p.Keys.NetworkShare; b.perNetwork && share > 0 && share < sharePPM {
			if n := max(int64(b.MaxKeys)*int64(share)/sharePPM, 1); n < int64(b.MaxKeys) {
				b.networkKeys = int32(n)
			}
		}
	}
	p.networkShares = false
	for _, r := range p.Rules {
		p.networkShares = p.networkShares || r.NetworkKeys > 0
	}
	for _, b := range p.budgets {
		p.networkShares = p.networkShares || b.networkKeys > 0
	}
}

// clientNetwork is Op.Network for a client at a under p: the keyed hash
// (SipHash-2-4 under the engine's key-format subkey, tagged apart from
// every counter key's) of a masked to p's network prefixes, never 0; 0
// when no rule of p has a network share. It does not allocate.
func (e *Engine) clientNetwork(p *Policy, a netip.Addr) uint32 {
	if !p.networkShares {
		return 0
	}
	// 'n', the family, the prefix length, the masked address (IPv4 in the
	// first 4 of 16 bytes): as ipv6.AppendKey encodes a prefix, without
	// building a netip.Prefix.
	var b [19]byte
	b[0] = 'n'
	a = a.Unmap()
	if a.Is4() {
		bits := p.Keys.NetworkIPv4Prefix
		b[1], b[2] = 4, byte(bits)
		v := a.As4()
		binary.BigEndian.PutUint32(b[3:], binary.BigEndian.Uint32(v[:])&^(math.MaxUint32>>bits))
	} else {
		bits := p.Keys.NetworkIPv6Prefix
		b[1], b[2] = 6, byte(bits)
		v := a.As16()
		hi, lo := binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])
		if bits < 64 {
			hi, lo = hi&^(math.MaxUint64>>bits), 0
		} else {
			lo &^= math.MaxUint64 >> (bits - 64)
		}
		binary.BigEndian.PutUint64(b[3:], hi)
		binary.BigEndian.PutUint64(b[11:], lo)
	}
	h := uint32(siphash.Hash(e.sip0, e.sip1, b[:]))
	if h == 0 {
		h = 1 // 0 is no network
	}
	return h
}
