package rules

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// nopStore is a store that allows every op and counts its calls (the
// internal tests' and benchmarks' engine).
type nopStore struct{ calls int }

func (s *nopStore) Take(_ context.Context, _ time.Time, ops []Op, res []Result) error {
	s.calls++
	for i := range res {
		res[i] = Result{Allowed: true}
	}
	return nil
}
func (s *nopStore) Close() error { return nil }

// TestClientNetworkIsThePrefixs: two addresses get one network exactly
// when they share the network prefix (ipv6.Prefix's reading of it), at
// every prefix length, for both families.
func TestClientNetworkIsThePrefixs(t *testing.T) {
	e, err := NewEngine(EngineOptions{Store: &nopStore{}, Secret: []byte("test secret")})
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{networkShares: true}
	pairs := [][2]string{
		{"203.0.113.9", "203.0.113.200"}, {"203.0.113.9", "203.0.112.9"}, {"203.0.113.9", "::ffff:203.0.113.9"},
		{"10.0.0.1", "138.0.0.1"}, {"2001:db8:1:2::9", "2001:db8:1:3::9"}, {"2001:db8:1:2::9", "2001:db9:1:2::9"},
		{"2001:db8::1", "2001:db8::2"}, {"2001:db8::1", "a001:db8::1"}, {"::1", "::"},
	}
	pairs = append(pairs, [2]string{"0.0.0.0", "::"}, [2]string{"1.2.3.4", "::102:304"})
	for bits4 := 0; bits4 <= 32; bits4++ {
		bits6 := bits4 * 4
		p.Keys.NetworkIPv4Prefix, p.Keys.NetworkIPv6Prefix = bits4, bits6
		for _, pr := range pairs {
			a, b := netip.MustParseAddr(pr[0]).Unmap(), netip.MustParseAddr(pr[1]).Unmap()
			bits := bits6
			if a.Is4() {
				bits = bits4
			}
			pa, _ := a.Prefix(bits)
			pb, _ := b.Prefix(bits)
			want := a.Is4() == b.Is4() && pa == pb
			if got := e.clientNetwork(p, a) == e.clientNetwork(p, b); got != want {
				t.Errorf("/%d, /%d: %s and %s one network: %v, want %v", bits4, bits6, pr[0], pr[1], got, want)
			}
		}
	}
}

// BenchmarkClientNetwork is the cost network shares add to every request
// (network.go): one IPv4 and one IPv6 client's network, masked and hashed.
func BenchmarkClientNetwork(b *testing.B) {
	e, err := NewEngine(EngineOptions{Store: &nopStore{}, Secret: []byte("bench secret")})
	if err != nil {
		b.Fatal(err)
	}
	p := &Policy{networkShares: true}
	p.Keys.NetworkIPv4Prefix, p.Keys.NetworkIPv6Prefix = DefaultNetworkIPv4Prefix, DefaultNetworkIPv6Prefix
	a4, a6 := netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("2001:db8:1:2::9")
	var sum uint32
	b.ReportAllocs()
	for b.Loop() {
		sum += e.clientNetwork(p, a4) + e.clientNetwork(p, a6)
	}
	if sum == 0 {
		b.Log(sum)
	}
}
