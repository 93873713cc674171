package ipv6

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

// testNAT64 are local NAT64 prefixes of every RFC 6052 §2.2 length.
var testNAT64 = []netip.Prefix{
	netip.MustParsePrefix("2001:db8:64::/96"),
	netip.MustParsePrefix("2001:db8:122::/48"),
	netip.MustParsePrefix("2001:db9::/32"),
	netip.MustParsePrefix("2001:dba:100::/40"),
	netip.MustParsePrefix("2001:dbb:1:100::/56"),
	netip.MustParsePrefix("2001:dbc:1:2::/64"),
	netip.MustParsePrefix("64:ff9b:1::/96"), // RFC 8215 local use, when listed
}

func TestEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	e := New(Options{NAT64: testNAT64})
	tests := []struct {
		name string
		addr string
		want string // "" when the address embeds no IPv4 address
	}{
		// RFC 3056 §2: 2002:V4ADDR::/48; the site's subnet and host bits
		// do not matter.
		{"6to4", "2002:c633:6401::1", "198.51.100.1"},
		{"6to4 other subnet and host", "2002:c633:6401:ffff:1:2:3:4", "198.51.100.1"},
		{"6to4 of the issue", "2002:c633:64fe::1", "198.51.100.254"},
		{"6to4 private", "2002:a00:1::1", ""},
		{"6to4 loopback", "2002:7f00:1::", ""},
		{"6to4 unspecified", "2002::1", ""},
		{"6to4 CGN shared", "2002:6440:1::1", ""},
		{"6to4 link local", "2002:a9fe:1::1", ""},
		{"6to4 multicast", "2002:e000:1::1", ""},
		{"6to4 broadcast", "2002:ffff:ffff::1", ""},
		{"6to4 192.0.0.0/24", "2002:c000:9::1", ""},
		{"6to4 172.32 is global", "2002:ac20:1::1", "172.32.0.1"},
		{"6to4 172.15 is global", "2002:ac0f:ffff::1", "172.15.255.255"},
		{"6to4 100.128 is global", "2002:6480::1", "100.128.0.0"},
		// RFC 4380 §4: 2001:0:SERVER:FLAGS:PORT:CLIENT, client inverted.
		{"Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"},
		{"Teredo other server and port", "2001:0:ffff:ffff:0:0:3fff:fdd2", "192.0.2.45"},
		{"Teredo private client", "2001::f5ff:fffe", ""},
		{"Teredo client 0.0.0.0", "2001::ffff:ffff", ""},
		{"not Teredo: 2001:1::/32", "2001:1::3fff:fdd2", ""},
		// RFC 6052 §2.1: 64:ff9b::/96, global IPv4 only (§3.1).
		{"NAT64 well-known", "64:ff9b::198.51.100.7", "198.51.100.7"},
		{"NAT64 well-known private", "64:ff9b::10.0.0.1", ""},
		{"NAT64 well-known, outside the /96", "64:ff9b::1:c633:6407", ""},
		// RFC 4291 §2.5.5.1: ::a.b.c.d, global IPv4 only: "::" and "::1"
		// stay the unspecified and loopback addresses.
		{"IPv4-compatible", "::198.51.100.7", "198.51.100.7"},
		{"unspecified", "::", ""},
		{"loopback", "::1", ""},
		{"low address", "::2", ""},
		{"IPv4-compatible loopback", "::127.0.0.1", ""},
		{"IPv4-compatible private", "::192.168.1.1", ""},
		{"outside ::/96", "::1:c633:6407", ""},
		{"IPv4-translated is not built in", "::ffff:0:c633:6407", ""},
		// IPv4-mapped is the IPv4 address, whatever it is.
		{"mapped", "::ffff:10.0.0.1", "10.0.0.1"},
		// RFC 6052 §2.2 with listed prefixes: any IPv4 address (§3.1
		// allows non-global ones behind a network-specific prefix), u octet
		// (bits 64-71) and suffix ignored.
		{"local /96", "2001:db8:64::198.51.100.7", "198.51.100.7"},
		{"local /96 private", "2001:db8:64::10.1.2.3", "10.1.2.3"},
		{"local /32", "2001:db9:c633:6407::", "198.51.100.7"},
		{"local /32 u and suffix set", "2001:db9:c633:6407:ffff:ffff:ffff:ffff", "198.51.100.7"},
		{"local /40", "2001:dba:1c6:3364:7::", "198.51.100.7"},
		{"local /40 u and suffix set", "2001:dba:1c6:3364:ff07:ffff:ffff:ffff", "198.51.100.7"},
		{"local /48", "2001:db8:122:c633:64:700::", "198.51.100.7"},
		{"local /48 u and suffix set", "2001:db8:122:c633:ff64:7ff:ffff:ffff", "198.51.100.7"},
		{"local /56", "2001:dbb:1:1c6:33:6407::", "198.51.100.7"},
		{"local /64", "2001:dbc:1:2:c6:3364:700:0", "198.51.100.7"},
		{"local /64 u and suffix set", "2001:dbc:1:2:ffc6:3364:7ff:ffff", "198.51.100.7"},
		{"RFC 8215 prefix, listed", "64:ff9b:1::198.51.100.7", "198.51.100.7"},
		{"RFC 8215 prefix, outside the listed /96", "64:ff9b:1:1::c633:6407", ""},
		{"outside every prefix", "2001:db8:65::198.51.100.7", ""},
		{"zone ignored", "2002:c633:6401::1%eth0", "198.51.100.1"},
		{"ipv4", "198.51.100.7", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := netip.MustParseAddr(tt.addr)
			got, ok := e.EmbeddedIPv4(a)
			if tt.want == "" {
				if ok || got.IsValid() {
					t.Fatalf("EmbeddedIPv4(%s) = %v, %v; want none", tt.addr, got, ok)
				}
				if c, want := e.Counted(a), a.Unmap().WithZone(""); c != want {
					t.Fatalf("Counted(%s) = %v, want %v", tt.addr, c, want)
				}
				return
			}
			want := netip.MustParseAddr(tt.want)
			if !ok || got != want {
				t.Fatalf("EmbeddedIPv4(%s) = %v, %v; want %v, true", tt.addr, got, ok, want)
			}
			if c := e.Counted(a); c != want {
				t.Fatalf("Counted(%s) = %v, want %v", tt.addr, c, want)
			}
		})
	}
	if got, ok := e.EmbeddedIPv4(netip.Addr{}); ok || got.IsValid() {
		t.Errorf("EmbeddedIPv4(zero Addr) = %v, %v; want none", got, ok)
	}
	// Without listed prefixes only the built-in forms count; a nil
	// Extractor knows them too.
	var zero *Extractor
	for _, tt := range []struct{ addr, want string }{
		{"2002:c633:6401::1", "198.51.100.1"},
		{"2001:db8:64::198.51.100.7", "2001:db8:64::c633:6407"},
	} {
		if got := NewExtractor(nil, XForwardedFor).Counted(netip.MustParseAddr(tt.addr)); got.String() != tt.want {
			t.Errorf("without nat64 prefixes: Counted(%s) = %v, want %s", tt.addr, got, tt.want)
		}
		if got := zero.Counted(netip.MustParseAddr(tt.addr)); got.String() != tt.want {
			t.Errorf("nil Extractor: Counted(%s) = %v, want %s", tt.addr, got, tt.want)
		}
	}
}

