package ja4

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
)

// Size is the length of a JA4 fingerprint in bytes.
const Size = 36

// Errors of Append and Records. They are preallocated: a scanner's
// garbage costs no allocation.
var (
	// ErrNotHello: the bytes are not a TLS handshake record or message
	// carrying a ClientHello (another record type, another handshake
	// message, SSLv2's record format, an HTTP request on a TLS port).
	ErrNotHello = errors.New("ja4: not a TLS ClientHello")
	// ErrTruncated: the ClientHello is not complete in the bytes given.
	ErrTruncated = errors.New("ja4: truncated ClientHello")
	// ErrMalformed: a length inside the ClientHello is inconsistent.
	ErrMalformed = errors.New("ja4: malformed ClientHello")
)

// TLS extension types JA4 reads (IANA TLS ExtensionType Values).
const (
	extServerName        = 0x0000 // RFC 6066 §3
	extSignatureAlgs     = 0x000d // RFC 8446 §4.2.3
	extALPN              = 0x0010 // RFC 7301 §3.1
	extSupportedVersions = 0x002b // RFC 8446 §4.2.1
)

// isGREASE reports whether v is one of the 16 GREASE values of RFC 8701
// §2 (0x0a0a, 0x1a1a, … 0xfafa), which JA4 ignores wherever they appear.
func isGREASE(v uint16) bool { return v&0x0f0f == 0x0a0a && v>>8 == v&0xff }

// hello is what JA4 reads from a ClientHello. Its slices point into the
// message or into a pooled scratch.
type hello struct {
	legacy   uint16 // legacy_version
	best     uint16 // the highest non-GREASE supported_versions value, 0: none
	sni      bool
	alpn     []byte // the first ALPN protocol name; nil without one
	ciphers  []uint16
	exts     []uint16 // every non-GREASE extension, in the order sent
	sigs     []byte   // signature_algorithms' list, two bytes each, as sent
	sigsSeen bool
}

// scratch is the per-computation memory, pooled so that a fingerprint
// costs no allocation beyond its result.
type scratch struct {
	h   hello
	u16 []uint16
	txt []byte
	msg []byte // a hello reassembled from several records (Records)
}

var scratchPool = sync.Pool{New: func() any { return &scratch{u16: make([]uint16, 0, 128), txt: make([]byte, 0, 1024)} }}

// reader is a bounds-checked cursor over a byte slice; any short read
// sets bad and returns zeros.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u8() int {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return int(v)
}

