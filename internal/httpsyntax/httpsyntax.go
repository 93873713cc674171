// Package httpsyntax holds the character classes of HTTP's grammar that
// several packages of the edge parse with: RFC 9110's token (§5.6.2) and
// optional whitespace (§5.6.3), and the hexadecimal digits of
// percent-encoding (RFC 3986 §2.1). One table, so no two parsers of the
// edge can disagree on what a token is.
package httpsyntax

// tchar is RFC 9110 §5.6.2's tchar: ALPHA, DIGIT and
// "!#$%&'*+-.^_`|~".
var tchar = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()

// IsTokenChar reports whether c is an RFC 9110 tchar (§5.6.2).
func IsTokenChar(c byte) bool { return tchar[c] }

// IsToken reports whether s is a non-empty RFC 9110 token: one or more
// tchars (§5.6.2). Methods, header field names, cookie names and media
// type names are tokens.
func IsToken[T ~string | ~[]byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tchar[s[i]] {
			return false
		}
	}
	return true
}

// IsOWS reports whether c is RFC 9110 optional whitespace (§5.6.3): a
// space or a horizontal tab.
func IsOWS(c byte) bool { return c == ' ' || c == '\t' }

// TrimOWS returns b without the optional whitespace (§5.6.3) around it: a
// field value as the grammar reads it. It shares b's memory.
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && IsOWS(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && IsOWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// Unhex returns the value of hexadecimal digit c (RFC 3986 §2.1 HEXDIG,
// either letter case) and true, or 0 and false when c is not one.
func Unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Unescape decodes the percent-escape "%XX" at s[i] (RFC 3986 §2.1): the
// byte, and false when two hexadecimal digits do not follow s[i].
func Unescape(s []byte, i int) (byte, bool) {
	if i+2 >= len(s) {
		return 0, false
	}
	hi, ok1 := Unhex(s[i+1])
	lo, ok2 := Unhex(s[i+2])
	return hi<<4 | lo, ok1 && ok2
}
