package botscore

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// prefixes parses an embedded list with netip, the oracle the spans are
// checked against.
func prefixes(t *testing.T, lists ...[]byte) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, list := range lists {
		sc := bufio.NewScanner(bytes.NewReader(list))
		for sc.Scan() {
			p, err := netip.ParsePrefix(strings.TrimSpace(sc.Text()))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestCrawlerRanges(t *testing.T) {
	t.Run("counts", func(t *testing.T) {
		// data/SOURCES.md's table.
		r := crawlerRanges()
		if g, b := r[ClaimGooglebot], r[ClaimBingbot]; len(g.v4) != 41 || len(g.v6) != 24 || len(b.v4) != 28 || len(b.v6) != 0 {
			t.Errorf("googlebot %d+%d, bing %d+%d spans; want 41+24 and 28+0", len(g.v4), len(g.v6), len(b.v4), len(b.v6))
		}
		if n := r[ClaimNone]; len(n.v4)+len(n.v6) != 0 {
			t.Errorf("ClaimNone has spans")
		}
	})
	google := prefixes(t, googlebotIPv4, googlebotIPv6)
	bing := prefixes(t, bingIPv4)
	for _, tc := range []struct {
		claim       Claim
		own, others []netip.Prefix
	}{
		{ClaimGooglebot, google, bing},
		{ClaimBingbot, bing, google},
	} {
		// Every prefix's first and last address and their neighbours
		// outside, against the oracle.
		for _, p := range tc.own {
			first, last := p.Masked().Addr(), lastAddr(p)
			for _, a := range []netip.Addr{first, last, first.Prev(), last.Next()} {
				if !a.IsValid() {
					continue
				}
				if got, want := VerifiedCrawler(tc.claim, a), containsAny(tc.own, a); got != want {
					t.Errorf("VerifiedCrawler(%d, %s) = %v, want %v (prefix %s)", tc.claim, a, got, want, p)
				}
			}
			if !VerifiedCrawler(tc.claim, first) || !VerifiedCrawler(tc.claim, last) {
				t.Errorf("%s: its own first or last address is not verified", p)
			}
			if first.Is4() && !VerifiedCrawler(tc.claim, netip.AddrFrom16(first.As16())) {
				t.Errorf("%s: the v4-mapped form of %s is not verified", p, first)
			}
			if VerifiedCrawler(ClaimNone, first) {
				t.Errorf("ClaimNone verified %s", first)
			}
		}
		// Another operator's ranges do not verify this claim.
		for _, p := range tc.others {
			a := p.Masked().Addr()
			if got, want := VerifiedCrawler(tc.claim, a), containsAny(tc.own, a); got != want {
				t.Errorf("VerifiedCrawler(%d, %s) = %v, want %v", tc.claim, a, got, want)
			}
		}
		// Random addresses near the ranges.
		rng := rand.New(rand.NewPCG(1, uint64(tc.claim)))
		for range 2000 {
			p := tc.own[rng.IntN(len(tc.own))]
			b := p.Addr().AsSlice()
			b[len(b)-1] ^= byte(rng.Uint32())
			b[len(b)-2] ^= byte(rng.Uint32())
			b[len(b)/2] ^= byte(rng.Uint32() & 3)
			a, _ := netip.AddrFromSlice(b)
			if got, want := VerifiedCrawler(tc.claim, a), containsAny(tc.own, a); got != want {
				t.Errorf("VerifiedCrawler(%d, %s) = %v, want %v", tc.claim, a, got, want)
			}
		}
	}
	for _, tc := range []struct {
		claim Claim
		addr  netip.Addr
	}{
		{ClaimGooglebot, netip.Addr{}},
		{ClaimGooglebot, netip.MustParseAddr("73.1.2.3")},
		{ClaimGooglebot, netip.MustParseAddr("2001:db8::1")},
		{ClaimBingbot, netip.MustParseAddr("2001:4860:4801:2::1")}, // Googlebot's
		{Claim(200), google[0].Addr()},
	} {
		if VerifiedCrawler(tc.claim, tc.addr) {
			t.Errorf("VerifiedCrawler(%d, %v) = true, want false", tc.claim, tc.addr)
		}
	}
}

func TestParseRangesErrors(t *testing.T) {
	for _, tc := range []struct{ list, want string }{
		{"10.0.0.0/8\nnot-a-prefix\n", "line 2"},
		{"10.0.0.0/8\n10.1.0.0/16\n", "overlapping IPv4"},
		{"2001:db8::/32\n2001:db8:1::/48\n", "overlapping IPv6"},
	} {
		if _, err := parseRanges([]byte(tc.list)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRanges(%q) = %v, want an error with %q", tc.list, err, tc.want)
		}
	}
	r, err := parseRanges([]byte("# comment\n\n10.0.0.0/8 # private\n::/0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for a, want := range map[string]bool{"10.255.255.255": true, "11.0.0.0": false, "::": true, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff": true} {
		if got := r.holds(netip.MustParseAddr(a)); got != want {
			t.Errorf("holds(%s) = %v, want %v", a, got, want)
		}
	}
}

func TestVerifiedCrawlerAllocs(t *testing.T) {
	addrs := []netip.Addr{
		netip.MustParseAddr("66.249.66.1"),
		netip.MustParseAddr("2001:4860:4801:2::1"),
		netip.MustParseAddr("73.1.2.3"),
		netip.MustParseAddr("::ffff:66.249.66.1"),
	}
	VerifiedCrawler(ClaimGooglebot, addrs[0]) // parse the lists
	allocs := testing.AllocsPerRun(100, func() {
		for _, a := range addrs {
			VerifiedCrawler(ClaimGooglebot, a)
			VerifiedCrawler(ClaimBingbot, a)
		}
	})
	if allocs != 0 {
		t.Errorf("VerifiedCrawler: %v allocations, want 0", allocs)
	}
}

func BenchmarkVerifiedCrawler(b *testing.B) {
	a := netip.MustParseAddr("66.249.66.1")
	b.ReportAllocs()
	for b.Loop() {
		VerifiedCrawler(ClaimGooglebot, a)
	}
}
