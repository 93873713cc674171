package ipv6

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// This file decides when an IPv6 address stands for an IPv4 host, so that
// one IPv4 host (or network) gets one budget however its address is
// spelled. docs/client-address.md gives the reasons for each choice.
//
// An address embeds an IPv4 address when it lies in one of these prefixes:
//
//   - 2002::/16, 6to4 (RFC 3056 §2): 2002:V4ADDR::/48 is the site of the
//     IPv4 host V4ADDR, in bits 16-47;
//   - 2001::/32, Teredo (RFC 4380 §4): the client's public (mapped) IPv4
//     address is the last 32 bits, inverted; the server, flags and port
//     bits are ignored;
//   - 64:ff9b::/96, the NAT64 well-known prefix (RFC 6052 §2.1): the IPv4
//     address is the last 32 bits;
//   - ::/96, IPv4-compatible (RFC 4291 §2.5.5.1, deprecated): the IPv4
//     address is the last 32 bits;
//   - a local NAT64 prefix the policy lists (nat64_prefixes, RFC 6052 §2.2):
//     the IPv4 address is the 32 bits after the prefix, skipping bits 64-71
//     (the "u" octet).
//
// In the four built-in forms the IPv4 address must be one a real
// mechanism could have put there, a global unicast address (globalIPv4);
// otherwise the address is an ordinary IPv6 address. So "::" and "::1"
// stay the IPv6 unspecified and loopback addresses, not 0.0.0.0 and
// 0.0.0.1, and 2002:7f00:1:: is not 127.0.0.1. A listed local prefix
// embeds any IPv4 address: RFC 6052 §3.1 allows a network-specific prefix
// to carry non-global ones.
//
// The u octet and the suffix (RFC 6052 §2.2: zero, but not checked here),
// Teredo's server, flags and port, and a 6to4 site's subnet and interface
// bits never change the IPv4 address an address counts as: they are the
// bits an attacker could vary to mint fresh keys.

// nat64Lengths are the prefix lengths RFC 6052 §2.2 defines.
var nat64Lengths = [...]int{32, 40, 48, 56, 64, 96}

// nat64 is a local NAT64 prefix as 128-bit numbers: an address x is in it
// when x & mask == prefix.
type nat64 struct {
	prefix, mask u128
	bits         int
}

// Errors of CheckNAT64Prefix, matched with errors.Is.
var (
	ErrNAT64NotIPv6 = errors.New("not an IPv6 prefix (IPv4 and IPv4-mapped prefixes embed nothing)")
	ErrNAT64Length  = errors.New("a NAT64 prefix is a /32, /40, /48, /56, /64 or /96 (RFC 6052 §2.2)")
	ErrNAT64Builtin = errors.New("overlaps a prefix whose embedded IPv4 address is built in")
)

// builtinEmbedding are the prefixes whose embedded IPv4 address the package
// knows without configuration; a local NAT64 prefix may not overlap them.
// (IPv4-mapped ::ffff:0:0/96 is refused as not IPv6.)
var builtinEmbedding = [...]struct {
	prefix netip.Prefix
	name   string
}{
	{netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x02}), 16), "6to4, RFC 3056"},
	{netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01}), 32), "Teredo, RFC 4380"},
	{netip.PrefixFrom(netip.AddrFrom16([16]byte{0x00, 0x64, 0xff, 0x9b}), 96), "the NAT64 well-known prefix, RFC 6052"},
	{netip.PrefixFrom(netip.IPv6Unspecified(), 96), "IPv4-compatible, RFC 4291"},
}

// CheckNAT64Prefix reports whether p can be a local NAT64 prefix: an IPv6
// (not IPv4-mapped) prefix of one of the lengths of RFC 6052 §2.2 that does
// not overlap a prefix with a built-in embedding. Host bits are allowed
// (they are masked). The error wraps ErrNAT64NotIPv6, ErrNAT64Length or
// ErrNAT64Builtin; the last names the built-in prefix.
func CheckNAT64Prefix(p netip.Prefix) error {
	p = p.Masked()
	if a := p.Addr(); !p.IsValid() || !a.Is6() || a.Is4In6() {
		return ErrNAT64NotIPv6
	}
	if !slices.Contains(nat64Lengths[:], p.Bits()) {
		return ErrNAT64Length
	}
	for _, b := range builtinEmbedding {
		if p.Overlaps(b.prefix) {
			return fmt.Errorf("%w: %s (%s)", ErrNAT64Builtin, b.prefix, b.name)
		}
	}
	return nil
}