func (r *reader) u16() int {
	if len(r.b) < 2 {
		r.bad = true
		return 0
	}
	v := int(r.b[0])<<8 | int(r.b[1])
	r.b = r.b[2:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if n > len(r.b) {
		r.bad = true
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Append appends the JA4 fingerprint of msg, a ClientHello handshake
// message (RFC 8446 §4: msg_type 1, a 3-byte length, then the body of
// §4.1.2), to dst. quic selects the 'q' protocol mark instead of 't'. On
// error dst is returned unchanged. It allocates nothing when dst has room
// for Size more bytes.
func Append(dst, msg []byte, quic bool) ([]byte, error) {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	return s.append(dst, msg, quic)
}

func (s *scratch) append(dst, msg []byte, quic bool) ([]byte, error) {
	if len(msg) < 4 || msg[0] != 1 {
		return dst, ErrNotHello
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if len(msg)-4 < n {
		return dst, ErrTruncated
	}
	if err := s.parse(msg[4 : 4+n]); err != nil {
		return dst, err
	}
	return s.fingerprint(dst, quic), nil
}

// parse reads body, a ClientHello's body, into s.h.
func (s *scratch) parse(body []byte) error {
	h := &s.h
	*h = hello{ciphers: h.ciphers[:0], exts: h.exts[:0]}
	r := reader{b: body}
	h.legacy = uint16(r.u16())
	r.bytes(32)            // random
	r.bytes(r.u8())        // legacy_session_id
	cs := r.bytes(r.u16()) // cipher_suites
	r.bytes(r.u8())        // legacy_compression_methods
	if r.bad || len(cs)%2 != 0 {
		return ErrMalformed
	}
	for i := 0; i < len(cs); i += 2 {
		if v := uint16(cs[i])<<8 | uint16(cs[i+1]); !isGREASE(v) {
			h.ciphers = append(h.ciphers, v)
		}
	}
	if len(r.b) == 0 {
		return nil // a hello without extensions (SSL 3.0, early TLS clients)
	}
	er := reader{b: r.bytes(r.u16())}
	if r.bad {
		return ErrMalformed
	}
	for len(er.b) > 0 {
		typ := uint16(er.u16())
		data := er.bytes(er.u16())
		if er.bad {
			return ErrMalformed
		}
		if isGREASE(typ) {
			continue
		}
		h.exts = append(h.exts, typ)
		switch typ {
		case extServerName:
			h.sni = true
		case extALPN:
			if h.alpn == nil {
				// ProtocolNameList: a 2-byte length, then 1-byte-length
				// names (RFC 7301 §3.1); the first one counts.
				ar := reader{b: data}
				list := reader{b: ar.bytes(ar.u16())}
				name := list.bytes(list.u8())
				if !ar.bad && !list.bad {
					h.alpn = name[:len(name):len(name)]
				}
			}
		case extSignatureAlgs:
			if !h.sigsSeen {
				sr := reader{b: data}
				h.sigs = sr.bytes(sr.u16())
				h.sigsSeen = true
				if sr.bad || len(h.sigs)%2 != 0 {
					h.sigs = h.sigs[:len(h.sigs)&^1]
				}
			}
		case extSupportedVersions:
			vr := reader{b: data}
			vs := vr.bytes(vr.u8())
			for i := 0; i+1 < len(vs); i += 2 {
				if v := uint16(vs[i])<<8 | uint16(vs[i+1]); !isGREASE(v) && v > h.best {
					h.best = v
				}
			}
		}
	}
	return nil
}

// version is the JA4 version mark (JA4.md, "TLS and DTLS Version"):
// supported_versions' highest non-GREASE value when the extension holds
// one, else legacy_version.
func (h *hello) version() string {
	v := h.legacy
	if h.best != 0 {
		v = h.best
	}
	switch v {
	case 0x0304:
		return "13"
	case 0x0303:
		return "12"
	case 0x0302:
		return "11"
	case 0x0301:
		return "10"
	case 0x0300:
		return "s3"
	case 0x0002:
		return "s2"
	case 0xfeff:
		return "d1"
	case 0xfefd:
		return "d2"
	case 0xfefc:
		return "d3"
	}
	return "00"
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
}

const hexDigits = "0123456789abcdef"

// appendALPN appends the ALPN mark (JA4.md, "ALPN Extension Value"): the
// first and last characters of the first ALPN value ("h2", "h1" for
// http/1.1), a single character twice, "00" without a value; when either
// end is not an ASCII letter or digit, the first and last characters of
// the value's hex form instead (0xAB 0xCD → "ad").
func appendALPN(dst, v []byte) []byte {
	if len(v) == 0 {
		return append(dst, '0', '0')
	}
	first, last := v[0], v[len(v)-1]
	if isAlnum(first) && isAlnum(last) {
		return append(dst, first, last)
	}
	return append(dst, hexDigits[first>>4], hexDigits[last&0xf])
}

func appendCount(dst []byte, n int) []byte {
	n = min(n, 99)
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

func appendHex16(dst []byte, v uint16) []byte {
	return append(dst, hexDigits[v>>12], hexDigits[v>>8&0xf], hexDigits[v>>4&0xf], hexDigits[v&0xf])
}

// appendHexList appends vs as 4 hex digits each, comma-separated.
func appendHexList(dst []byte, vs []uint16) []byte {
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendHex16(dst, v)
	}
	return dst
}

// appendHash12 appends the first 12 hex digits of SHA-256 over txt, or
// twelve zeros when empty is true (JA4.md: an empty list is not hashed).
func appendHash12(dst, txt []byte, empty bool) []byte {
	if empty {
		return append(dst, "000000000000"...)
	}
	sum := sha256.Sum256(txt)
	var h [12]byte
	hex.Encode(h[:], sum[:6])
	return append(dst, h[:]...)
}

// fingerprint appends s.h's JA4.
func (s *scratch) fingerprint(dst []byte, quic bool) []byte {
	h := &s.h
	proto := byte('t')
	if quic {
		proto = 'q'
	}
	dst = append(dst, proto)
	dst = append(dst, h.version()...)
	if h.sni {
		dst = append(dst, 'd')
	} else {
		dst = append(dst, 'i')
	}
	dst = appendCount(dst, len(h.ciphers))
	dst = appendCount(dst, len(h.exts))
	dst = appendALPN(dst, h.alpn)
	dst = append(dst, '_')

	// b: the sorted cipher suites, 4 hex digits each, comma-separated.
	s.u16 = append(s.u16[:0], h.ciphers...)
	slices.Sort(s.u16)
	s.txt = appendHexList(s.txt[:0], s.u16)
	dst = appendHash12(dst, s.txt, len(s.u16) == 0)
	dst = append(dst, '_')

	// c: the sorted extensions without SNI and ALPN, then "_" and the
	// signature algorithms in the order sent (none: no "_").
	s.u16 = s.u16[:0]
	for _, v := range h.exts {
		if v != extServerName && v != extALPN {
			s.u16 = append(s.u16, v)
		}
	}
	slices.Sort(s.u16)
	s.txt = appendHexList(s.txt[:0], s.u16)
	if len(h.sigs) > 0 {
		s.txt = append(s.txt, '_')
		for i := 0; i+1 < len(h.sigs); i += 2 {
			if i > 0 {
				s.txt = append(s.txt, ',')
			}
			s.txt = appendHex16(s.txt, uint16(h.sigs[i])<<8|uint16(h.sigs[i+1]))
		}
	}
	dst = appendHash12(dst, s.txt, len(s.u16) == 0)
	h.alpn, h.sigs = nil, nil // the scratch is pooled: keep no reference to the message
	return dst
}

// Valid reports whether fp has the shape of a JA4 fingerprint: 36 bytes,
// a protocol mark ('t', 'q' or 'd'), a version mark JA4 defines, 'd' or
// 'i', four digits, two ASCII letters or digits, then "_", 12 lower-case
// hex digits, "_" and 12 more. It says nothing about whether any client
// sends it.
func Valid(fp []byte) bool {
	if len(fp) != Size {
		return false
	}
	switch fp[0] {
	case 't', 'q', 'd':
	default:
		return false
	}
	switch string(fp[1:3]) {
	case "13", "12", "11", "10", "s3", "s2", "d1", "d2", "d3", "00":
	default:
		return false
	}
	if fp[3] != 'd' && fp[3] != 'i' {
		return false
	}
	for _, c := range fp[4:8] {
		if c < '0' || c > '9' {
			return false
		}
	}
	if !isAlnum(fp[8]) || !isAlnum(fp[9]) || fp[10] != '_' || fp[23] != '_' {
		return false
	}
	for i, c := range fp[11:] {
		if i == 12 {
			continue // the second '_'
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
