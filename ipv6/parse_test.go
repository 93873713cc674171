package ipv6

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // "" when ok must be false
	}{
		{"ipv4", "192.0.2.1", "192.0.2.1"},
		{"ipv4 zeros", "0.0.0.0", "0.0.0.0"},
		{"ipv4 max", "255.255.255.255", "255.255.255.255"},
		{"ipv4 port", "192.0.2.1:5678", "192.0.2.1"},
		{"ipv4 port zero", "192.0.2.1:0", "192.0.2.1"},
		{"ipv4 port max", "192.0.2.1:65535", "192.0.2.1"},
		{"ipv4 port leading zeros", "192.0.2.1:00080", "192.0.2.1"},
		{"ipv4 spaces and tabs", " \t192.0.2.1\t ", "192.0.2.1"},
		{"ipv6", "2001:db8::1", "2001:db8::1"},
		{"ipv6 full", "2001:0db8:0000:0000:0000:ff00:0042:8329", "2001:db8::ff00:42:8329"},
		{"ipv6 upper", "2001:DB8::A", "2001:db8::a"},
		{"ipv6 unspecified", "::", "::"},
		{"ipv6 loopback", "::1", "::1"},
		{"ipv6 trailing ellipsis", "2001:db8::", "2001:db8::"},
		{"ipv6 embedded ipv4", "64:ff9b::192.0.2.33", "64:ff9b::c000:221"},
		{"ipv6 embedded ipv4 full", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304"},
		{"ipv6 brackets", "[2001:db8::1]", "2001:db8::1"},
		{"ipv6 brackets port", "[2001:db8::1]:443", "2001:db8::1"},
		{"ipv6 brackets spaces", "  [::1]:80 ", "::1"},
		{"ipv6 bare ipv6 with port-like tail is an address", "::1:80", "::1:80"},
		{"ipv4-mapped", "::ffff:192.0.2.1", "192.0.2.1"},
		{"ipv4-mapped hex", "::ffff:c000:201", "192.0.2.1"},
		{"ipv4-mapped brackets port", "[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"zone stripped", "fe80::1%eth0", "fe80::1"},
		{"zone in brackets", "[fe80::1%eth0]:80", "fe80::1"},
		{"zone on mapped", "::ffff:10.1.2.3%lo", "10.1.2.3"},

		{"empty", "", ""},
		{"blank", " \t ", ""},
		{"unknown", "unknown", ""},
		{"obfuscated", "_hidden", ""},
		{"garbage", "not an address", ""},
		{"hostname", "example.com", ""},
		{"ipv4 short", "192.0.2", ""},
		{"ipv4 long", "192.0.2.1.5", ""},
		{"ipv4 field too big", "192.0.2.256", ""},
		{"ipv4 leading zero", "192.0.2.01", ""},
		{"ipv4 empty field", "192..2.1", ""},
		{"ipv4 trailing dot", "192.0.2.1.", ""},
		{"ipv4 empty port", "192.0.2.1:", ""},
		{"ipv4 port too big", "192.0.2.1:65536", ""},
		{"ipv4 port sign", "192.0.2.1:+80", ""},
		{"ipv4 obfuscated port", "192.0.2.1:_p", ""},
		{"ipv4 two ports", "192.0.2.1:80:80", ""},
		{"ipv4 zone", "192.0.2.1%eth0", ""},
		{"ipv4 in brackets", "[192.0.2.1]", ""},
		{"ipv4 in brackets port", "[192.0.2.1]:80", ""},
		{"inner space", "192.0.2. 1", ""},
		{"ipv6 five digit group", "2001:db8::12345", ""},
		{"ipv6 two ellipses", "2001::db8::1", ""},
		{"ipv6 too many groups", "1:2:3:4:5:6:7:8:9", ""},
		{"ipv6 ellipsis for nothing", "1:2:3:4::5:6:7:8", ""},
		{"ipv6 too short", "1:2:3", ""},
		{"ipv6 trailing colon", "2001:db8::1:", ""},
		{"ipv6 embedded ipv4 misplaced", "1:2:3:4:5:1.2.3.4", ""},
		{"ipv6 empty zone", "fe80::1%", ""},
		{"ipv6 zone with space", "fe80::1%a b", ""},
		{"ipv6 zone with bracket", "[fe80::1%a]b]:80", ""},
		{"zone without address", "%eth0", ""},
		{"brackets unclosed", "[2001:db8::1", ""},
		{"brackets junk after", "[2001:db8::1]x", ""},
		{"brackets empty port", "[::1]:", ""},
		{"brackets port too big", "[::1]:99999", ""},
		{"brackets empty", "[]", ""},
		{"quoted", `"192.0.2.1"`, ""},
		{"nul", "192.0.2.1\x00", ""},
		{"overlong", strings.Repeat(" ", 90) + "192.0.2.1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseAddr([]byte(tt.in))
			if tt.want == "" {
				if ok {
					t.Fatalf("ParseAddr(%q) = %v, true; want ok false", tt.in, got)
				}
				if got.IsValid() {
					t.Fatalf("ParseAddr(%q) = %v with ok false; want the zero Addr", tt.in, got)
				}
				return
			}
			if want := netip.MustParseAddr(tt.want); !ok || got != want {
				t.Fatalf("ParseAddr(%q) = %v, %v; want %v, true", tt.in, got, ok, want)
			}
		})
	}
}

func TestParseNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // "" when ok must be false
	}{
		{"192.0.2.43", "192.0.2.43"},
		{"192.0.2.43:8080", "192.0.2.43"},
		{"192.0.2.43:_abc-1.x", "192.0.2.43"},
		{"[2001:db8:cafe::17]", "2001:db8:cafe::17"},
		{"[2001:db8:cafe::17]:4711", "2001:db8:cafe::17"},
		{"[2001:db8:cafe::17]:_gazonk", "2001:db8:cafe::17"},
		{"[::ffff:192.0.2.1]", "192.0.2.1"},
		{"2001:db8:cafe::17", ""}, // IPv6 must be bracketed
		{"unknown", ""},
		{"_hidden", ""},
		{"_SEVKISEK", ""},
		{"192.0.2.43:_", ""},
		{"192.0.2.43:_a b", ""},
		{" 192.0.2.43", ""},
		{"[192.0.2.43]", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := parseNode([]byte(tt.in))
		if tt.want == "" {
			if ok {
				t.Errorf("parseNode(%q) = %v, true; want ok false", tt.in, got)
			}
			continue
		}
		if want := netip.MustParseAddr(tt.want); !ok || got != want {
			t.Errorf("parseNode(%q) = %v, %v; want %v, true", tt.in, got, ok, want)
		}
	}
}