// newNAT64 compiles the valid prefixes among ps, longest first, so that the
// most specific one decides should two overlap (the policy's compiler
// refuses that).
func newNAT64(ps []netip.Prefix) []nat64 {
	var out []nat64
	for _, p := range ps {
		if CheckNAT64Prefix(p) != nil {
			continue
		}
		var m u128
		switch bits := p.Bits(); {
		case bits <= 64:
			m.hi = ^(^uint64(0) >> bits)
		default:
			m.hi, m.lo = ^uint64(0), ^(^uint64(0) >> (bits - 64))
		}
		out = append(out, nat64{prefix: u128of(p.Masked().Addr()), mask: m, bits: p.Bits()})
	}
	slices.SortStableFunc(out, func(a, b nat64) int { return b.bits - a.bits })
	return slices.Clip(out)
}

// EmbeddedIPv4 returns the IPv4 address that a stands for when a is an IPv6
// address embedding one (see the list at the top of this file: 6to4, Teredo,
// the NAT64 well-known prefix, IPv4-compatible, and the Extractor's local
// NAT64 prefixes) or is IPv4-mapped. ok is false, and v4 the zero Addr, for
// an IPv4 address, the zero Addr and any other IPv6 address. The zone is
// ignored. It does not allocate.
func (e *Extractor) EmbeddedIPv4(a netip.Addr) (v4 netip.Addr, ok bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	if a.Is4In6() {
		return a.Unmap(), true
	}
	b := a.As16()
	x := u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	var ip uint32
	switch {
	case x.hi>>48 == 0x2002: // 6to4: 2002:V4ADDR::/48
		ip = uint32(x.hi >> 16)
	case x.hi>>32 == 0x2001_0000: // Teredo: the client, inverted
		ip = ^uint32(x.lo)
	case x.hi == 0x0064_ff9b_0000_0000 && x.lo>>32 == 0: // 64:ff9b::/96
		ip = uint32(x.lo)
	case x.hi == 0 && x.lo>>32 == 0: // ::a.b.c.d
		ip = uint32(x.lo)
	default:
		if e == nil {
			return netip.Addr{}, false
		}
		for i := range e.nat64 {
			n := &e.nat64[i]
			if x.hi&n.mask.hi == n.prefix.hi && x.lo&n.mask.lo == n.prefix.lo {
				return netip.AddrFrom4(nat64IPv4(&b, n.bits)), true
			}
		}
		return netip.Addr{}, false
	}
	if !globalIPv4(ip) {
		return netip.Addr{}, false
	}
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], ip)
	return netip.AddrFrom4(v), true
}

// nat64IPv4 reads the IPv4 address RFC 6052 §2.2 places after a prefix of
// bits (32, 40, 48, 56, 64 or 96) bits: the four bytes from bit bits on,
// skipping byte 8 (bits 64-71, the u octet).
func nat64IPv4(b *[16]byte, bits int) (v [4]byte) {
	j := bits / 8
	for i := range v {
		if j == 8 {
			j++
		}
		v[i] = b[j]
		j++
	}
	return v
}

// Counted returns the address a counts as for keys: the IPv4 address it
// embeds (EmbeddedIPv4), or a itself unmapped and without its zone.
func (e *Extractor) Counted(a netip.Addr) netip.Addr {
	if v4, ok := e.EmbeddedIPv4(a); ok {
		return v4
	}
	return a.Unmap().WithZone("")
}

// globalIPv4 reports whether ip may be the IPv4 address of a 6to4 site
// (RFC 3056 §2 asks for a globally unique one), a Teredo client's public
// mapping, or a host behind the NAT64 well-known prefix (RFC 6052 §3.1
// forbids non-global addresses there): every unicast address but those
// that are never global by IANA's special-purpose registry (RFC 6890)
// because they are local by construction. The documentation (192.0.2.0/24,
// 198.51.100.0/24, 203.0.113.0/24) and benchmarking (198.18.0.0/15)
// networks count as global: they stand for global addresses in examples and
// tests, and counting them as their IPv4 costs nothing.
func globalIPv4(ip uint32) bool {
	switch {
	case ip>>24 == 0, // 0.0.0.0/8, "this network" (RFC 791)
		ip>>24 == 10,      // 10.0.0.0/8, private (RFC 1918)
		ip>>22 == 0x191,   // 100.64.0.0/10, shared (RFC 6598): 100<<2 | 64>>6
		ip>>24 == 127,     // 127.0.0.0/8, loopback (RFC 1122)
		ip>>16 == 0xa9fe,  // 169.254.0.0/16, link local (RFC 3927)
		ip>>20 == 0xac1,   // 172.16.0.0/12, private (RFC 1918)
		ip>>8 == 0xc00000, // 192.0.0.0/24, IETF protocol assignments (RFC 6890)
		ip>>16 == 0xc0a8,  // 192.168.0.0/16, private (RFC 1918)
		ip>>28 == 0xe,     // 224.0.0.0/4, multicast (RFC 5771)
		ip>>28 == 0xf:     // 240.0.0.0/4, reserved, and the broadcast address (RFC 1112, RFC 919)
		return false
	}
	return true
}