func TestNestedNAT64PrefixesLongestDecides(t *testing.T) {
	t.Parallel()
	// The policy's compiler refuses overlapping prefixes; New still
	// decides them one way, in any order.
	outer, inner := netip.MustParsePrefix("2001:db9::/32"), netip.MustParsePrefix("2001:db9:0:1::/64")
	a := netip.MustParseAddr("2001:db9:0:1:c6:3364:700:0")
	for _, ps := range [][]netip.Prefix{{outer, inner}, {inner, outer}} {
		if got, _ := New(Options{NAT64: ps}).EmbeddedIPv4(a); got != netip.MustParseAddr("198.51.100.7") {
			t.Errorf("with %v: EmbeddedIPv4(%v) = %v, want 198.51.100.7 (the /64's reading)", ps, a, got)
		}
	}
}

func TestCheckNAT64Prefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix string
		want   error
	}{
		{"2001:db8:64::/96", nil},
		{"2001:db8:64::1/96", nil}, // host bits are masked
		{"2001:db8::/32", nil},
		{"2001:db8:100::/40", nil},
		{"2001:db8:122::/48", nil},
		{"2001:db8:1:100::/56", nil},
		{"2001:db8:1:2::/64", nil},
		{"64:ff9b:1::/48", nil},
		{"64:ff9b:1::/96", nil},
		{"2001:db8::/33", ErrNAT64Length},
		{"2001:db8::/128", ErrNAT64Length},
		{"2001:db8::/0", ErrNAT64Length},
		{"192.0.2.0/24", ErrNAT64NotIPv6},
		{"::ffff:0:0/96", ErrNAT64NotIPv6},
		{"::ffff:0:0/32", ErrNAT64Builtin}, // that is ::/32
		{"64:ff9b::/96", ErrNAT64Builtin},
		{"64:ff9b::/32", ErrNAT64Builtin},
		{"2002:c633::/32", ErrNAT64Builtin},
		{"2001::/32", ErrNAT64Builtin},
		{"::/96", ErrNAT64Builtin},
		{"::/32", ErrNAT64Builtin},
	}
	for _, tt := range tests {
		if got := CheckNAT64Prefix(netip.MustParsePrefix(tt.prefix)); !errors.Is(got, tt.want) {
			t.Errorf("CheckNAT64Prefix(%s) = %v, want %v", tt.prefix, got, tt.want)
		}
	}
	if got := CheckNAT64Prefix(netip.Prefix{}); !errors.Is(got, ErrNAT64NotIPv6) {
		t.Errorf("CheckNAT64Prefix(zero Prefix) = %v, want %v", got, ErrNAT64NotIPv6)
	}
}

