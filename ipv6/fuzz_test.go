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
		e := NewExtractor(trusted, k)
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
		if first, _, _ := bytes.Cut(xff, []byte(", ")); string(first) != got.String() {
			t.Fatalf("AppendForwardedFor(%v, %q) = %q: want it to start with the client %v", peer, ls, xff, got)
		}
		want, chain, comparable := slowClient(trusted, k, e.maxHops, e.maxBytes, peer, ls)
		if !comparable {
			return
		}
		if got != want {
			t.Fatalf("Client(%v, %q) with %v, %v, limits %d hops %d bytes = %v, want %v",
				peer, ls, trusted, k, e.maxHops, e.maxBytes, got, want)
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
