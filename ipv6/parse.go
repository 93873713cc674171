package ipv6

import (
	"bytes"
	"net/netip"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// maxAddrLen caps the bytes ParseAddr and the Forwarded node parser look at.
// The longest address with a port,
// "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535", is 53 bytes; the
// rest leaves room for surrounding whitespace and a short zone.
const maxAddrLen = 96

// ParseAddr parses one textual address from b without allocating. It accepts
// an IPv4 dotted quad and any IPv6 form netip.ParseAddr accepts (including an
// embedded IPv4 tail), optionally in brackets ("[2001:db8::1]"), optionally
// followed by a port ("192.0.2.1:5678", "[::1]:80"), with surrounding spaces
// and tabs. An IPv6 address takes a port only in brackets (a bare
// "2001:db8::1:80" is the address 2001:db8::1:80), and may be IPv4-mapped
// there; a plain IPv4 address may not be bracketed. A port is 1 or more
// decimal digits with a value of at most 65535.
//
// The result is unmapped (::ffff:192.0.2.1 becomes 192.0.2.1) and has no
// zone: a zone ("fe80::1%eth0") is accepted only if it is non-empty printable
// ASCII without brackets, and is then dropped.
//
// ok is false for anything else: empty input, garbage, "unknown", an
// obfuscated identifier such as "_hidden", and input longer than 96 bytes.
func ParseAddr(b []byte) (a netip.Addr, ok bool) {
	if len(b) > maxAddrLen {
		return netip.Addr{}, false
	}
	b = httpsyntax.TrimOWS(b)
	if len(b) == 0 {
		return netip.Addr{}, false
	}
	if b[0] == '[' {
		return parseBracketed(b, false)
	}
	// As netip.ParseAddr does, the first '.' or ':' decides the family.
	for _, c := range b {
		switch c {
		case '.':
			return parseIPv4Port(b, false)
		case ':':
			return parseIPv6Zone(b)
		case '%':
			return netip.Addr{}, false
		}
	}
	return netip.Addr{}, false
}

// parseNode parses an RFC 7239 node (section 6) without its "unknown" and
// obfuscated forms, which are not addresses: an IPv4 address or a bracketed
// IPv6 address, either optionally followed by ":" and a numeric or
// obfuscated ("_" 1*(ALPHA / DIGIT / "." / "_" / "-")) port. Unlike
// ParseAddr it allows no surrounding whitespace and no bare IPv6 address.
func parseNode(b []byte) (netip.Addr, bool) {
	if len(b) == 0 || len(b) > maxAddrLen {
		return netip.Addr{}, false
	}
	if b[0] == '[' {
		return parseBracketed(b, true)
	}
	return parseIPv4Port(b, true)
}

// parseBracketed parses "[IPv6]" or "[IPv6]:port"; b[0] is '['.
func parseBracketed(b []byte, obfPort bool) (netip.Addr, bool) {
	end := bytes.IndexByte(b, ']')
	if end < 0 {
		return netip.Addr{}, false
	}
	if rest := b[end+1:]; len(rest) > 0 {
		if rest[0] != ':' || !validPort(rest[1:], obfPort) {
			return netip.Addr{}, false
		}
	}
	// The content must be IPv6 text: parseIPv6 rejects a plain "1.2.3.4",
	// since an embedded IPv4 tail must follow six groups or a "::".
	return parseIPv6Zone(b[1:end])
}

// parseIPv4Port parses "a.b.c.d" or "a.b.c.d:port".
func parseIPv4Port(b []byte, obfPort bool) (netip.Addr, bool) {
	ip, n, ok := parseIPv4Prefix(b)
	if !ok || n < len(b) && (b[n] != ':' || !validPort(b[n+1:], obfPort)) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(ip), true
}

// parseIPv6Zone parses an IPv6 address with an optional zone, drops the zone
// and unmaps the result.
func parseIPv6Zone(b []byte) (netip.Addr, bool) {
	if i := bytes.IndexByte(b, '%'); i >= 0 {
		if !validZone(b[i+1:]) {
			return netip.Addr{}, false
		}
		b = b[:i]
	}
	ip, ok := parseIPv6(b)
	if !ok {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16(ip).Unmap(), true
}

// parseIPv4 parses a dotted quad exactly as netip.ParseAddr does: four
// decimal fields of at most 255 with no leading zeros.
func parseIPv4(b []byte) (ip [4]byte, ok bool) {
	ip, n, ok := parseIPv4Prefix(b)
	return ip, ok && n == len(b)
}

// parseIPv4Prefix parses the dotted quad at the start of b, up to the first
// byte that is neither a digit nor a '.', and returns its length n.
func parseIPv4Prefix(b []byte) (ip [4]byte, n int, ok bool) {
	field, val, digits := 0, 0, 0
	for ; n < len(b); n++ {
		c := b[n]
		if '0' <= c && c <= '9' {
			if digits == 1 && val == 0 {
				return ip, n, false // a leading zero reads as octal elsewhere
			}
			val = val*10 + int(c-'0')
			digits++
			if val > 255 {
				return ip, n, false
			}
		} else if c == '.' {
			if digits == 0 || field == 3 {
				return ip, n, false
			}
			ip[field] = byte(val)
			field, val, digits = field+1, 0, 0
		} else {
			break
		}
	}
	if field != 3 || digits == 0 {
		return ip, n, false
	}
	ip[3] = byte(val)
	return ip, n, true
}

// parseIPv6 parses an IPv6 address without a zone. It follows netip's
// parseIPv6 step for step, on bytes, so it accepts exactly what
// netip.ParseAddr accepts (FuzzParseAddr checks this).
func parseIPv6(s []byte) (ip [16]byte, ok bool) {
	ellipsis := -1 // position of the "::" in ip
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		s = s[2:]
		if len(s) == 0 {
			return ip, true
		}
	}
	i := 0
	for i < 16 {
		off, acc := 0, uint32(0)
		for ; off < len(s); off++ {
			c := s[off]
			if '0' <= c && c <= '9' {
				acc = acc<<4 | uint32(c-'0')
			} else if c |= 0x20; 'a' <= c && c <= 'f' {
				acc = acc<<4 | uint32(c-'a'+10)
			} else {
				break
			}
			if off == 4 {
				return ip, false // more than 4 digits in a group
			}
		}
		if off == 0 {
			return ip, false
		}
		if off < len(s) && s[off] == '.' {
			// An embedded IPv4 tail must replace the last two groups.
			if ellipsis < 0 && i != 12 || i+4 > 16 {
				return ip, false
			}
			v4, ok := parseIPv4(s)
			if !ok {
				return ip, false
			}
			copy(ip[i:], v4[:])
			i += 4
			s = nil
			break
		}
		ip[i], ip[i+1] = byte(acc>>8), byte(acc)
		i += 2
		s = s[off:]
		if len(s) == 0 {
			break
		}
		if s[0] != ':' || len(s) == 1 {
			return ip, false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return ip, false // a second "::"
			}
			ellipsis = i
			s = s[1:]
			if len(s) == 0 {
				break
			}
		}
	}
	if len(s) != 0 {
		return ip, false
	}
	if i < 16 {
		if ellipsis < 0 {
			return ip, false
		}
		n := 16 - i
		for j := i - 1; j >= ellipsis; j-- {
			ip[j+n] = ip[j]
		}
		clear(ip[ellipsis : ellipsis+n])
	} else if ellipsis >= 0 {
		return ip, false // "::" must stand for at least one group
	}
	return ip, true
}

// validZone reports whether z is an acceptable IPv6 zone: non-empty visible
// ASCII without brackets (a bracket would make "[fe80::1%a]b]" ambiguous).
func validZone(z []byte) bool {
	if len(z) == 0 {
		return false
	}
	for _, c := range z {
		if c < 0x21 || c > 0x7e || c == '[' || c == ']' {
			return false
		}
	}
	return true
}

// validPort reports whether p is a decimal port of at most 65535 or, when
// obf is set, an RFC 7239 obfuscated port.
func validPort(p []byte, obf bool) bool {
	if len(p) == 0 {
		return false
	}
	if obf && p[0] == '_' {
		return validObfuscated(p)
	}
	v := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		if v = v*10 + int(c-'0'); v > 65535 {
			return false
		}
	}
	return true
}

// validObfuscated reports whether s is an RFC 7239 obfuscated identifier:
// "_" 1*(ALPHA / DIGIT / "." / "_" / "-").
func validObfuscated(s []byte) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for _, c := range s[1:] {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
