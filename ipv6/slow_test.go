package ipv6

import (
	"net/netip"
	"strconv"
	"strings"
)

// This file holds slow, obviously-correct references written with
// strings.Split and netip.ParseAddr, for the fuzz tests to compare against
// (as net/netip's own slow_test.go does). They allocate freely.

func slowValidZone(z string) bool {
	return z != "" && !strings.ContainsFunc(z, func(r rune) bool {
		return r < 0x21 || r > 0x7e || r == '[' || r == ']'
	})
}

// slowParseAddr is the reference for ParseAddr.
func slowParseAddr(s string) (netip.Addr, bool) {
	if len(s) > maxAddrLen {
		return netip.Addr{}, false
	}
	s = strings.Trim(s, " \t")
	var a netip.Addr
	var err error
	switch {
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		a, err = netip.ParseAddr(s[1 : len(s)-1])
		if err == nil && !a.Is6() {
			return netip.Addr{}, false
		}
	case strings.HasPrefix(s, "["):
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s) // insists on IPv6 inside brackets
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
		if err != nil {
			if ap, err2 := netip.ParseAddrPort(s); err2 == nil && ap.Addr().Is4() {
				a, err = ap.Addr(), nil
			}
		}
	}
	if err != nil || a.Zone() != "" && !slowValidZone(a.Zone()) {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

func slowValidPort(p string) bool {
	if strings.HasPrefix(p, "_") {
		return len(p) > 1 && !strings.ContainsFunc(p[1:], func(r rune) bool {
			return !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", r)
		})
	}
	_, err := strconv.ParseUint(p, 10, 16)
	return err == nil
}

// slowParseNode is the reference for parseNode (RFC 7239 section 6).
func slowParseNode(s string) (netip.Addr, bool) {
	if s == "" || len(s) > maxAddrLen {
		return netip.Addr{}, false
	}
	host, port, hasPort := s, "", false
	if strings.HasPrefix(s, "[") {
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return netip.Addr{}, false
		}
		host = s[1:i]
		if rest := s[i+1:]; rest != "" {
			if port, hasPort = strings.CutPrefix(rest, ":"); !hasPort {
				return netip.Addr{}, false
			}
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port, hasPort = s[:i], s[i+1:], true
	}
	a, err := netip.ParseAddr(host)
	switch {
	case err != nil,
		hasPort && !slowValidPort(port),
		strings.HasPrefix(s, "[") != a.Is6(),
		a.Zone() != "" && !slowValidZone(a.Zone()):
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// slowTrusted is the reference for Extractor.Trusted: a linear search.
func slowTrusted(trusted []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range trusted {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func slowIsTchar(c byte) bool {
	return strings.IndexByte("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", c) >= 0
}

func slowAllTchar(s string) bool {
	for i := 0; i < len(s); i++ {
		if !slowIsTchar(s[i]) {
			return false
		}
	}
	return s != ""
}

// slowSplitQuoted splits s at sep outside quoted strings, reading left to
// right. ok is false if a quoted string is left open or a backslash appears
// outside one; the right-to-left scan is only claimed to agree with a
// left-to-right parse when neither happens.
func slowSplitQuoted(s string, sep byte) (parts []string, starts []int, ok bool) {
	in, start := false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && c == '\\':
			return nil, nil, false
		case !in && c == sep:
			parts, starts = append(parts, s[start:i]), append(starts, start)
			start = i + 1
		}
	}
	if in {
		return nil, nil, false
	}
	return append(parts, s[start:]), append(starts, start), true
}

// slowUnquote unquotes an HTTP quoted-string that must span all of s.
func slowUnquote(s string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i++; i == len(s) {
				return "", false
			}
		case '"':
			return b.String(), i == len(s)-1
		}
		b.WriteByte(s[i])
	}
	return "", false
}

// slowForwardedElement is the reference for parseForwardedElement.
func slowForwardedElement(el string) (netip.Addr, bool) {
	pairs, _, ok := slowSplitQuoted(el, ';')
	if !ok {
		return netip.Addr{}, false
	}
	var fors []string
	for _, p := range pairs {
		p = strings.Trim(p, " \t")
		if p == "" {
			continue
		}
		name, value, found := strings.Cut(p, "=")
		if !found || !slowAllTchar(name) {
			return netip.Addr{}, false
		}
		if strings.HasPrefix(value, `"`) {
			if value, ok = slowUnquote(value); !ok {
				return netip.Addr{}, false
			}
		} else if !slowAllTchar(value) {
			return netip.Addr{}, false
		}
		if strings.EqualFold(name, "for") {
			fors = append(fors, value)
		}
	}
	if len(fors) != 1 {
		return netip.Addr{}, false
	}
	return slowParseNode(fors[0])
}

type slowHop struct {
	addr netip.Addr
	ok   bool
	cost int  // bytes from the hop's start to the end of the joined lines
	skip bool // a line the reference cannot split: stop comparing here
}

func slowHops(kind HeaderKind, lines []string) []slowHop {
	var hops []slowHop
	for i, line := range lines {
		right := 0
		for _, l := range lines[i+1:] {
			right += len(l)
		}
		if kind == Forwarded {
			els, starts, ok := slowSplitQuoted(line, ',')
			if !ok {
				hops = append(hops, slowHop{skip: true})
				continue
			}
			for j, el := range els {
				a, ok := slowForwardedElement(el)
				hops = append(hops, slowHop{a, ok, len(line) - starts[j] + right, false})
			}
			continue
		}
		start := 0
		for _, el := range strings.Split(line, ",") {
			a, ok := slowParseAddr(el)
			hops = append(hops, slowHop{a, ok, len(line) - start + right, false})
			start += len(el) + 1
		}
	}
	return hops
}

// slowClient is the reference for Extractor.Client and AppendForwardedFor.
// chain is the client and the trusted hops to its right, left to right, or
// nil when the client is the peer. comparable is false when the answer
// depends on a Forwarded line with an open quote or a stray backslash,
// whose split the reference does not define.
func slowClient(trusted []netip.Prefix, kind HeaderKind, maxHops, maxBytes int, peer netip.Addr, lines []string) (client netip.Addr, chain []netip.Addr, comparable bool) {
	peer = peer.Unmap().WithZone("")
	if !slowTrusted(trusted, peer) {
		return peer, nil, true
	}
	hops := slowHops(kind, lines)
	for k := 1; k <= len(hops); k++ {
		h := hops[len(hops)-k]
		switch {
		case k > maxHops:
			return peer, nil, true
		case h.skip:
			return netip.Addr{}, nil, false
		case h.cost > maxBytes || !h.ok:
			return peer, nil, true
		case !slowTrusted(trusted, h.addr):
			for _, h := range hops[len(hops)-k:] {
				chain = append(chain, h.addr)
			}
			return h.addr, chain, true
		}
	}
	if len(hops) == 0 {
		return peer, nil, true
	}
	for _, h := range hops {
		chain = append(chain, h.addr)
	}
	return hops[0].addr, chain, true
}

// slowForwardedFor is the reference for AppendForwardedFor.
func slowForwardedFor(peer, client netip.Addr, chain []netip.Addr) string {
	if chain == nil {
		return client.String()
	}
	var parts []string
	for _, a := range chain {
		parts = append(parts, a.String())
	}
	return strings.Join(append(parts, peer.Unmap().WithZone("").String()), ", ")
}

// slowKey is the reference for AppendKey.
func slowKey(a netip.Addr, v4bits, v6bits int) []byte {
	a = a.Unmap().WithZone("")
	k := make([]byte, KeyLen)
	if !a.IsValid() {
		return k
	}
	bits := min(max(v6bits, 0), 128)
	k[0] = 6
	if a.Is4() {
		bits = min(max(v4bits, 0), 32)
		k[0] = 4
	}
	p := netip.MustParsePrefix(a.String() + "/" + strconv.Itoa(bits)).Masked()
	k[1] = byte(bits)
	copy(k[2:], p.Addr().AsSlice())
	return k
}

// slowBits returns a's 128 bits as a string of '0' and '1'.
func slowBits(a netip.Addr) string {
	var b strings.Builder
	for _, c := range a.AsSlice() {
		s := strconv.FormatUint(uint64(c), 2)
		b.WriteString(strings.Repeat("0", 8-len(s)) + s)
	}
	return b.String()
}

// slowIPv4 reads 32 bits written as '0' and '1' (inverted if inv).
func slowIPv4(bits string, inv bool) netip.Addr {
	var v [4]byte
	for i := range 32 {
		if (bits[i] == '1') != inv {
			v[i/8] |= 0x80 >> (i % 8)
		}
	}
	return netip.AddrFrom4(v)
}

// slowGlobal is the reference for globalIPv4: netip's own predicates, and
// the networks they do not cover written out as prefixes.
func slowGlobal(a netip.Addr) bool {
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, p := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "240.0.0.0/4"} {
		if netip.MustParsePrefix(p).Contains(a) {
			return false
		}
	}
	return true
}

