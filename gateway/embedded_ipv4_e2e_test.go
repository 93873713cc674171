package gateway

import (
	"fmt"
	"testing"
	"time"
)

// Issue 9, bypass 4: IPv6 addresses that embed an IPv4 address (6to4,
// NAT64, Teredo, IPv4-compatible) count as that IPv4
// (docs/client-address.md), through the real server on loopback with the
// shipped policies.hcl in front of the demo origin. Loopback is a trusted
// proxy there, so X-Forwarded-For names the client.

// shippedNAT64 is the shipped policy with two local NAT64 prefixes listed.
var shippedNAT64 = []string{
	`forwarded_header = "x-forwarded-for"`,
	`forwarded_header = "x-forwarded-for"
  nat64_prefixes = ["2001:db8:64::/96", "2001:db8:122::/48"]`,
}

// embeddedForms spell the IPv4 host 198.51.100.i (c6.33.64.i) in every IPv6
// form that embeds it. Where a form has bits the IPv4 does not fill (the
// 6to4 site's subnet and host, Teredo's server, flags and port, a NAT64
// suffix) the spelling varies them with i, as an attacker would.
var embeddedForms = []struct {
	name string
	addr func(i int) string
}{
	// RFC 3056: 2002:V4ADDR::/48, each IPv4 host's own /48.
	{"6to4 as in the issue", func(i int) string { return fmt.Sprintf("2002:c633:64%02x::1", i) }},
	{"6to4 subnets and hosts", func(i int) string { return fmt.Sprintf("2002:c633:64%02x:%x::%x", i, i*977&0xffff, i*31) }},
	// RFC 6052 §2.4: the well-known prefix 64:ff9b::/96.
	{"NAT64 well-known prefix", func(i int) string { return fmt.Sprintf("64:ff9b::198.51.100.%d", i) }},
	// RFC 4380 §4: 2001:0:SERVER:FLAGS:PORT:CLIENT, port and client
	// inverted; the server and port vary, the client is 198.51.100.i.
	{"Teredo", func(i int) string {
		return fmt.Sprintf("2001:0:%x:e378:8000:%x:39cc:9b%02x", 0x4136+i, 0xffff^(1024+i), 0xff^i)
	}},
	// RFC 4291 §2.5.5.1 (deprecated): ::a.b.c.d.
	{"IPv4-compatible", func(i int) string { return fmt.Sprintf("::198.51.100.%d", i) }},
	// RFC 6052 §2.2 with the policy's local prefixes: a /96 puts the IPv4
	// in the last 32 bits; a /48 in bits 48-63 and 72-87, around the u
	// octet (bits 64-71), the suffix after it varied.
	{"local NAT64 /96", func(i int) string { return fmt.Sprintf("2001:db8:64::198.51.100.%d", i) }},
	{"local NAT64 /48", func(i int) string { return fmt.Sprintf("2001:db8:122:c633:64:%02x00:%x:1", i, i) }},
}

// TestEmbeddedIPv4GetsTheIPv4Budget: 30 signups from 30 hosts of one IPv4
// /24, each spelled in an embedding IPv6 form, get the /24's budget of 10
// (signup-per-network: ipv4_prefix = 24), as the same hosts sending IPv4
// would. Before the fix each 6to4 host had its own /48: 30 passed.
func TestEmbeddedIPv4GetsTheIPv4Budget(t *testing.T) {
	for _, form := range embeddedForms {
		t.Run(form.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			n := startNode(t, loadPolicy(t, "policies.hcl", shippedNAT64...), nodeOptions{clock: clk})
			passed := 0
			for i := 1; i <= 30; i++ {
				r := do(t, "POST", "http://"+n.addr+"/signup", fmt.Sprintf(`{"email":"user%d@example.com"}`, i), "X-Forwarded-For", form.addr(i))
				switch r.status {
				case 200:
					passed++
				case 429:
				default:
					t.Fatalf("signup from %s: got %d, want 200 or 429", form.addr(i), r.status)
				}
			}
			if passed != 10 {
				t.Errorf("got %d of 30 signups from one IPv4 /24 through the origin, want 10 (the /24's limit)", passed)
			}
			if got := n.hits(t)["/signup"]; got != 10 {
				t.Errorf("origin got %d signups, want 10", got)
			}
		})
	}
}

// TestEmbeddedIPv4SharesTheNativeIPv4Bucket spends a /24's signups over
// IPv4 and then tries the same /24 in every embedding form: all are
// refused. Controls: another /24 in 6to4 form, and a 6to4 address that
// embeds a private IPv4 (not a 6to4 address any relay could carry, so it
// counts as the IPv6 address it is), still pass. The origin's
// X-Forwarded-For names the address the client actually used.
func TestEmbeddedIPv4SharesTheNativeIPv4Bucket(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startNode(t, loadPolicy(t, "policies.hcl", shippedNAT64...), nodeOptions{clock: clk})
	sent := 0
	signup := func(from string) int {
		t.Helper()
		sent++ // a new email each time: signup-per-email is not what this test is about
		return do(t, "POST", "http://"+n.addr+"/signup", fmt.Sprintf(`{"email":"user%d@example.com"}`, sent), "X-Forwarded-For", from).status
	}
	for i := 1; i <= 10; i++ {
		if st := signup(fmt.Sprintf("198.51.100.%d", 200+i)); st != 200 {
			t.Fatalf("IPv4 signup %d: got %d, want 200", i, st)
		}
	}
	for i, form := range embeddedForms {
		if addr := form.addr(100 + i); signup(addr) != 429 {
			t.Errorf("%s %s after the /24's IPv4 budget is spent: got a pass, want 429", form.name, addr)
		}
	}
	for _, tt := range []struct{ name, addr string }{
		{"another /24 in 6to4 form", "2002:c633:6501::1"},
		{"6to4 embedding a private IPv4", "2002:a00:1::1"},
	} {
		if st := signup(tt.addr); st != 200 {
			t.Errorf("%s %s: got %d, want 200", tt.name, tt.addr, st)
		}
		if got, want := n.last(t).Headers["X-Forwarded-For"], tt.addr+", 127.0.0.1"; got != want {
			t.Errorf("%s: origin X-Forwarded-For %q, want %q (the address as sent)", tt.name, got, want)
		}
	}
}

// TestEmbeddedIPv4DecisionPathAllocatesNothing: counting a 6to4, NAT64 or
// Teredo client as its IPv4 address adds no allocation to the decision
// path (TestDecisionPathAllocatesNothing's setup).
func TestEmbeddedIPv4DecisionPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	for _, xff := range []string{
		"2002:c633:6409::1, 10.0.0.2",
		"64:ff9b::198.51.100.9, 10.0.0.2",
		"2001:0:4136:e378:8000:63bf:39cc:9bf6, 10.0.0.2",
	} {
		bs := newBenchSetup(t, "10.1.2.3", xff)
		if got := bs.rs.req.Client.String(); got != "198.51.100.9" {
			t.Fatalf("%s: client %s, want 198.51.100.9", xff, got)
		}
		if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
			t.Errorf("%s: decision path allocates %.1f times per request, want 0", xff, n)
		}
	}
}
