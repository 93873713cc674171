package ipv6

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
)

// HeaderKind names the forwarding header an Extractor reads. The zero value
// is XForwardedFor, the policy's default.
type HeaderKind uint8

const (
	// XForwardedFor is the de facto X-Forwarded-For list of addresses.
	XForwardedFor HeaderKind = iota
	// Forwarded is the RFC 7239 Forwarded header; only its for= parameters
	// are read.
	Forwarded
)

// ParseHeaderKind returns the HeaderKind a policy's forwarded_header names:
// "x-forwarded-for" or "forwarded", in any case. ok is false otherwise.
func ParseHeaderKind(s string) (k HeaderKind, ok bool) {
	switch {
	case strings.EqualFold(s, "x-forwarded-for"):
		return XForwardedFor, true
	case strings.EqualFold(s, "forwarded"):
		return Forwarded, true
	}
	return XForwardedFor, false
}

// String returns the header's canonical name, as a request carries it:
// "X-Forwarded-For" or "Forwarded".
func (k HeaderKind) String() string {
	if k == Forwarded {
		return "Forwarded"
	}
	return "X-Forwarded-For"
}

// Limits on how much of a forwarding header Client reads, counted from its
// right end. Past either limit the chain is not believed and the peer is the
// client, so a huge header costs a bounded amount of work. The limits apply
// to the hops before the client and the client's own hop, never to the
// client-supplied part further left, which is not read at all.
const (
	// maxHops is the most list elements (hops) Client reads.
	maxHops = 64
	// maxScanBytes is the most header bytes Client reads: an element counts
	// if it starts within this many bytes of the end of the joined header
	// lines (not counting the separators between lines).
	maxScanBytes = 4096
)

// Extractor finds the client address of a request from its socket peer and
// its forwarding header. It is immutable after NewExtractor and safe for
// concurrent use. The zero value trusts no proxy and reads X-Forwarded-For,
// so its client is always the peer.
type Extractor struct {
	// v4 and v6 are the trusted prefixes as sorted, merged, non-adjacent
	// inclusive address ranges: a binary search answers Trusted, and there
	// are no pointers for the garbage collector to follow.
	v4   []range4
	v6   []range6
	kind HeaderKind
	// nat64 are the local NAT64 prefixes, longest first (embedded.go).
	nat64 []nat64

	// maxHops and maxBytes are the scan limits; tests lower them.
	maxHops, maxBytes int
}

type range4 struct{ lo, hi uint32 }

// u128 is an IPv6 address as a big-endian 128-bit number.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

type range6 struct{ lo, hi u128 }

// Options configures an Extractor. The zero value trusts no proxy, reads
// X-Forwarded-For and knows only the built-in embedded-IPv4 forms.
type Options struct {
	// Trusted are the proxies whose forwarding header is believed. Prefixes
	// are masked; an IPv4-mapped prefix of length 96 or more
	// (::ffff:10.0.0.0/104) is taken as the IPv4 prefix it maps
	// (10.0.0.0/8), since addresses are unmapped before they are looked up;
	// other IPv6 prefixes match only IPv6 addresses. Trust is decided on
	// each hop's address as sent, never on an IPv4 address it embeds.
	Trusted []netip.Prefix
	// Header is the forwarding header read from trusted proxies.
	Header HeaderKind
	// NAT64 are local NAT64 prefixes (RFC 6052 §2.2; the policy's
	// nat64_prefixes) whose addresses count as the IPv4 address they
	// embed, each with its length (CheckNAT64Prefix).
	NAT64 []netip.Prefix
}

// NewExtractor returns an Extractor that believes the forwarding header of
// kind only from a peer inside one of the trusted prefixes, with no local
// NAT64 prefix: New(Options{Trusted: trusted, Header: kind}).
func NewExtractor(trusted []netip.Prefix, kind HeaderKind) *Extractor {
	return New(Options{Trusted: trusted, Header: kind})
}