// slowEmbeddedIPv4 is the reference for Extractor.EmbeddedIPv4 with local
// NAT64 prefixes nat64, written from the RFCs' text on bit strings.
func slowEmbeddedIPv4(nat64 []netip.Prefix, a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	a = a.WithZone("")
	if a.Is4In6() {
		return a.Unmap(), true
	}
	bits := slowBits(a)
	var v4 netip.Addr
	switch {
	case netip.MustParsePrefix("2002::/16").Contains(a): // RFC 3056 §2
		v4 = slowIPv4(bits[16:48], false)
	case netip.MustParsePrefix("2001::/32").Contains(a): // RFC 4380 §4
		v4 = slowIPv4(bits[96:], true)
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a), // RFC 6052 §2.1
		netip.MustParsePrefix("::/96").Contains(a): // RFC 4291 §2.5.5.1
		v4 = slowIPv4(bits[96:], false)
	default:
		best := netip.Prefix{}
		for _, p := range nat64 {
			if CheckNAT64Prefix(p) == nil && p.Masked().Contains(a) && p.Bits() > best.Bits() {
				best = p
			}
		}
		if !best.IsValid() {
			return netip.Addr{}, false
		}
		// RFC 6052 §2.2: the IPv4 bits follow the prefix, and bits 64-71
		// are never among them.
		field := bits[best.Bits():]
		if best.Bits() <= 64 {
			field = bits[best.Bits():64] + bits[72:]
		}
		return slowIPv4(field[:32], false), true
	}
	if !slowGlobal(v4) {
		return netip.Addr{}, false
	}
	return v4, true
}

// slowCounted is the reference for Extractor.Counted.
func slowCounted(nat64 []netip.Prefix, a netip.Addr) netip.Addr {
	if v4, ok := slowEmbeddedIPv4(nat64, a); ok {
		return v4
	}
	return a.Unmap().WithZone("")
}
