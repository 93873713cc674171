package ipv6

import (
	"net/netip"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// RFC 7239 section 4:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// A quoted string may hold commas and semicolons, so elements are found by a
// quote-aware scan. Client reads elements from the right, where the trusted
// proxies wrote, and never parses the client-written part to their left: a
// client that leaves a quote open cannot swallow the elements appended after
// it, as it could in a left-to-right parse.

// forwardedElementStart returns the start of the Forwarded element that ends
// at end in line: just after the comma before it that is outside quoted
// strings, or 0. ok is false if the element starts below minStart, or has a
// quoted string that is never opened (the element is malformed either way).
//
// Scanning from the right, a '"' outside a quoted string closes one; the
// quote that opens it is the nearest '"' to its left preceded by an even
// number of backslashes (an odd number escapes it). In a well-formed header
// this splits exactly where a left-to-right parse does; FuzzClient checks it.
func forwardedElementStart(line []byte, end, minStart int) (start int, ok bool) {
	lo := max(minStart, 0)
	if lo > end {
		return 0, false
	}
	for i := end - 1; i >= lo; i-- {
		switch line[i] {
		case ',':
			return i + 1, true
		case '"':
			j := i - 1
			for j >= lo && (line[j] != '"' || !evenBackslashesBefore(line, j)) {
				j--
			}
			if j < lo {
				return 0, false
			}
			i = j
		}
	}
	switch {
	case lo == 0:
		return 0, true
	case line[lo-1] == ',':
		return lo, true
	}
	return 0, false
}

func evenBackslashesBefore(b []byte, i int) bool {
	n := 0
	for i--; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 0
}

// parseForwardedElement returns the address in the for= parameter of one
// Forwarded element. ok is false if the element is malformed, has no for= or
// more than one (RFC 7239 section 4 forbids repeating a parameter), or its
// for= is not an address (unknown, obfuscated, or an IPv6 address that is not
// quoted and bracketed). Parameter names are case-insensitive; whitespace is
// allowed around pairs but not around '='.
func parseForwardedElement(el []byte) (addr netip.Addr, ok bool) {
	var buf [maxAddrLen]byte // the unescaped for= value
	found := false
	for i := 0; ; {
		for i < len(el) && httpsyntax.IsOWS(el[i]) {
			i++
		}
		if i == len(el) {
			break
		}
		if el[i] == ';' {
			i++
			continue
		}
		ns := i
		for i < len(el) && httpsyntax.IsTokenChar(el[i]) {
			i++
		}
		name := el[ns:i]
		if len(name) == 0 || i == len(el) || el[i] != '=' {
			return netip.Addr{}, false
		}
		i++
		isFor := len(name) == 3 && name[0]|0x20 == 'f' && name[1]|0x20 == 'o' && name[2]|0x20 == 'r'
		var val []byte
		if i < len(el) && el[i] == '"' {
			n, closed := 0, false
			for i++; i < len(el); i++ {
				c := el[i]
				if c == '"' {
					closed = true
					i++
					break
				}
				if c == '\\' {
					if i++; i == len(el) {
						break
					}
					c = el[i]
				}
				if n < len(buf) {
					buf[n] = c
				}
				n++
			}
			if !closed {
				return netip.Addr{}, false
			}
			if n <= len(buf) {
				val = buf[:n]
			} // else val stays nil: too long to be an address
		} else {
			vs := i
			for i < len(el) && httpsyntax.IsTokenChar(el[i]) {
				i++
			}
			if val = el[vs:i]; len(val) == 0 {
				return netip.Addr{}, false
			}
		}
		if isFor {
			if found {
				return netip.Addr{}, false
			}
			found = true
			addr, ok = parseNode(val)
		}
		for i < len(el) && httpsyntax.IsOWS(el[i]) {
			i++
		}
		if i < len(el) && el[i] != ';' {
			return netip.Addr{}, false
		}
	}
	if !found || !ok {
		return netip.Addr{}, false
	}
	return addr, true
}
