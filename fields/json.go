package fields

import (
	"bytes"
	"errors"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// maxJSONDepth is encoding/json's nesting limit: a document it refuses as
// too deep is malformed here too.
const maxJSONDepth = 10000

// maxSafeInteger is 2^53 - 1, the largest integer every JSON parser reads
// exactly (JavaScript's Number.MAX_SAFE_INTEGER).
const maxSafeInteger = 1<<53 - 1

var errEmptyPath = errors.New("empty json path")

// JSONField reads the field at path (["user", "phone"] for json:user.phone)
// of a JSON body, the way the origin's parser reads it, so the edge and the
// origin never disagree about which value a request names
// (docs/body-identities.md §4).
//
// The whole body must be well-formed JSON (RFC 8259, nested at most as
// deep as encoding/json allows) and more: valid UTF-8 throughout (Go and
// Express replace a bad byte with U+FFFD, Python and PHP fail), no \u
// escape of a lone surrogate (Go replaces it, Python keeps it, PHP fails)
// and no \u0000 (origins written in C, and databases, cut strings at a
// NUL), or err is ErrMalformed. A leading byte order mark is ErrMalformed
// too (Python skips it, PHP and Go fail). An empty or all-space body, a
// top-level value that is not an object, a key missing along the path, or
// a step through something that is not an object: found is false and err
// nil.
//
// Keys match the way encoding/json matches struct fields: exact or
// case-insensitive (bytes.EqualFold after decoding escapes). Of several
// matching keys, Go's struct decoding takes the last that matches
// case-insensitively (merging objects), JavaScript, Python and Go's map
// decoding the last exact match. So every key along the path that matches
// must carry the same value, or err is ErrAmbiguous: byte-identical text
// for objects on the way, the same decoded string or number text at the
// end ("2" and "\u0032" agree). The value must be a string (returned
// decoded) or an integer that every parser reads exactly (returned as its
// text: at most 2^53-1 in magnitude, no fraction or exponent, not -0;
// other numbers are ErrAmbiguous). An object, array, boolean or null there
// is ErrNotIdentity.
//
// The work is linear in len(body) times len(path); the caller caps the body
// at max_body_bytes.
func JSONField(body []byte, path []string) (value string, found bool, err error) {
	if len(path) == 0 {
		return "", false, errEmptyPath
	}
	return ParseJSON(body).Field(path)
}

// JSONDoc is a JSON body checked once, so that several fields of it (a
// phone number and a challenge ID) are read without checking it again. It
// refers to the body, which must not change while the JSONDoc is in use.
// The zero JSONDoc is an empty body.
type JSONDoc struct {
	obj []byte // the top-level object; nil when the body holds none
	err error  // ErrMalformed or nil
}

// ParseJSON checks a JSON body as JSONField does. It never fails: a
// malformed body gives a JSONDoc whose Err and fields are ErrMalformed.
func ParseJSON(body []byte) JSONDoc {
	start := skipJSONSpace(body, 0)
	if start == len(body) {
		return JSONDoc{}
	}
	if !utf8.Valid(body) {
		return JSONDoc{err: ErrMalformed}
	}
	end, err := validateJSON(body, start)
	if err != nil {
		return JSONDoc{err: err}
	}
	if skipJSONSpace(body, end) != len(body) {
		return JSONDoc{err: ErrMalformed}
	}
	if body[start] != '{' {
		return JSONDoc{}
	}
	return JSONDoc{obj: body[start:end]}
}

// Err returns ErrMalformed for a malformed body, nil otherwise.
func (d JSONDoc) Err() error { return d.err }

// Field reads the field at path as JSONField does.
func (d JSONDoc) Field(path []string) (value string, found bool, err error) {
	switch {
	case len(path) == 0:
		return "", false, errEmptyPath
	case d.err != nil:
		return "", false, d.err
	case d.obj == nil:
		return "", false, nil
	}
	obj := d.obj
	for _, seg := range path[:len(path)-1] {
		v, ok, err := member(obj, seg, false)
		if err != nil || !ok {
			return "", false, err
		}
		if v[0] != '{' {
			return "", false, nil
		}
		obj = v
	}
	v, ok, err := member(obj, path[len(path)-1], true)
	if err != nil || !ok {
		return "", false, err
	}
	return leafValue(v)
}

// member returns the value of the member of obj (a validated object) whose
// key matches seg, checking that every matching member agrees.
func member(obj []byte, seg string, leaf bool) (v []byte, found bool, err error) {
	var kbuf [64]byte
	kb := kbuf[:0]
	i := skipJSONSpace(obj, 1)
	if obj[i] == '}' {
		return nil, false, nil
	}
	for {
		ks := i
		i = skipValidString(obj, i)
		key := obj[ks:i]
		i = skipJSONSpace(obj, i) + 1 // ':'
		i = skipJSONSpace(obj, i)
		vs := i
		i = skipValid(obj, i)
		var match bool
		match, kb = keyMatches(kb, key, seg)
		if match {
			cur := obj[vs:i]
			switch {
			case !found:
				v, found = cur, true
			case !sameJSONValue(v, cur, leaf):
				return nil, false, ErrAmbiguous
			}
		}
		i = skipJSONSpace(obj, i)
		if obj[i] == '}' {
			return v, found, nil
		}
		i = skipJSONSpace(obj, i+1) // ','
	}
}

// keyMatches reports whether a raw JSON key (with its quotes) matches seg
// as encoding/json matches a struct field: equal under bytes.EqualFold once
// decoded. A key without escapes is compared raw: bytes.EqualFold reads an
// invalid UTF-8 byte as U+FFFD, just as decoding replaces it. buf is
// scratch space, returned for reuse.
func keyMatches(buf, key []byte, seg string) (bool, []byte) {
	raw := key[1 : len(key)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return equalFoldString(raw, seg), buf
	}
	buf = appendJSONString(buf[:0], key)
	return equalFoldString(buf, seg), buf
}

// equalFoldString is bytes.EqualFold(b, []byte(s)) without the
// conversion: simple Unicode case folding, an invalid UTF-8 byte read as
// U+FFFD.
func equalFoldString(b []byte, s string) bool {
	for len(b) > 0 && len(s) > 0 {
		var r, t rune
		if b[0] < utf8.RuneSelf {
			r, b = rune(b[0]), b[1:]
		} else {
			rr, n := utf8.DecodeRune(b)
			r, b = rr, b[n:]
		}
		if s[0] < utf8.RuneSelf {
			t, s = rune(s[0]), s[1:]
		} else {
			tr, n := utf8.DecodeRuneInString(s)
			t, s = tr, s[n:]
		}
		if r == t {
			continue
		}
		if t < r {
			t, r = r, t
		}
		if t < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' && t == r+'a'-'A' {
				continue
			}
			return false
		}
		f := unicode.SimpleFold(r)
		for f != r && f < t {
			f = unicode.SimpleFold(f)
		}
		if f != t {
			return false
		}
	}
	return len(b) == 0 && len(s) == 0
}

