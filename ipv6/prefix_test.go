package ipv6

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		addr           string
		v4bits, v6bits int
		want           string
	}{
		{"ipv4 default /32", "192.0.2.77", 32, 64, "192.0.2.77/32"},
		{"ipv6 default /64", "2001:db8:1:2:3:4:5:6", 32, 64, "2001:db8:1:2::/64"},
		{"ipv4 /24", "192.0.2.77", 24, 64, "192.0.2.0/24"},
		{"ipv6 /48", "2001:db8:1:2:3:4:5:6", 32, 48, "2001:db8:1::/48"},
		{"ipv6 /56 mid-group", "2001:db8:1:2ff::1", 32, 56, "2001:db8:1:200::/56"},
		{"mapped uses ipv4 bits", "::ffff:192.0.2.77", 24, 64, "192.0.2.0/24"},
		{"zone dropped", "fe80::1:2:3:4%eth0", 32, 64, "fe80::/64"},
		{"ipv4 /0", "192.0.2.77", 0, 64, "0.0.0.0/0"},
		{"ipv6 /128", "2001:db8::1", 32, 128, "2001:db8::1/128"},
		{"ipv4 bits clamped high", "192.0.2.77", 40, 64, "192.0.2.77/32"},
		{"ipv4 bits clamped low", "192.0.2.77", -1, 64, "0.0.0.0/0"},
		{"ipv6 bits clamped high", "2001:db8::1", 32, 200, "2001:db8::1/128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Prefix(netip.MustParseAddr(tt.addr), tt.v4bits, tt.v6bits)
			if want := netip.MustParsePrefix(tt.want); got != want {
				t.Fatalf("Prefix(%s, %d, %d) = %v, want %v", tt.addr, tt.v4bits, tt.v6bits, got, want)
			}
		})
	}
	if got := Prefix(netip.Addr{}, 32, 64); got.IsValid() {
		t.Errorf("Prefix(zero Addr) = %v, want the invalid Prefix", got)
	}
}

func TestAppendKey(t *testing.T) {
	t.Parallel()
	key := func(a string, v4, v6 int) []byte {
		return AppendKey(nil, netip.MustParseAddr(a), v4, v6)
	}
	tests := []struct {
		name string
		a, b []byte
		same bool
	}{
		{"same /64", key("2001:db8:0:1::1", 32, 64), key("2001:db8:0:1:ffff::2", 32, 64), true},
		{"different /64", key("2001:db8:0:1::1", 32, 64), key("2001:db8:0:2::1", 32, 64), false},
		{"same /48", key("2001:db8:0:1::1", 32, 48), key("2001:db8:0:2::1", 32, 48), true},
		{"same /32", key("192.0.2.1", 32, 64), key("192.0.2.1", 32, 64), true},
		{"different /32", key("192.0.2.1", 32, 64), key("192.0.2.2", 32, 64), false},
		{"same /24", key("192.0.2.1", 24, 64), key("192.0.2.254", 24, 64), true},
		{"mapped equals ipv4", key("::ffff:192.0.2.1", 32, 64), key("192.0.2.1", 32, 64), true},
		{"zone ignored", key("fe80::1%eth0", 32, 64), key("fe80::1%eth1", 32, 64), true},
		{"length is part of the key", key("10.0.0.0", 8, 64), key("10.0.0.0", 16, 64), false},
		{"family is part of the key", key("10.0.0.0", 8, 8), key("a00::", 8, 8), false},
		{"ipv4 is not its mapped ipv6", key("0.0.0.0", 0, 0), key("::", 0, 0), false},
	}
	for _, tt := range tests {
		if got := bytes.Equal(tt.a, tt.b); got != tt.same {
			t.Errorf("%s: keys %x and %x: got equal %v, want %v", tt.name, tt.a, tt.b, got, tt.same)
		}
		if len(tt.a) != KeyLen || len(tt.b) != KeyLen {
			t.Errorf("%s: got key lengths %d and %d, want %d", tt.name, len(tt.a), len(tt.b), KeyLen)
		}
	}
	want := []byte{4, 24, 192, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := key("192.0.2.99", 24, 64); !bytes.Equal(got, want) {
		t.Errorf("AppendKey(192.0.2.99, /24) = %v, want %v", got, want)
	}
	want = []byte{6, 64, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := key("2001:db8:1:2:aaaa:bbbb:cccc:dddd", 32, 64); !bytes.Equal(got, want) {
		t.Errorf("AppendKey(2001:db8:1:2:aaaa:bbbb:cccc:dddd, /64) = %v, want %v", got, want)
	}
	if got := AppendKey([]byte("x"), netip.Addr{}, 32, 64); !bytes.Equal(got, append([]byte("x"), make([]byte, KeyLen)...)) {
		t.Errorf("AppendKey(zero Addr) = %v, want x and %d zero bytes", got, KeyLen)
	}
}
