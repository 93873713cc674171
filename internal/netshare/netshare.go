// Package netshare is the arithmetic of network shares (docs/memory-store.md,
// "Network shares"; issue 24, §3a): one client network may not fill a
// rule's key budget. An attacker once filled otp-send-per-phone's 50,000
// keys in about 50 s from 2,500 /64s of one IPv6 /48, and every real user
// sending to a new phone got 503 for up to 15 minutes (a sensitive rule
// whose budget is full of live state fails closed). With network_share =
// "5%", each network (an IPv6 /48, an IPv4 /24) may make at most 5% of
// each sensitive rule's budget (and of an ordinary rule's that sets
// network_share itself); a new key from a network at its share is refused
// by that rule, for that network only, as any refusal is: 429 (bare on a
// sensitive route), nothing consumed.
//
// rules' Engine computes a request's network once (a keyed hash of the
// client address masked to the network prefixes, never the address:
// internal/keyhash's Keys.Network) and sets it on every op of the request
// (counter.Op.Network); each op carries its rule's bound, Bound of its key
// budget (counter.Op.NetworkKeys). The memory store enforces it; Redis has
// no key budgets and ignores both. The functions here are pure.
package netshare

import (
	"math"
	"strconv"
	"strings"
)

// Whole is a whole share, 100%, in parts per million: no bound.
const Whole = 1_000_000

// Parse parses a network_share, a percentage above 0% and at most 100%
// ("5%", "0.5%"), into parts per million; false when s is none.
func Parse(s string) (ppm int, ok bool) {
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	r := math.Round(f * Whole / 100)
	if !pct || err != nil || math.IsNaN(f) || r < 1 || f > 100 {
		return 0, false
	}
	return int(r), true
}

// Bound is the most keys of a budget of maxKeys one network may make under
// a share of ppm parts per million: the share of maxKeys, rounded down,
// and never fewer than least (the keys one request makes in the budget, so
// that one new client of a network can always be counted); 0, no bound,
// for no share (0), a whole one, or one that rounds to the whole budget.
func Bound(maxKeys, ppm int, least int64) int {
	if ppm <= 0 || ppm >= Whole {
		return 0
	}
	if n := max(int64(maxKeys)*int64(ppm)/Whole, least); n < int64(maxKeys) {
		return int(n)
	}
	return 0
}