// sameJSONValue reports whether two values of duplicate keys agree: the
// same decoded string or the same number text at the end of the path,
// byte-identical text on the way (an object merged by one parser and
// replaced by another must be the same object).
func sameJSONValue(a, b []byte, leaf bool) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if !leaf || a[0] != '"' || b[0] != '"' {
		return false
	}
	var abuf, bbuf [128]byte
	return bytes.Equal(appendJSONString(abuf[:0], a), appendJSONString(bbuf[:0], b))
}

// leafValue returns the identity a validated value holds.
func leafValue(v []byte) (string, bool, error) {
	switch c := v[0]; {
	case c == '"':
		var buf [128]byte
		return string(appendJSONString(buf[:0], v)), true, nil
	case c == '-' || (c >= '0' && c <= '9'):
		if !safeInteger(v) {
			return "", false, ErrAmbiguous
		}
		return string(v), true, nil
	}
	return "", false, ErrNotIdentity
}

// safeInteger reports whether a validated JSON number is an integer every
// parser reads as the same text: no fraction or exponent, not -0, and at
// most 2^53-1 in magnitude (JavaScript turns 12345678901234567890 into
// 12345678901234567000; Python keeps it).
func safeInteger(v []byte) bool {
	digits := v
	if digits[0] == '-' {
		digits = digits[1:]
		if len(digits) == 1 && digits[0] == '0' {
			return false
		}
	}
	if len(digits) > 16 {
		return false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + uint64(c-'0')
	}
	return n <= maxSafeInteger
}

// appendJSONString appends the decoded text of a validated JSON string
// (with its quotes) to dst, exactly as encoding/json unquotes it: invalid
// UTF-8 becomes U+FFFD byte by byte, a \u escape of a lone surrogate
// becomes U+FFFD, and a surrogate pair becomes its rune.
func appendJSONString(dst, s []byte) []byte {
	s = s[1 : len(s)-1]
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != utf8.RuneError {
						r += 6
						dst = utf8.AppendRune(dst, dec)
						continue
					}
					rr = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		v, ok := httpsyntax.Unhex(c)
		if !ok {
			return -1
		}
		r = r*16 + rune(v)
	}
	return r
}

