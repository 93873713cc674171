package route

import (
	"bytes"

	"github.com/edge-gateway/edge/ipv6"
)

// maxHostNameLen is the longest host name AppendHost accepts, in bytes: a
// DNS name's 253 characters without the trailing dot (RFC 1035 §2.3.4).
const maxHostNameLen = 253

// AppendHost reads h, the host a request names, and appends its one
// spelling for matching to name and for forwarding to authority
// (docs/host-and-path.md §1). h is "host" or "host:port", as fasthttp's
// URI().Host() gives it: the absolute-form target's authority, which
// replaces Host (RFC 9112 §3.2.2), or else the Host header, without
// userinfo. The same function normalises a policy's hosts.
//
// name is what a rule's hosts are compared with: lower case, without a port
// or a trailing dot; an IPv6 literal in its canonical text (RFC 5952)
// without brackets, an IPv4-mapped one as its IPv4 address. authority is
// the Host the origin receives: name (an IPv6 literal in brackets), then
// ":port" in decimal without leading zeros if h had a non-empty port.
//
// ok is false, with name and authority returned unchanged, for a host an
// origin could read another way, which the edge refuses with 400:
//
//   - a name other than labels of ASCII letters, digits, '-' and '_'
//     separated by single dots, at most 63 bytes each and 253 in all, with
//     at most one trailing dot: so no percent-escape, non-ASCII byte
//     (IDNA maps "ｌogin" to "login"), comma, empty label or '@';
//   - a name whose last label is a number ("127.1", "0x7f.0.0.1",
//     "2130706433"), which URL parsers read as an IPv4 address (WHATWG URL
//     "ends in a number"), unless it is a dotted quad as netip spells it
//     (no leading zeros);
//   - an IPv6 literal that does not parse, has a zone ("%25eth0": local to
//     the client, meaningless to the origin) or holds an IPv4 dotted quad
//     alone ("[127.0.0.1]");
//   - a port that is not decimal digits or exceeds 65535.
//
// AppendHost does not allocate when name and authority have room for h
// plus 2 bytes.
func AppendHost(authority, name, h []byte) (a, n []byte, ok bool) {
	a0, n0 := len(authority), len(name)
	fail := func() ([]byte, []byte, bool) { return authority[:a0], name[:n0], false }

	host, port, hasPort := h, []byte(nil), false
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 {
			return fail()
		}
		host = h[1:end]
		if rest := h[end+1:]; len(rest) > 0 {
			if rest[0] != ':' {
				return fail()
			}
			port, hasPort = rest[1:], true
		}
		if !ipv6Literal(host) {
			return fail()
		}
		addr, valid := ipv6.ParseAddr(host)
		if !valid {
			return fail()
		}
		name = addr.AppendTo(name)
		if addr.Is4() {
			authority = addr.AppendTo(authority)
		} else {
			authority = append(authority, '[')
			authority = addr.AppendTo(authority)
			authority = append(authority, ']')
		}
	} else {
		if i := bytes.LastIndexByte(h, ':'); i >= 0 {
			host, port, hasPort = h[:i], h[i+1:], true
		}
		if len(host) > 0 && host[len(host)-1] == '.' {
			host = host[:len(host)-1]
		}
		if !regName(host) {
			return fail()
		}
		if endsInNumber(host) {
			if addr, valid := ipv6.ParseAddr(host); !valid || !addr.Is4() {
				return fail()
			}
		}
		start := len(name)
		for _, c := range host {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			name = append(name, c)
		}
		authority = append(authority, name[start:]...)
	}
	if hasPort && len(port) > 0 {
		for len(port) > 1 && port[0] == '0' {
			port = port[1:]
		}
		v := 0
		for _, c := range port {
			if c < '0' || c > '9' {
				return fail()
			}
			if v = v*10 + int(c-'0'); v > 65535 {
				return fail()
			}
		}
		authority = append(authority, ':')
		authority = append(authority, port...)
	}
	return authority, name, true
}

// ipv6Literal reports whether b has only the bytes of IPv6 text (hex
// digits, ':' and the '.' of an embedded IPv4 tail) and at least one ':'.
func ipv6Literal(b []byte) bool {
	colon := false
	for _, c := range b {
		switch {
		case c == ':':
			colon = true
		case c == '.', '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return colon
}

// regName reports whether b is 1 to 63-byte labels of ASCII letters,
// digits, '-' and '_' separated by single dots, 253 bytes at most.
func regName(b []byte) bool {
	if len(b) == 0 || len(b) > maxHostNameLen {
		return false
	}
	label := 0
	for _, c := range b {
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
		if label++; label > 63 {
			return false
		}
	}
	return label > 0
}

// endsInNumber reports whether the last label of a host name is a number as
// the WHATWG URL Standard's host parser reads one (decimal digits, or "0x"
// and hex digits), making the whole name an IPv4 address to it.
func endsInNumber(b []byte) bool {
	last := b[bytes.LastIndexByte(b, '.')+1:]
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		for _, c := range last[2:] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(last) > 0
}
