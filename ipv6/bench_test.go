package ipv6

import (
	"net/netip"
	"testing"
)

// benchCases are 3-hop X-Forwarded-For chains from a trusted peer: a spoofed
// left-most value, the client, and one trusted proxy.
var benchCases = []struct {
	name   string
	kind   HeaderKind
	peer   netip.Addr
	values [][]byte
}{
	{"ipv4", XForwardedFor, netip.MustParseAddr("10.0.0.1"), [][]byte{[]byte("198.51.100.1, 203.0.113.7, 10.0.0.2")}},
	{"ipv6", XForwardedFor, netip.MustParseAddr("::1"), [][]byte{[]byte("2001:db8:1::1, 2001:db8:2:3:4:5:6:7, 2001:db8:ffff::2")}},
	{"6to4", XForwardedFor, netip.MustParseAddr("10.0.0.1"), [][]byte{[]byte("198.51.100.1, 2002:c633:6401::7, 10.0.0.2")}},
	{"forwarded", Forwarded, netip.MustParseAddr("10.0.0.1"), [][]byte{[]byte(`for=198.51.100.1, for="[2001:db8:2::7]:4711";proto=https, for=10.0.0.2`)}},
}

func BenchmarkClient(b *testing.B) {
	for _, bc := range benchCases {
		e := New(Options{Trusted: testTrusted, Header: bc.kind, NAT64: testNAT64})
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.Client(bc.peer, bc.values)
			}
		})
	}
}

func BenchmarkAppendForwardedFor(b *testing.B) {
	for _, bc := range benchCases {
		e := NewExtractor(testTrusted, bc.kind)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]byte, 0, 256)
			for b.Loop() {
				dst = e.AppendForwardedFor(dst[:0], bc.peer, bc.values)
			}
		})
	}
}

func BenchmarkParseAddr(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"ipv4", "203.0.113.7"},
		{"ipv6", "2001:db8:2:3:4:5:6:7"},
		{"ipv6-bracketed-port", "[2001:db8::7]:4711"},
		{"garbage", "unknown"},
	} {
		in := []byte(bc.in)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseAddr(in)
			}
		})
	}
}

func BenchmarkAppendKey(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"ipv4", "203.0.113.7"},
		{"ipv6", "2001:db8:2:3:4:5:6:7"},
	} {
		a := netip.MustParseAddr(bc.in)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]byte, 0, KeyLen)
			for b.Loop() {
				dst = AppendKey(dst[:0], a, 32, 64)
			}
		})
	}
}

func BenchmarkTrusted(b *testing.B) {
	e := NewExtractor(testTrusted, XForwardedFor)
	a := netip.MustParseAddr("2001:db8:ffff::2")
	b.ReportAllocs()
	for b.Loop() {
		e.Trusted(a)
	}
}

func BenchmarkCounted(b *testing.B) {
	e := New(Options{NAT64: testNAT64})
	for _, bc := range []struct{ name, in string }{
		{"ipv4", "203.0.113.7"},
		{"ipv6", "2001:db8:2:3:4:5:6:7"},
		{"6to4", "2002:c633:6401::7"},
		{"local-nat64-64", "2001:dbc:1:2:c6:3364:700:0"},
	} {
		a := netip.MustParseAddr(bc.in)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.Counted(a)
			}
		})
	}
}