// TestClientCountsEmbeddedIPv4: the client counts as the IPv4 address it
// embeds, but trust is decided on the hops as sent and the origin's
// X-Forwarded-For names the address as sent.
func TestClientCountsEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	e := New(Options{Trusted: testTrusted, NAT64: testNAT64})
	tests := []struct {
		name     string
		peer     string
		header   string
		want     string
		wantXFF  string
		wantSame string // an IPv4 address whose /24 key the client's must equal
	}{
		{"6to4 hop", "127.0.0.1", "2002:c633:6401::1", "198.51.100.1", "2002:c633:6401::1, 127.0.0.1", "198.51.100.200"},
		{"NAT64 hop behind a proxy", "10.0.0.1", "64:ff9b::198.51.100.7, 10.0.0.2", "198.51.100.7", "64:ff9b::c633:6407, 10.0.0.2, 10.0.0.1", "198.51.100.1"},
		{"local NAT64 hop", "::1", "2001:db8:64::203.0.113.9", "203.0.113.9", "2001:db8:64::cb00:7109, ::1", "203.0.113.1"},
		// 2002:a00:2:: embeds the trusted 10.0.0.2, but a 6to4 address is
		// not that proxy: it is the (untrusted) client, and not 10.0.0.2.
		{"6to4 spelling of a trusted proxy", "10.0.0.1", "198.51.100.9, 2002:a00:2::1", "2002:a00:2::1", "2002:a00:2::1, 10.0.0.1", ""},
		{"untrusted 6to4 peer", "2002:c633:6401::1", "203.0.113.7", "198.51.100.1", "2002:c633:6401::1", "198.51.100.2"},
		{"untrusted Teredo peer", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "garbage", "192.0.2.45", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.99"},
		{"every hop trusted", "10.0.0.1", "10.0.0.3, 10.0.0.2", "10.0.0.3", "10.0.0.3, 10.0.0.2, 10.0.0.1", "10.0.0.4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			peer, values := netip.MustParseAddr(tt.peer), lines(tt.header)
			got := e.Client(peer, values)
			if got.String() != tt.want {
				t.Errorf("Client = %v, want %s", got, tt.want)
			}
			if xff := e.AppendForwardedFor(nil, peer, values); string(xff) != tt.wantXFF {
				t.Errorf("AppendForwardedFor = %q, want %q", xff, tt.wantXFF)
			}
			if tt.wantSame != "" {
				k, want := AppendKey(nil, got, 24, 48), AppendKey(nil, netip.MustParseAddr(tt.wantSame), 24, 48)
				if !bytes.Equal(k, want) {
					t.Errorf("key %x, want %x (the IPv4 /24's)", k, want)
				}
			}
		})
	}
}
