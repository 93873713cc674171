package ipv6

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{
		"192.0.2.1", "192.0.2.1:80", " 192.0.2.1 ", "01.2.3.4", "1.2.3.4.5", "256.1.1.1",
		"::", "::1", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:443", "[::1]:",
		"::ffff:1.2.3.4", "[::ffff:1.2.3.4]:80", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:1.2.3.4",
		"fe80::1%eth0", "[fe80::1%eth0]:80", "fe80::1%", "%x", "[1.2.3.4]", "1.2.3.4%x",
		"unknown", "_hidden", "", "[", "]", "[::1]]", "1:2:3:4:5:6:7:8", "1::2::3", "12345::",
		"192.0.2.1:_p", "[::1]:_p", "\t[::1]\t",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ParseAddr(b)
		want, wantOK := slowParseAddr(string(b))
		if got != want || ok != wantOK {
			t.Fatalf("ParseAddr(%q) = %v, %v; want %v, %v", b, got, ok, want, wantOK)
		}
		if ok && (!got.IsValid() || got.Is4In6() || got.Zone() != "") {
			t.Fatalf("ParseAddr(%q) = %v: want a valid, unmapped address without a zone", b, got)
		}
		got, ok = parseNode(b)
		want, wantOK = slowParseNode(string(b))
		if got != want || ok != wantOK {
			t.Fatalf("parseNode(%q) = %v, %v; want %v, %v", b, got, ok, want, wantOK)
		}
	})
}

// fuzzTrusted are the prefixes FuzzClient picks its trusted set from.
var fuzzTrusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("10.1.0.0/16"),
	netip.MustParsePrefix("192.0.2.0/25"),
	netip.MustParsePrefix("192.0.2.128/25"),
	netip.MustParsePrefix("::ffff:172.16.0.0/108"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("1.0.0.0/8"),
	netip.MustParsePrefix("::/0"),
	netip.MustParsePrefix("0.0.0.0/0"),
	netip.MustParsePrefix("127.0.0.1/32"),
}

var fuzzPeers = []netip.Addr{
	netip.MustParseAddr("10.0.0.1"),
	netip.MustParseAddr("::1"),
	netip.MustParseAddr("192.0.2.200"),
	netip.MustParseAddr("::ffff:10.0.0.1"),
	netip.MustParseAddr("fe80::1%eth0"),
	netip.MustParseAddr("203.0.113.7"),
	netip.MustParseAddr("2001:db8::1"),
	netip.MustParseAddr("172.16.0.1"),
}

// FuzzClient compares Client and AppendForwardedFor with slowClient. header
// holds the field lines separated by '\n'; caps, when not zero, lowers the
// scan limits so the fuzzer can reach them.
func FuzzClient(f *testing.F) {
	seeds := []string{
		"203.0.113.7",
		"1.1.1.1, 203.0.113.7, 10.0.0.2",
		"1.1.1.1\n203.0.113.7\n10.0.0.2",
		"10.0.0.3, 10.0.0.2",
		"garbage, 10.0.0.2",
		"unknown",
		", ,",
		"[2001:db8::1]:80, ::ffff:10.0.0.1",
		"for=203.0.113.7",
		`for="[2001:db8:cafe::17]:4711";proto=https, FOR=10.0.0.2`,
		`for=1.1.1.1;ext="a, b", for=10.0.0.9`,
		`for="1.1.1.1, for=203.0.113.7`,
		`for=unknown, for="_hidden"`,
		`a=b;;for=192.0.2.1`,
		`for="\"", for=1.2.3.4`,
		`for=1.1.1.1;ext="a\", for=10.0.0.2\\", for=10.0.0.3`,
		"2002:c633:6401::1, 10.0.0.2",
		"198.51.100.1, 2002:a00:2::1, 10.0.0.2",
		"64:ff9b::203.0.113.7, ::ffff:10.0.0.1",
		"2001:0:4136:e378:8000:63bf:3fff:fdd2",
		"2001:db8:64::198.51.100.7, 2001:db8:122:c633:64:6400::1",
		`for="[2002:c633:6401::1]:80"`,
	}
	for _, s := range seeds {
		for _, kind := range []uint8{0, 1} {
			f.Add(s, kind, uint8(0), uint16(0x0fff), uint8(0))
			f.Add(s, kind, uint8(0), uint16(0x0001), uint8(0x29))
		}
	}
	f.Fuzz(func(t *testing.T, header string, kind, peerSel uint8, trustMask uint16, caps uint8) {
		var trusted []netip.Prefix
		for i, p := range fuzzTrusted {
			if trustMask&(1<<i) != 0 {
				trusted = append(trusted, p)
			}
		}
		k := HeaderKind(kind & 1)
		e := New(Options{Trusted: trusted, Header: k, NAT64: fuzzNAT64})
		if caps != 0 {
			e.maxHops, e.maxBytes = 1+int(caps&7), int(caps>>3)*8
		}
		peer := fuzzPeers[int(peerSel)%len(fuzzPeers)]
		var ls []string
		if header != "" || kind&2 != 0 {
			ls = strings.Split(header, "\n")
		}
		values := make([][]byte, len(ls))
		for i, l := range ls {
			values[i] = []byte(l)
		}

		got := e.Client(peer, values)
		if !got.IsValid() || got.Is4In6() || got.Zone() != "" {
			t.Fatalf("Client(%v, %q) = %v: want a valid, unmapped address without a zone", peer, ls, got)
		}
		xff := e.AppendForwardedFor(nil, peer, values)
		first, _, _ := bytes.Cut(xff, []byte(", "))
		wire, ok := ParseAddr(first)
		if !ok || e.Counted(wire) != got {
			t.Fatalf("AppendForwardedFor(%v, %q) = %q: want it to start with an address that counts as the client %v", peer, ls, xff, got)
		}
		// The one scan the gateway makes must find the client Client does
		// (which scans without keeping the hops).
		if c, x := e.ClientAndForwardedFor(nil, peer, values); c != got || string(x) != string(xff) {
			t.Fatalf("ClientAndForwardedFor(%v, %q) = %v, %q; Client and AppendForwardedFor say %v, %q", peer, ls, c, x, got, xff)
		}
		want, chain, comparable := slowClient(trusted, k, e.maxHops, e.maxBytes, peer, ls)
		if !comparable {
			return
		}
		if c := slowCounted(fuzzNAT64, want); got != c {
			t.Fatalf("Client(%v, %q) with %v, %v, limits %d hops %d bytes = %v, want %v (%v counted)",
				peer, ls, trusted, k, e.maxHops, e.maxBytes, got, c, want)
		}
		if wantXFF := slowForwardedFor(peer, want, chain); string(xff) != wantXFF {
			t.Fatalf("AppendForwardedFor(%v, %q) with %v, %v = %q, want %q", peer, ls, trusted, k, xff, wantXFF)
		}
	})
}

