package ipv6

import "net/netip"

// KeyLen is the number of bytes AppendKey appends.
const KeyLen = 18

// Prefix returns the prefix of a that a client key stands for: a unmapped
// and masked to v4bits if it is IPv4, to v6bits if it is IPv6 (the zone
// dropped). Bits are clamped to [0, 32] and [0, 128]; the policy's compiler
// rejects other values before they get here. The zero Addr gives the zero
// (invalid) Prefix.
func Prefix(a netip.Addr, v4bits, v6bits int) netip.Prefix {
	a = a.Unmap()
	var bits int
	switch {
	case a.Is4():
		bits = min(max(v4bits, 0), 32)
	case a.Is6():
		bits = min(max(v6bits, 0), 128)
	default:
		return netip.Prefix{}
	}
	p, _ := a.Prefix(bits) // cannot fail: a is valid and bits in range
	return p
}

// AppendKey appends KeyLen bytes that identify Prefix(a, v4bits, v6bits):
// the family (4 or 6), the prefix length, then the masked address, IPv4 in
// the first 4 of 16 bytes and zeros after it. Two addresses get the same
// bytes exactly when they share that prefix, and a key never reads as one of
// another family or length. The zero Addr appends KeyLen zero bytes, which no
// valid address produces.
func AppendKey(dst []byte, a netip.Addr, v4bits, v6bits int) []byte {
	var k [KeyLen]byte
	p := Prefix(a, v4bits, v6bits)
	switch m := p.Addr(); {
	case m.Is4():
		k[0] = 4
		b := m.As4()
		copy(k[2:], b[:])
	case m.Is6():
		k[0] = 6
		b := m.As16()
		copy(k[2:], b[:])
	}
	k[1] = byte(max(p.Bits(), 0))
	return append(dst, k[:]...)
}