// skipJSONSpace returns the index of the first byte at or after i that is
// not JSON white space.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainStringByte[c] is true for the bytes a JSON string holds as they
// are: neither a quote, a backslash nor a control character.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipValidString returns the index just past the validated string at i.
func skipValidString(b []byte, i int) int {
	i++
	for {
		for plainStringByte[b[i]] {
			i++
		}
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // an escape: \u's hex digits are plain bytes
	}
}

// skipValid returns the index just past the validated value at i.
func skipValid(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipValidString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '{', '[':
				depth++
				i++
			case '}', ']':
				depth--
				i++
				if depth == 0 {
					return i
				}
			case '"':
				i = skipValidString(b, i)
			default:
				i++
			}
		}
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// validateJSON checks the JSON value at b[i] (i at a non-space byte) as
// encoding/json's scanner does and returns the index just past it, or
// ErrMalformed.
func validateJSON(b []byte, i int) (int, error) {
	// stack holds one bit per open container: 1 for an object. 256 levels
	// live on the goroutine stack; deeper documents grow it on the heap.
	var small [4]uint64
	stack := small[:]
	depth := 0
	const (
		wantValue  = iota // a value must start here
		wantKey           // a key must start here
		afterValue        // a value just ended
	)
	state := wantValue
	for {
		switch state {
		case wantValue:
			i = skipJSONSpace(b, i)
			if i == len(b) {
				return 0, ErrMalformed
			}
			switch c := b[i]; c {
			case '{', '[':
				if depth == maxJSONDepth {
					return 0, ErrMalformed
				}
				if depth/64 == len(stack) {
					stack = append(stack, 0)
				}
				if c == '{' {
					stack[depth/64] |= 1 << (depth % 64)
				} else {
					stack[depth/64] &^= 1 << (depth % 64)
				}
				depth++
				i = skipJSONSpace(b, i+1)
				switch {
				case i == len(b):
					return 0, ErrMalformed
				case c == '{' && b[i] == '}', c == '[' && b[i] == ']':
					depth--
					i++
					state = afterValue
				case c == '{':
					state = wantKey
				}
			case '"':
				end, ok := scanString(b, i)
				if !ok {
					return 0, ErrMalformed
				}
				i = end
				state = afterValue
			case 't':
				if !bytes.HasPrefix(b[i:], []byte("true")) {
					return 0, ErrMalformed
				}
				i += 4
				state = afterValue
			case 'f':
				if !bytes.HasPrefix(b[i:], []byte("false")) {
					return 0, ErrMalformed
				}
				i += 5
				state = afterValue
			case 'n':
				if !bytes.HasPrefix(b[i:], []byte("null")) {
					return 0, ErrMalformed
				}
				i += 4
				state = afterValue
			default:
				end, ok := scanNumber(b, i)
				if !ok {
					return 0, ErrMalformed
				}
				i = end
				state = afterValue
			}
		case wantKey:
			i = skipJSONSpace(b, i)
			if i == len(b) || b[i] != '"' {
				return 0, ErrMalformed
			}
			end, ok := scanString(b, i)
			if !ok {
				return 0, ErrMalformed
			}
			i = skipJSONSpace(b, end)
			if i == len(b) || b[i] != ':' {
				return 0, ErrMalformed
			}
			i++
			state = wantValue
		case afterValue:
			if depth == 0 {
				return i, nil
			}
			i = skipJSONSpace(b, i)
			if i == len(b) {
				return 0, ErrMalformed
			}
			inObject := stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			switch b[i] {
			case ',':
				i++
				if inObject {
					state = wantKey
				} else {
					state = wantValue
				}
			case '}':
				if !inObject {
					return 0, ErrMalformed
				}
				depth--
				i++
			case ']':
				if inObject {
					return 0, ErrMalformed
				}
				depth--
				i++
			default:
				return 0, ErrMalformed
			}
		}
	}
}

// scanString checks the string at b[i] ('"') and returns the index just
// past its closing quote. Control characters, unknown escapes, \u0000 and
// \u escapes of lone surrogates are refused (docs/body-identities.md
// §4); the caller checks UTF-8.
func scanString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		for i < len(b) && plainStringByte[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 == len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r := getu4(b[i:])
				switch {
				case r <= 0, 0xDC00 <= r && r <= 0xDFFF:
					return 0, false // bad hex, NUL, a lone low surrogate
				case 0xD800 <= r && r <= 0xDBFF:
					if lo := getu4(b[i+6:]); lo < 0xDC00 || lo > 0xDFFF {
						return 0, false // a high surrogate not followed by a low one
					}
					i += 12
				default:
					i += 6
				}
			default:
				return 0, false
			}
		default: // a control character
			return 0, false
		}
	}
	return 0, false
}

// scanNumber checks the RFC 8259 number at b[i] and returns the index just
// past it.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i == len(b):
		return 0, false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
