package ipv6

import (
	"net/netip"
	"strings"
	"testing"
)

// testTrusted are the proxies the table tests trust.
var testTrusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.1/32"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
}

func lines(ss ...string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}

func TestParseHeaderKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   HeaderKind
		wantOK bool
	}{
		{"x-forwarded-for", XForwardedFor, true},
		{"X-Forwarded-For", XForwardedFor, true},
		{"forwarded", Forwarded, true},
		{"FORWARDED", Forwarded, true},
		{"x-real-ip", XForwardedFor, false},
		{"", XForwardedFor, false},
	}
	for _, tt := range tests {
		got, ok := ParseHeaderKind(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseHeaderKind(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
	if got, want := Forwarded.String(), "Forwarded"; got != want {
		t.Errorf("Forwarded.String() = %q, want %q", got, want)
	}
	if got, want := XForwardedFor.String(), "X-Forwarded-For"; got != want {
		t.Errorf("XForwardedFor.String() = %q, want %q", got, want)
	}
}

func TestTrusted(t *testing.T) {
	t.Parallel()
	e := NewExtractor([]netip.Prefix{
		netip.MustParsePrefix("10.1.2.3/8"), // masked to 10.0.0.0/8
		netip.MustParsePrefix("10.0.0.0/16"),
		netip.MustParsePrefix("192.0.2.0/25"), // adjacent halves merge
		netip.MustParsePrefix("192.0.2.128/25"),
		netip.MustParsePrefix("::ffff:172.16.0.0/108"), // becomes 172.16.0.0/12
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("2001:db8:1::/48"),
		netip.MustParsePrefix("fe80::1/128"),
		{}, // invalid: ignored
	}, XForwardedFor)
	tests := []struct {
		addr string
		want bool
	}{
		{"10.0.0.0", true},
		{"10.255.255.255", true},
		{"11.0.0.0", false},
		{"9.255.255.255", false},
		{"192.0.2.0", true},
		{"192.0.2.200", true},
		{"192.0.3.0", false},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"172.32.0.0", false},
		{"::ffff:10.0.0.1", true},
		{"::ffff:172.16.0.1", true},
		{"2001:db8::1", true},
		{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"2001:db9::", false},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fe80::2", false},
		{"::1", false},
		{"127.0.0.1", false},
	}
	for _, tt := range tests {
		if got := e.Trusted(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Trusted(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	if got, want := len(e.v4), 3; got != want {
		t.Errorf("got %d IPv4 ranges %v, want %d merged ones", got, e.v4, want)
	}
	if got, want := len(e.v6), 2; got != want {
		t.Errorf("got %d IPv6 ranges %v, want %d merged ones", got, e.v6, want)
	}
	if got := (&Extractor{}).Trusted(netip.MustParseAddr("10.0.0.1")); got {
		t.Errorf("zero Extractor: Trusted(10.0.0.1) = true, want false")
	}
	if got := e.Trusted(netip.Addr{}); got {
		t.Errorf("Trusted(zero Addr) = true, want false")
	}
	all := NewExtractor([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, XForwardedFor)
	for _, a := range []string{"0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		if !all.Trusted(netip.MustParseAddr(a)) {
			t.Errorf("with /0 trusted: Trusted(%s) = false, want true", a)
		}
	}
}

func TestClient(t *testing.T) {
	t.Parallel()
	const (
		proxy  = "10.0.0.1"
		client = "203.0.113.7"
	)
	tests := []struct {
		name   string
		kind   HeaderKind
		peer   string
		values []string
		want   string
		// wantXFF is AppendForwardedFor's output.
		wantXFF string
	}{
		{"untrusted peer ignores header", XForwardedFor, "198.51.100.1", []string{"203.0.113.7"}, "198.51.100.1", "198.51.100.1"},
		{"untrusted peer no header", XForwardedFor, "198.51.100.1", nil, "198.51.100.1", "198.51.100.1"},
		{"untrusted peer mapped", XForwardedFor, "::ffff:198.51.100.1", nil, "198.51.100.1", "198.51.100.1"},
		{"trusted peer no header", XForwardedFor, proxy, nil, proxy, proxy},
		{"trusted peer empty header", XForwardedFor, proxy, []string{""}, proxy, proxy},
		{"trusted peer blank header", XForwardedFor, proxy, []string{"  "}, proxy, proxy},
		{"one hop", XForwardedFor, proxy, []string{client}, client, client + ", " + proxy},
		{"trusted peer mapped", XForwardedFor, "::ffff:10.0.0.1", []string{client}, client, client + ", " + proxy},
		{"hop mapped", XForwardedFor, proxy, []string{"::ffff:203.0.113.7"}, client, client + ", " + proxy},
		{"spoofed left-most ignored", XForwardedFor, proxy, []string{"1.1.1.1, 2.2.2.2, " + client}, client, client + ", " + proxy},
		{"spoofed garbage left ignored", XForwardedFor, proxy, []string{"garbage, ,unknown, " + client}, client, client + ", " + proxy},
		{"trusted hops skipped", XForwardedFor, proxy, []string{"1.1.1.1, " + client + ", 10.0.0.9, 10.0.0.8"}, client, client + ", 10.0.0.9, 10.0.0.8, " + proxy},
		{"all trusted", XForwardedFor, proxy, []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3", "10.0.0.3, 10.0.0.2, " + proxy},
		{"client's own line first", XForwardedFor, proxy, []string{"1.1.1.1", client}, client, client + ", " + proxy},
		{"lines read as one list", XForwardedFor, proxy, []string{"1.1.1.1, " + client, "10.0.0.5"}, client, client + ", 10.0.0.5, " + proxy},
		{"client hop on earlier line", XForwardedFor, proxy, []string{"1.1.1.1, " + client, "10.0.0.5, 10.0.0.6"}, client, client + ", 10.0.0.5, 10.0.0.6, " + proxy},
		{"all trusted across lines", XForwardedFor, proxy, []string{"10.0.0.2", "10.0.0.3"}, "10.0.0.2", "10.0.0.2, 10.0.0.3, " + proxy},
		{"garbage falls back", XForwardedFor, proxy, []string{"1.1.1.1, garbage"}, proxy, proxy},
		{"unknown falls back", XForwardedFor, proxy, []string{"unknown"}, proxy, proxy},
		{"obfuscated falls back", XForwardedFor, proxy, []string{"_hidden, 10.0.0.2"}, proxy, proxy},
		{"empty element falls back", XForwardedFor, proxy, []string{client + ", , 10.0.0.2"}, proxy, proxy},
		{"trailing comma falls back", XForwardedFor, proxy, []string{client + ","}, proxy, proxy},
		{"empty trailing line falls back", XForwardedFor, proxy, []string{client, ""}, proxy, proxy},
		{"port", XForwardedFor, proxy, []string{"203.0.113.7:4711"}, client, client + ", " + proxy},
		{"bracketed ipv6 port", XForwardedFor, proxy, []string{"[2001:db8::7]:4711"}, "2001:db8::7", "2001:db8::7, " + proxy},
		{"ipv6 zone", XForwardedFor, proxy, []string{"fe80::7%eth0"}, "fe80::7", "fe80::7, " + proxy},
		{"ipv6 hops", XForwardedFor, "::1", []string{"2001:db8::7, 2001:db8:ffff::1"}, "2001:db8::7", "2001:db8::7, 2001:db8:ffff::1, ::1"},
		{"tabs and spaces", XForwardedFor, proxy, []string{"\t203.0.113.7\t,\t10.0.0.2 "}, client, client + ", 10.0.0.2, " + proxy},
		{"forwarded header ignored for xff", XForwardedFor, proxy, []string{"for=203.0.113.7"}, proxy, proxy},

		{"fwd one element", Forwarded, proxy, []string{"for=203.0.113.7"}, client, client + ", " + proxy},
		{"fwd rfc example", Forwarded, proxy, []string{`for="_gazonk"`}, proxy, proxy},
		{"fwd quoted ipv6 port", Forwarded, proxy, []string{`For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17", "2001:db8:cafe::17, " + proxy},
		{"fwd mixed case", Forwarded, proxy, []string{`FOR=203.0.113.7;PROTO=https;By=10.0.0.1`}, client, client + ", " + proxy},
		{"fwd multiple elements", Forwarded, proxy, []string{`for=192.0.2.43, for="[2001:db8:cafe::17]", for=10.0.0.2`}, "2001:db8:cafe::17", "2001:db8:cafe::17, 10.0.0.2, " + proxy},
		{"fwd multiple lines", Forwarded, proxy, []string{`for=192.0.2.43`, `for=203.0.113.7;proto=http`, `for=10.0.0.2`}, client, client + ", 10.0.0.2, " + proxy},
		{"fwd quoted ipv4 port", Forwarded, proxy, []string{`for="203.0.113.7:80"`}, client, client + ", " + proxy},
		{"fwd obfuscated port", Forwarded, proxy, []string{`for="203.0.113.7:_p1"`}, client, client + ", " + proxy},
		{"fwd quoted comma in other param", Forwarded, proxy, []string{`for=1.1.1.1, for=203.0.113.7;ext="a, b;c", for=10.0.0.2`}, client, client + ", 10.0.0.2, " + proxy},
		{"fwd escaped quote", Forwarded, proxy, []string{`for=203.0.113.7;ext="a\", for=1.1.1.1"`}, client, client + ", " + proxy},
		{"fwd spaces around pairs", Forwarded, proxy, []string{` for=203.0.113.7 ; proto=https `}, client, client + ", " + proxy},
		{"fwd mapped", Forwarded, proxy, []string{`for="[::ffff:203.0.113.7]"`}, client, client + ", " + proxy},
		{"fwd unknown falls back", Forwarded, proxy, []string{`for=203.0.113.7, for=unknown`}, proxy, proxy},
		{"fwd hidden falls back", Forwarded, proxy, []string{`for=_hidden`}, proxy, proxy},
		{"fwd unquoted ipv6 falls back", Forwarded, proxy, []string{`for=2001:db8::1`}, proxy, proxy},
		{"fwd quoted unbracketed ipv6 falls back", Forwarded, proxy, []string{`for="2001:db8::1"`}, proxy, proxy},
		{"fwd no for falls back", Forwarded, proxy, []string{`proto=https;by=10.0.0.1`}, proxy, proxy},
		{"fwd two fors falls back", Forwarded, proxy, []string{`for=203.0.113.7;for=1.1.1.1`}, proxy, proxy},
		{"fwd space around equals falls back", Forwarded, proxy, []string{`for = 203.0.113.7`}, proxy, proxy},
		{"fwd junk after quote falls back", Forwarded, proxy, []string{`for="203.0.113.7"x`}, proxy, proxy},
		{"fwd empty element falls back", Forwarded, proxy, []string{`for=203.0.113.7,,for=10.0.0.2`}, proxy, proxy},
		{"fwd all trusted", Forwarded, proxy, []string{`for=10.0.0.3;proto=https, for=10.0.0.2`}, "10.0.0.3", "10.0.0.3, 10.0.0.2, " + proxy},
		{"fwd client's open quote cannot swallow proxy element", Forwarded, proxy, []string{`for="1.1.1.1, for=203.0.113.7`}, client, client + ", " + proxy},
		{"fwd unterminated quote in proxy element falls back", Forwarded, proxy, []string{`for=1.1.1.1, for=203.0.113.7"`}, proxy, proxy},
		{"fwd x-forwarded-for syntax falls back", Forwarded, proxy, []string{"203.0.113.7"}, proxy, proxy},
	}
	e := NewExtractor(testTrusted, XForwardedFor)
	f := NewExtractor(testTrusted, Forwarded)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x := e
			if tt.kind == Forwarded {
				x = f
			}
			peer, values := netip.MustParseAddr(tt.peer), lines(tt.values...)
			if got, want := x.Client(peer, values), netip.MustParseAddr(tt.want); got != want {
				t.Errorf("Client(%s, %q) = %v, want %v", tt.peer, tt.values, got, want)
			}
			if got := string(x.AppendForwardedFor(nil, peer, values)); got != tt.wantXFF {
				t.Errorf("AppendForwardedFor(%s, %q) = %q, want %q", tt.peer, tt.values, got, tt.wantXFF)
			}
		})
	}
}

func TestClientLimits(t *testing.T) {
	t.Parallel()
	peer := netip.MustParseAddr("10.0.0.1")
	e := NewExtractor(testTrusted, XForwardedFor)
	chain := func(n int) string { // n trusted hops
		return strings.Repeat("10.0.0.2, ", n-1) + "10.0.0.2"
	}
	padded := func(n int) string { // n trusted hops of 96 bytes, the most ParseAddr reads
		hop := strings.Repeat(" ", maxAddrLen-8) + "10.0.0.2"
		return strings.Repeat(hop+",", n-1) + hop
	}
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{"client after 63 trusted hops", []string{"203.0.113.7, " + chain(63)}, "203.0.113.7"},
		{"client after 64 trusted hops", []string{"203.0.113.7, " + chain(64)}, "10.0.0.1"},
		{"64 trusted hops", []string{chain(64)}, "10.0.0.2"},
		{"65 trusted hops", []string{chain(65)}, "10.0.0.1"},
		{"huge client part is not read", []string{strings.Repeat("x", 1<<20) + ", 203.0.113.7"}, "203.0.113.7"},
		{"huge client line is not read", []string{strings.Repeat("x", 1<<20), "203.0.113.7"}, "203.0.113.7"},
		{"huge hop falls back", []string{"203.0.113.7" + strings.Repeat(" ", 5000)}, "10.0.0.1"},
		// The client's hop starts 97k+10 bytes from the end.
		{"client hop inside 4 KiB", []string{"203.0.113.7", padded(42)}, "203.0.113.7"},
		{"client hop past 4 KiB", []string{"203.0.113.7", padded(43)}, "10.0.0.1"},
		{"many lines", append(strings.Split(strings.Repeat("10.0.0.2\n", 70), "\n")[:70], "203.0.113.7"), "203.0.113.7"},
		{"many trusted lines", strings.Split(strings.Repeat("10.0.0.2\n", 70), "\n")[:70], "10.0.0.1"},
	}
	for _, tt := range tests {
		if got, want := e.Client(peer, lines(tt.values...)), netip.MustParseAddr(tt.want); got != want {
			t.Errorf("%s: got %v, want %v", tt.name, got, want)
		}
	}
}

func TestZeroExtractor(t *testing.T) {
	t.Parallel()
	var e Extractor
	peer := netip.MustParseAddr("10.0.0.1")
	if got := e.Client(peer, lines("203.0.113.7")); got != peer {
		t.Errorf("zero Extractor: got %v, want the peer %v", got, peer)
	}
}
