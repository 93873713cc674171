package ja4

// MaxRecord is the most of a connection's first bytes a Conn keeps, and
// the largest ClientHello Records reassembles: 16 KiB, one full TLS
// record (RFC 8446 §5.1), where today's largest hellos (post-quantum key
// shares) take under 2 KiB.
const MaxRecord = 16 << 10

const (
	recordHandshake = 22      // ContentType handshake (RFC 8446 §5.1)
	maxFragment     = 1 << 14 // TLSPlaintext.length's bound (RFC 8446 §5.1)
)

// scan reports whether b, the first bytes a client sent, holds a complete
// ClientHello: nil when it does; ErrTruncated when more bytes may
// complete it; ErrNotHello or ErrMalformed when none will. want is the
// message's length with its 4-byte header, once known.
func scan(b []byte) (want int, err error) {
	var sc scanner
	return sc.scan(b)
}

// scanner is scan resumable: a Conn calls scan after each read with all
// it has recorded, and the records it has already walked are not walked
// again, so a ClientHello that arrives a byte at a time costs time in
// proportion to its length, not to its length squared.
type scanner struct {
	pos   int     // the first record not walked yet
	got   int     // handshake bytes in the records before pos
	hdr   [4]byte // the handshake message's header, as far as seen before pos
	hdrN  int
	want  int  // the message's length with its header, once known
	known bool // want is known
	walks int  // records looked at, over every call (a test checks the bound)
}

func (sc *scanner) scan(b []byte) (want int, err error) {
	for {
		pos := sc.pos
		want = -1
		if sc.known {
			want = sc.want
		}
		if len(b)-pos < 5 {
			if pos == 0 && len(b) > 0 && b[0] != recordHandshake {
				return want, ErrNotHello
			}
			return want, ErrTruncated
		}
		if b[pos] != recordHandshake || b[pos+1] != 3 {
			// Another record before the hello is complete, SSL 2.0's
			// record format, or bytes that are not TLS.
			if pos == 0 {
				return want, ErrNotHello
			}
			return want, ErrMalformed
		}
		l := int(b[pos+3])<<8 | int(b[pos+4])
		if l == 0 || l > maxFragment {
			return want, ErrMalformed
		}
		sc.walks++
		frag := b[pos+5:]
		if len(frag) > l {
			frag = frag[:l]
		}
		// The state as it would be after this record: committed only once
		// the record is complete, so a partial one is walked again.
		hdr, hdrN, got := sc.hdr, sc.hdrN, sc.got
		for hdrN < 4 && len(frag) > 0 {
			hdr[hdrN] = frag[0]
			hdrN++
			frag = frag[1:]
			got++
			if hdrN == 4 {
				if hdr[0] != 1 {
					return want, ErrNotHello
				}
				want = 4 + (int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3]))
				if want > MaxRecord {
					return want, ErrMalformed
				}
			}
		}
		got += len(frag)
		if want >= 0 && got >= want {
			return want, nil
		}
		if pos+5+l > len(b) {
			return want, ErrTruncated
		}
		sc.pos, sc.hdr, sc.hdrN, sc.got = pos+5+l, hdr, hdrN, got
		sc.want, sc.known = want, want >= 0
	}
}

// Records appends the JA4 fingerprint of the ClientHello that the TLS
// records in b carry (a message may span records; bytes after it are
// ignored) to dst, as Append does. b is not modified.
func Records(dst, b []byte) ([]byte, error) {
	want, err := scan(b)
	if err != nil {
		return dst, err
	}
	// One record holds the whole message: the common case, no copy.
	if l := int(b[3])<<8 | int(b[4]); l >= want {
		return Append(dst, b[5:5+want], false)
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	msg := s.msg[:0]
	for pos := 0; len(msg) < want; {
		l := int(b[pos+3])<<8 | int(b[pos+4])
		frag := b[pos+5 : min(pos+5+l, len(b))]
		msg = append(msg, frag[:min(len(frag), want-len(msg))]...)
		pos += 5 + l
	}
	s.msg = msg
	return s.append(dst, msg, false)
}