// New returns an Extractor configured by o. Invalid prefixes (a trusted
// prefix that is not valid, a NAT64 prefix CheckNAT64Prefix refuses) are
// ignored: the policy's compiler rejects them with a diagnostic before they
// get here.
func New(o Options) *Extractor {
	e := &Extractor{kind: o.Header, maxHops: maxHops, maxBytes: maxScanBytes, nat64: newNAT64(o.NAT64)}
	for _, p := range o.Trusted {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		a, bits := p.Addr(), p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		if a.Is4() {
			lo := u32(a)
			hi := lo | uint32(uint64(1)<<(32-bits)-1)
			e.v4 = append(e.v4, range4{lo, hi})
			continue
		}
		// A shift by the full width gives 0 in Go, so /0 and /64 need no
		// special case.
		lo := u128of(a)
		hi := lo
		if bits <= 64 {
			hi.hi |= uint64(1)<<(64-bits) - 1
			hi.lo = ^uint64(0)
		} else {
			hi.lo |= uint64(1)<<(128-bits) - 1
		}
		e.v6 = append(e.v6, range6{lo, hi})
	}
	e.v4 = merge4(e.v4)
	e.v6 = merge6(e.v6)
	return e
}

func merge4(rs []range4) []range4 {
	slices.SortFunc(rs, func(a, b range4) int { return cmp.Compare(a.lo, b.lo) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1].hi == ^uint32(0) || r.lo <= out[n-1].hi+1) {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return slices.Clip(out)
}

func merge6(rs []range6) []range6 {
	slices.SortFunc(rs, func(a, b range6) int {
		switch {
		case a.lo.less(b.lo):
			return -1
		case b.lo.less(a.lo):
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && !out[n-1].hi.less(r.lo.minusOne()) {
			if out[n-1].hi.less(r.hi) {
				out[n-1].hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return slices.Clip(out)
}

// minusOne returns a-1, or 0 for 0 (so that a range starting at :: merges
// with anything before it, of which there is nothing).
func (a u128) minusOne() u128 {
	switch {
	case a.lo != 0:
		a.lo--
	case a.hi != 0:
		a.hi--
		a.lo = ^uint64(0)
	}
	return a
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func u128of(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// Kind returns the forwarding header the Extractor reads.
func (e *Extractor) Kind() HeaderKind { return e.kind }

// Trusted reports whether a (unmapped first, zone ignored) is inside one of
// the trusted prefixes.
func (e *Extractor) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	switch {
	case a.Is4():
		x := u32(a)
		i, j := 0, len(e.v4)
		for i < j { // find the first range starting above x
			m := int(uint(i+j) >> 1)
			if e.v4[m].lo <= x {
				i = m + 1
			} else {
				j = m
			}
		}
		return i > 0 && x <= e.v4[i-1].hi
	case a.Is6():
		x := u128of(a)
		i, j := 0, len(e.v6)
		for i < j {
			m := int(uint(i+j) >> 1)
			if !x.less(e.v6[m].lo) {
				i = m + 1
			} else {
				j = m
			}
		}
		return i > 0 && !e.v6[i-1].hi.less(x)
	}
	return false
}

// Client returns the client address of a request whose socket peer is peer
// and whose forwarding header (the Extractor's kind) arrived as the field
// lines in values, in arrival order, as the client counts for keys. The
// lines are read as one comma-separated list, since a client can send a
// line of its own ahead of the proxies' line.
//
// From an untrusted peer the header is ignored and the peer is the client.
// From a trusted peer the hops are read from the right, skipping trusted
// ones: the first untrusted hop is the client. If that hop is not an address
// (garbage, an empty element, "unknown", an obfuscated identifier, a
// Forwarded element without exactly one for=), if the scan passes 64 hops or
// 4 KiB, or if there is no header, the peer is the client. If every hop is
// trusted, the left-most one is the client.
//
// The address found is then counted (Counted): an IPv6 address that embeds
// an IPv4 address (6to4, Teredo, NAT64, IPv4-compatible: EmbeddedIPv4) is
// that IPv4 address, so every key, budget and ceiling built on the client
// treats one IPv4 host as one client however its address is spelled
// (docs/client-address.md). Trust is decided before that, on
// the hops as sent. AppendForwardedFor keeps the address as sent.
//
// The result is unmapped and has no zone. It is valid whenever peer is.
// Client does not allocate or retain values.
func (e *Extractor) Client(peer netip.Addr, values [][]byte) netip.Addr {
	c, _ := e.scan(peer, values, nil)
	return e.Counted(c)
}

// AppendForwardedFor appends to dst the X-Forwarded-For value the origin
// should receive: the client's address as the trusted hops (or the socket)
// gave it (the address Client finds before it counts an embedded IPv4
// address as that IPv4 address: the origin hears what was on the wire),
// then the trusted hops to its right in the order they arrived, then the
// peer. When the client is the peer itself (an untrusted peer, no usable
// header, or a fallback) it is just the peer: a value from an untrusted peer
// never reaches the origin. Addresses are in canonical text form, separated
// by ", ". It does not allocate when dst has room.
func (e *Extractor) AppendForwardedFor(dst []byte, peer netip.Addr, values [][]byte) []byte {
	_, dst = e.ClientAndForwardedFor(dst, peer, values)
	return dst
}

// ClientAndForwardedFor is Client and AppendForwardedFor of the same peer
// and values in one scan of the header: client is what Client returns, and
// dst has AppendForwardedFor's value appended. It does not allocate when
// dst has room, and does not retain values.
func (e *Extractor) ClientAndForwardedFor(dst []byte, peer netip.Addr, values [][]byte) (client netip.Addr, _ []byte) {
	var hops [maxHops]netip.Addr
	client, n := e.scan(peer, values, &hops)
	dst = client.AppendTo(dst)
	client = e.Counted(client)
	if n == 0 {
		return client, dst
	}
	// hops[:n] are the client's hop and the trusted hops to its right, right
	// to left; hops[n-1] is the client.
	for i := n - 2; i >= 0; i-- {
		dst = append(dst, ", "...)
		dst = hops[i].AppendTo(dst)
	}
	dst = append(dst, ", "...)
	return client, peer.Unmap().WithZone("").AppendTo(dst)
}

// scan implements Client. When it finds the client in the header (rather
// than falling back to the peer) it returns n > 0 and, if hops is not nil,
// the hops it read in hops[:n], right to left, the client last.
func (e *Extractor) scan(peer netip.Addr, values [][]byte, hops *[maxHops]netip.Addr) (client netip.Addr, n int) {
	peer = peer.Unmap().WithZone("")
	if !e.Trusted(peer) {
		return peer, 0
	}
	limit := min(e.maxHops, maxHops)
	var leftmost netip.Addr
	right := 0 // bytes of the lines right of the current one
	for l := len(values) - 1; l >= 0; l-- {
		line := values[l]
		// minStart is the lowest start an element of this line may have and
		// still lie within maxBytes of the end.
		minStart := len(line) + right - e.maxBytes
		for end := len(line); ; {
			if n == limit {
				return peer, 0
			}
			var start int
			var a netip.Addr
			var ok bool
			if e.kind == Forwarded {
				start, ok = forwardedElementStart(line, end, minStart)
				if !ok {
					return peer, 0
				}
				a, ok = parseForwardedElement(line[start:end])
			} else {
				start, ok = xffElementStart(line, end, minStart)
				if !ok {
					return peer, 0
				}
				a, ok = ParseAddr(line[start:end])
			}
			if !ok {
				return peer, 0
			}
			if hops != nil {
				hops[n] = a
			}
			n++
			if !e.Trusted(a) {
				return a, n
			}
			leftmost = a
			if start == 0 {
				break
			}
			end = start - 1 // skip the comma
		}
		right += len(line)
	}
	if n == 0 {
		return peer, 0
	}
	return leftmost, n
}

// xffElementStart returns the start of the X-Forwarded-For element that ends
// at end: just after the comma before it, or 0. ok is false if the element
// starts below minStart.
func xffElementStart(line []byte, end, minStart int) (start int, ok bool) {
	lo := max(minStart, 0)
	if lo > end {
		return 0, false
	}
	if i := bytes.LastIndexByte(line[lo:end], ','); i >= 0 {
		return lo + i + 1, true
	}
	switch {
	case lo == 0:
		return 0, true
	case line[lo-1] == ',':
		return lo, true
	}
	return 0, false
}
