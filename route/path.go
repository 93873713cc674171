package route

import (
	"bytes"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// maxRawPathLen is the longest raw path AppendCanonicalPath accepts, in
// bytes (8 KiB).
const maxRawPathLen = 8 << 10

const pathUpperHex = "0123456789ABCDEF"

// AppendCanonicalPath appends the canonical form of raw, a path as it came
// in the request line without its query string, to dst. The origin receives
// this form. It:
//
//   - decodes percent-encoded unreserved characters (RFC 3986 section 2.3:
//     ALPHA / DIGIT / "-" / "." / "_" / "~"), so "/%6Cogin" is "/login", and
//     uppercases the hex digits of every other escape ("%2f" becomes "%2F",
//     which stays encoded);
//   - then removes "." and ".." segments (RFC 3986 section 5.2.4), never
//     climbing above the root, so "/%2e%2e/login" is "/login";
//   - collapses repeated slashes;
//   - keeps case, other bytes and a trailing slash as the client sent them.
//
// ok is false, and dst is returned unchanged, for a path that must be
// refused with 400: one that does not start with '/', is longer than 8 KiB,
// has an invalid percent-escape ("%zz", "%4" at the end) or a control
// character (below 0x20, or 0x7F), encodes NUL as %00, or has a segment of
// only dots and spaces other than "." and ".." ("...", ". ", "%20"). Here
// a segment is what AppendMatchPath takes for one: split at '/', '\', %2F
// and %5C, up to any ";params". Windows origins strip a segment's trailing
// dots and spaces, so such a segment is empty, "." or ".." to some origins
// and a name to others: no one match form is right for all of them
// (docs/host-and-path.md §2).
//
// The result is never longer than raw, so AppendCanonicalPath does not
// allocate when dst has len(raw) bytes of room. It is idempotent: the
// canonical form of a canonical path is itself.
func AppendCanonicalPath(dst, raw []byte) (out []byte, ok bool) {
	if len(raw) == 0 || raw[0] != '/' || len(raw) > maxRawPathLen {
		return dst, false
	}
	base := len(dst)
	dst = append(dst, '/')
	// dst[base:] starts with '/' and, between segments, ends with '/'.
	for i := 1; ; i++ { // raw[i-1] is a '/'
		seg := len(dst)
		var ds dotSpaces // the match-form segment so far
		for ; i < len(raw) && raw[i] != '/'; i++ {
			c := raw[i]
			switch {
			case c == '%':
				v, valid := pathUnescape(raw, i)
				if !valid || v == 0 {
					return dst[:base], false
				}
				i += 2
				if !ds.add(v) {
					return dst[:base], false
				}
				if pathUnreserved(v) {
					dst = append(dst, v)
				} else {
					dst = append(dst, '%', pathUpperHex[v>>4], pathUpperHex[v&15])
				}
				continue
			case c < 0x20 || c == 0x7f:
				return dst[:base], false
			}
			if !ds.add(c) {
				return dst[:base], false
			}
			dst = append(dst, c)
		}
		if ds.ambiguous() {
			return dst[:base], false
		}
		last := i >= len(raw)
		dst = pathEndSegment(dst, base, seg, last)
		if last {
			return dst, true
		}
	}
}

// dotSpaces follows one segment of the match form through
// AppendCanonicalPath's decoded bytes, to refuse a segment of only dots and
// spaces.
type dotSpaces struct {
	n, dots int  // bytes and dots of the segment so far
	other   bool // it has a byte other than '.' and ' '
	params  bool // inside ";params", which the match form drops
}

// add takes the next decoded byte of the path (within a '/'-segment) and
// reports false if it ends an ambiguous segment: the match form's
// separators ('\', and '/' from %2F) and ';' end one.
func (d *dotSpaces) add(c byte) bool {
	switch {
	case c == '/' || c == '\\':
		if d.ambiguous() {
			return false
		}
		*d = dotSpaces{}
	case d.params:
	case c == ';':
		if d.ambiguous() {
			return false
		}
		d.params = true
	case c == '.':
		d.n++
		d.dots++
	case c == ' ':
		d.n++
	default:
		d.other = true
	}
	return true
}

// ambiguous reports whether the segment is only dots and spaces, and is
// not "." or "..".
func (d *dotSpaces) ambiguous() bool {
	return !d.other && d.n > 0 && !(d.n == d.dots && d.n <= 2)
}

// AppendMatchPath appends the form of a canonical path (from
// AppendCanonicalPath) that routes are matched against. Matching is
// conservative: every spelling an origin might route to /login must match
// /login. Beyond the canonical form it:
//
//   - takes %2F, %5C and '\' as '/' (origins that decode before routing, or
//     treat a backslash as a slash, see a separator there);
//   - drops ";params" from each segment, ';' and %3B alike, as Tomcat and
//     other servlet containers do before routing ("/login;jsessionid=x",
//     "/..;/login");
//   - drops a segment's trailing dots and spaces (' ' and %20), as Windows
//     origins do (IIS serves "/login." and "/.git./config" as "/login" and
//     "/.git/config"), unless the segment is "." or ".."; a segment of
//     nothing else, which AppendCanonicalPath refuses, is left out
//     (docs/host-and-path.md §2);
//   - then resolves "." and ".." segments and collapses slashes again;
//   - drops a trailing slash ("/" stays "/");
//   - lowercases ASCII letters (not the hex digits of escapes) when
//     caseInsensitive is set.
//
// It also decodes unreserved escapes, which a canonical path no longer has,
// and reads any other input as if it started with '/'. The result starts
// with '/' and is idempotent on canonical paths; for a canonical path it is
// never longer than its input, so AppendMatchPath does not allocate when dst
// has len(canonical) bytes of room.
func AppendMatchPath(dst, canonical []byte, caseInsensitive bool) []byte {
	if caseInsensitive && needsFold(canonical) {
		// Fold non-ASCII spellings first (fold.go), then match the result;
		// the folded copy sits in dst's spare room and is moved down.
		base := len(dst)
		dst = appendFolded(dst, canonical)
		folded := len(dst)
		dst = appendMatchPath(dst, dst[base:folded], true)
		n := copy(dst[base:], dst[folded:])
		return dst[:base+n]
	}
	return appendMatchPath(dst, canonical, caseInsensitive)
}

func appendMatchPath(dst, canonical []byte, caseInsensitive bool) []byte {
	base := len(dst)
	dst = append(dst, '/')
	p := canonical
	for i := 0; ; {
		seg := len(dst)
		params := false // inside ";params", up to the next separator
		sep := 0        // the separator's length: '/' and '\' are 1, %2F and %5C 3
		for i < len(p) {
			c, n, escaped := pathMatchByte(p, i)
			if !escaped && (c == '/' || c == '\\') {
				sep = n
				break
			}
			i += n
			switch {
			case params:
			case escaped:
				dst = append(dst, '%', pathUpperHex[c>>4], pathUpperHex[c&15])
			case c == ';':
				params = true
			default:
				if caseInsensitive && 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				dst = append(dst, c)
			}
		}
		dst = dst[:seg+trimDotSpaces(dst[seg:])]
		last := i >= len(p)
		dst = pathEndSegment(dst, base, seg, last)
		if last {
			break
		}
		i += sep
	}
	if n := len(dst); n-base > 1 && dst[n-1] == '/' {
		dst = dst[:n-1]
	}
	return dst
}

// trimDotSpaces returns the length of the match-form segment s without its
// trailing dots, spaces and %20s; a "." or ".." segment is kept whole.
func trimDotSpaces(s []byte) int {
	if len(s) == 1 && s[0] == '.' || len(s) == 2 && s[0] == '.' && s[1] == '.' {
		return len(s)
	}
	n := len(s)
	for n > 0 {
		switch {
		case s[n-1] == '.' || s[n-1] == ' ':
			n--
		case n >= 3 && s[n-3] == '%' && s[n-2] == '2' && s[n-1] == '0':
			n -= 3
		default:
			return n
		}
	}
	return 0
}

// pathMatchByte returns the byte at p[i] for AppendMatchPath and how many
// bytes of p it takes. A valid escape of an unreserved character, '/', '\'
// or ';' is decoded, with escaped false; any other valid escape comes back
// as its value with escaped true, to be written out encoded again; an
// invalid '%' is a literal byte.
func pathMatchByte(p []byte, i int) (c byte, n int, escaped bool) {
	if p[i] != '%' {
		return p[i], 1, false
	}
	v, valid := pathUnescape(p, i)
	switch {
	case !valid:
		return '%', 1, false
	case pathUnreserved(v), v == '/', v == '\\', v == ';':
		return v, 3, false
	}
	return v, 3, true
}

// pathEndSegment finishes the segment dst[seg:] of the path that starts at
// dst[base] (a '/'): it removes a "." segment, removes a ".." segment with
// the segment before it (if any, so never above the root), leaves an empty
// segment out, and otherwise ends the segment with '/' unless it is the
// last. dst[seg-1] is the '/' before the segment.
func pathEndSegment(dst []byte, base, seg int, last bool) []byte {
	switch s := dst[seg:]; {
	case len(s) == 0:
		// An empty segment: "//" collapses, and a trailing '/' is already
		// there.
	case len(s) == 1 && s[0] == '.':
		dst = dst[:seg]
	case len(s) == 2 && s[0] == '.' && s[1] == '.':
		dst = dst[:seg]
		if seg-1 > base {
			dst = dst[:base+bytes.LastIndexByte(dst[base:seg-1], '/')+1]
		}
	case !last:
		dst = append(dst, '/')
	}
	return dst
}

// pathUnescape decodes the escape "%XX" at p[i]; valid is false if two hex
// digits do not follow.
func pathUnescape(p []byte, i int) (v byte, valid bool) { return httpsyntax.Unescape(p, i) }

// pathUnreserved reports whether c is an RFC 3986 unreserved character.
func pathUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
