package botscore

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// Verified crawlers (docs/botscore.md): a User-Agent that claims Googlebot
// or Bingbot is believed only when the client is in the ranges that
// crawler's operator publishes (data/SOURCES.md). The lists are embedded,
// parsed once on first use into sorted, non-overlapping address spans, and
// searched by binary search: no allocation per call.

//go:embed data/googlebot-ipv4_merged.txt
var googlebotIPv4 []byte

//go:embed data/googlebot-ipv6_merged.txt
var googlebotIPv6 []byte

//go:embed data/bing-ipv4_merged.txt
var bingIPv4 []byte

// span4 and span6 are inclusive address ranges, first to last address of
// a prefix. An IPv6 address is its 16 bytes as two big-endian halves.
type span4 struct{ lo, hi uint32 }

type u128 struct{ hi, lo uint64 }

func (a u128) cmp(b u128) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

type span6 struct{ lo, hi u128 }

// ranges is one crawler operator's published ranges, sorted by first
// address.
type ranges struct {
	v4 []span4
	v6 []span6
}

// crawlerRanges is every claim's ranges, indexed by Claim (ClaimNone's is
// empty). Parsing happens once, on first use; the embedded lists are
// checked by the tests, so a parse failure is a build defect and panics.
var crawlerRanges = sync.OnceValue(func() *[ClaimBingbot + 1]ranges {
	t := new([ClaimBingbot + 1]ranges)
	t[ClaimGooglebot] = mustParseRanges("googlebot", googlebotIPv4, googlebotIPv6)
	t[ClaimBingbot] = mustParseRanges("bing", bingIPv4)
	return t
})

func mustParseRanges(name string, lists ...[]byte) ranges {
	r, err := parseRanges(lists...)
	if err != nil {
		panic(fmt.Sprintf("botscore: embedded %s ranges: %v", name, err))
	}
	return r
}

// parseRanges reads lists of one CIDR a line (blank lines and # comments
// allowed) into sorted spans. Overlapping prefixes are an error: the
// binary search assumes disjoint spans.
func parseRanges(lists ...[]byte) (ranges, error) {
	var r ranges
	for _, list := range lists {
		sc := bufio.NewScanner(bytes.NewReader(list))
		for line := 1; sc.Scan(); line++ {
			text, _, _ := bytes.Cut(sc.Bytes(), []byte("#"))
			text = bytes.TrimSpace(text)
			if len(text) == 0 {
				continue
			}
			p, err := netip.ParsePrefix(string(text))
			if err != nil {
				return ranges{}, fmt.Errorf("line %d: %w", line, err)
			}
			p = p.Masked()
			if p.Addr().Is4() {
				lo := binary.BigEndian.Uint32(p.Addr().AsSlice())
				hi := lo | uint32(1<<(32-p.Bits())-1)
				r.v4 = append(r.v4, span4{lo, hi})
				continue
			}
			lo := addrU128(p.Addr())
			hi := lo
			if host := 128 - p.Bits(); host >= 64 {
				hi.lo = ^uint64(0)
				hi.hi |= 1<<(host-64) - 1
			} else {
				hi.lo |= 1<<host - 1
			}
			r.v6 = append(r.v6, span6{lo, hi})
		}
	}
	slices.SortFunc(r.v4, func(a, b span4) int { return cmpUint32(a.lo, b.lo) })
	slices.SortFunc(r.v6, func(a, b span6) int { return a.lo.cmp(b.lo) })
	for i := 1; i < len(r.v4); i++ {
		if r.v4[i].lo <= r.v4[i-1].hi {
			return ranges{}, fmt.Errorf("overlapping IPv4 ranges at %s", netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, r.v4[i].lo))))
		}
	}
	for i := 1; i < len(r.v6); i++ {
		if r.v6[i].lo.cmp(r.v6[i-1].hi) <= 0 {
			return ranges{}, fmt.Errorf("overlapping IPv6 ranges (%d)", i)
		}
	}
	return r, nil
}

func cmpUint32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func addrU128(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// holds reports whether addr is in one of the spans. An IPv4-mapped IPv6
// address is looked up as IPv4; the zone is ignored.
func (r *ranges) holds(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.Is4() {
		b := addr.As4()
		ip := binary.BigEndian.Uint32(b[:])
		// The first span whose last address is at or after ip.
		i, _ := slices.BinarySearchFunc(r.v4, ip, func(s span4, ip uint32) int { return cmpUint32(s.hi, ip) })
		return i < len(r.v4) && r.v4[i].lo <= ip
	}
	if !addr.Is6() {
		return false
	}
	ip := addrU128(addr)
	i, _ := slices.BinarySearchFunc(r.v6, ip, func(s span6, ip u128) int { return s.hi.cmp(ip) })
	return i < len(r.v6) && r.v6[i].lo.cmp(ip) <= 0
}

// VerifiedCrawler reports whether addr is in the published ranges of the
// crawler c claims (data/SOURCES.md: Googlebot IPv4 and IPv6, Bingbot
// IPv4). ClaimNone, an unknown claim and the zero Addr give false. An
// IPv4-mapped IPv6 address is looked up as IPv4. It allocates nothing;
// the first call parses the embedded lists.
func VerifiedCrawler(c Claim, addr netip.Addr) bool {
	t := crawlerRanges()
	if int(c) >= len(t) {
		return false
	}
	return t[c].holds(addr)
}