func FuzzKey(f *testing.F) {
	f.Add([]byte{192, 0, 2, 1}, int8(32), int8(64))
	f.Add([]byte{192, 0, 2, 1}, int8(24), int8(48))
	f.Add([]byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, int8(32), int8(64))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, int8(8), int8(100))
	f.Add([]byte{}, int8(32), int8(64))
	f.Fuzz(func(t *testing.T, b []byte, v4bits, v6bits int8) {
		a, _ := netip.AddrFromSlice(b)
		got := AppendKey(nil, a, int(v4bits), int(v6bits))
		if want := slowKey(a, int(v4bits), int(v6bits)); !bytes.Equal(got, want) {
			t.Fatalf("AppendKey(%v, %d, %d) = %x, want %x", a, v4bits, v6bits, got, want)
		}
		p := Prefix(a, int(v4bits), int(v6bits))
		if a.IsValid() && (!p.IsValid() || !p.Contains(a.Unmap()) || p != p.Masked()) {
			t.Fatalf("Prefix(%v, %d, %d) = %v: want a masked prefix holding the address", a, v4bits, v6bits, p)
		}
	})
}

// fuzzNAT64 are the local NAT64 prefixes FuzzClient's Extractor knows, and
// those FuzzEmbeddedIPv4 picks from: one of each RFC 6052 length, a
// nested pair, and prefixes New must ignore (a length RFC 6052 does not
// define, an IPv4 prefix, a built-in one).
var fuzzNAT64 = []netip.Prefix{
	netip.MustParsePrefix("2001:db8:64::/96"),
	netip.MustParsePrefix("2001:db8:122::/48"),
	netip.MustParsePrefix("2001:db9::/32"),
	netip.MustParsePrefix("2001:dba:100::/40"),
	netip.MustParsePrefix("2001:dbb:1:100::/56"),
	netip.MustParsePrefix("2001:dbc:1:2::/64"),
	netip.MustParsePrefix("2001:db9:0:1::/64"), // inside 2001:db9::/32: the longer decides
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:dbd::/33"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2002:c633::/32"),
}

// FuzzEmbeddedIPv4 compares EmbeddedIPv4 and Counted with their slow
// references for any address and any subset of fuzzNAT64 (mask).
func FuzzEmbeddedIPv4(f *testing.F) {
	for _, s := range []string{
		"2002:c633:6401::1", "2002:c633:6401:ffff:1:2:3:4", "2002:7f00:1::", "2002::", "2002:ffff:ffff::",
		"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::ffff:ffff", "2001::", "2001:0:0:0:ffff:ffff:39cc:9b01",
		"64:ff9b::198.51.100.7", "64:ff9b::10.0.0.1", "64:ff9b::1:0:0", "64:ff9b:1::c633:6401",
		"::", "::1", "::198.51.100.7", "::127.0.0.1", "::1:0:0", "::ffff:198.51.100.7", "::ffff:0:198.51.100.7",
		"2001:db8:64::198.51.100.7", "2001:db8:122:c633:64:6400::1", "2001:db8:122:c633:ff64:64ff:ffff:ffff",
		"2001:db9:c633:6401::", "2001:dba:1c6:3364:1:ff00::", "2001:dbb:1:1c6:33:6401::", "2001:dbc:1:2:c6:3364:100:0",
		"2001:db9:0:1:c6:3364:100:0", "2001:dbd::1", "2001:db8::1", "fe80::1",
	} {
		b := netip.MustParseAddr(s).As16()
		f.Add(b[:], uint16(0xffff))
		f.Add(b[:], uint16(0x0001))
	}
	f.Add([]byte{198, 51, 100, 7}, uint16(0))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, mask uint16) {
		a, _ := netip.AddrFromSlice(b)
		var nat64 []netip.Prefix
		for i, p := range fuzzNAT64 {
			if mask&(1<<i) != 0 {
				nat64 = append(nat64, p)
			}
		}
		e := New(Options{NAT64: nat64})
		got, ok := e.EmbeddedIPv4(a)
		want, wantOK := slowEmbeddedIPv4(nat64, a)
		if got != want || ok != wantOK {
			t.Fatalf("EmbeddedIPv4(%v) with %v = %v, %v; want %v, %v", a, nat64, got, ok, want, wantOK)
		}
		if ok && !got.Is4() {
			t.Fatalf("EmbeddedIPv4(%v) = %v: want an IPv4 address", a, got)
		}
		if c, wantC := e.Counted(a), slowCounted(nat64, a); c != wantC {
			t.Fatalf("Counted(%v) with %v = %v, want %v", a, nat64, c, wantC)
		}
	})
}
