//go:build !race

package ipv6

import (
	"net/netip"
	"testing"
)

// The race detector's instrumentation allocates, so this guard only runs
// without it (as fasthttp's allocation_test.go does).
func TestNoAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	garbage := [][]byte{[]byte("garbage, 10.0.0.2")}
	tests := []struct {
		name string
		fn   func()
	}{
		{"ParseAddr ipv4", func() { ParseAddr([]byte("203.0.113.7")) }},
		{"ParseAddr ipv6 zone", func() { ParseAddr([]byte("[fe80::1%eth0]:80")) }},
		{"ParseAddr garbage", func() { ParseAddr([]byte("unknown")) }},
		{"Prefix", func() { Prefix(netip.MustParseAddr("2001:db8::1"), 32, 64) }},
		{"AppendKey", func() { dst = AppendKey(dst[:0], netip.MustParseAddr("2001:db8::1"), 32, 64) }},
	}
	nat := New(Options{NAT64: testNAT64})
	for _, a := range []string{"2002:c633:6401::1", "2001:dbc:1:2:c6:3364:700:0", "2001:db8::1"} {
		addr := netip.MustParseAddr(a)
		tests = append(tests, struct {
			name string
			fn   func()
		}{"Counted " + a, func() { nat.Counted(addr) }})
	}
	for _, bc := range benchCases {
		e := NewExtractor(testTrusted, bc.kind)
		tests = append(tests,
			struct {
				name string
				fn   func()
			}{"Client " + bc.name, func() { e.Client(bc.peer, bc.values) }},
			struct {
				name string
				fn   func()
			}{"Client fallback " + bc.name, func() { e.Client(bc.peer, garbage) }},
			struct {
				name string
				fn   func()
			}{"AppendForwardedFor " + bc.name, func() { dst = e.AppendForwardedFor(dst[:0], bc.peer, bc.values) }},
			struct {
				name string
				fn   func()
			}{"ClientAndForwardedFor " + bc.name, func() { _, dst = e.ClientAndForwardedFor(dst[:0], bc.peer, bc.values) }},
		)
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.fn); got != 0 {
			t.Errorf("%s: got %v allocs per run, want 0", tt.name, got)
		}
	}
}
