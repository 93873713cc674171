package keyhash

import (
	"net/netip"
	"testing"
)

// TestClientNetworkIsThePrefixs: two addresses get one network exactly
// when they share the network prefix (ipv6.Prefix's reading of it), at
// every prefix length, for both families.
func TestClientNetworkIsThePrefixs(t *testing.T) {
	k, err := New([]byte("test secret"), nil, Formats{})
	if err != nil {
		t.Fatal(err)
	}
	pairs := [][2]string{
		{"203.0.113.9", "203.0.113.200"}, {"203.0.113.9", "203.0.112.9"}, {"203.0.113.9", "::ffff:203.0.113.9"},
		{"10.0.0.1", "138.0.0.1"}, {"2001:db8:1:2::9", "2001:db8:1:3::9"}, {"2001:db8:1:2::9", "2001:db9:1:2::9"},
		{"2001:db8::1", "2001:db8::2"}, {"2001:db8::1", "a001:db8::1"}, {"::1", "::"},
	}
	pairs = append(pairs, [2]string{"0.0.0.0", "::"}, [2]string{"1.2.3.4", "::102:304"})
	for bits4 := 0; bits4 <= 32; bits4++ {
		bits6 := bits4 * 4
		for _, pr := range pairs {
			a, b := netip.MustParseAddr(pr[0]).Unmap(), netip.MustParseAddr(pr[1]).Unmap()
			bits := bits6
			if a.Is4() {
				bits = bits4
			}
			pa, _ := a.Prefix(bits)
			pb, _ := b.Prefix(bits)
			want := a.Is4() == b.Is4() && pa == pb
			if got := k.Network(a, bits4, bits6) == k.Network(b, bits4, bits6); got != want {
				t.Errorf("/%d, /%d: %s and %s one network: %v, want %v", bits4, bits6, pr[0], pr[1], got, want)
			}
		}
	}
}

// BenchmarkClientNetwork is the cost network shares add to every request
// (rules/network.go): one IPv4 and one IPv6 client's network, masked and
// hashed, at the default prefixes (/24, /48).
func BenchmarkClientNetwork(b *testing.B) {
	k, err := New([]byte("bench secret"), nil, Formats{})
	if err != nil {
		b.Fatal(err)
	}
	a4, a6 := netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("2001:db8:1:2::9")
	var sum uint32
	b.ReportAllocs()
	for b.Loop() {
		sum += k.Network(a4, 24, 48) + k.Network(a6, 24, 48)
	}
	if sum == 0 {
		b.Log(sum)
	}
}
