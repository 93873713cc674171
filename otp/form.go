package otp

import (
	"bytes"
	"unicode/utf8"
)

// FormField reads the field name of an application/x-www-form-urlencoded
// body the way origins' parsers read it, so the edge and the origin never
// disagree about which value a request names.
//
// Pairs are separated by '&' only (as Go since 1.17, PHP, Express and
// Python since 3.10 separate them); '+' is a space and %XX a byte. A bad
// percent escape anywhere in the body is ErrMalformed: Go's ParseForm
// drops the pair and PHP keeps the '%' as text. A pair without '=' has the
// empty value. Names are compared exactly (case-sensitive), after decoding.
//
// Origins disagree about duplicates: Go's FormValue takes the first, PHP
// the last, Express makes an array. So every pair that names the field
// must carry the same value, or err is ErrAmbiguous. A pair counts as
// naming the field when its decoded name is name, or when PHP would file it
// under name: PHP drops leading spaces, cuts the name at a NUL byte and
// turns ' ', '.' and an unclosed '[' into '_', so "challenge.id" is
// challenge_id to a PHP origin. A name that PHP or Express reads as an
// array or a map ("phone[]", "phone[0]", "phone[x]") is ErrAmbiguous: the
// origin sees no string there, the edge must not pick one.
//
// The value is returned decoded; one that is not valid UTF-8 is
// ErrMalformed (Express keeps such an escape as its text, Go and PHP turn
// it into bytes). The work is linear in len(body).
func FormField(body []byte, name string) (value string, found bool, err error) {
	var kbuf, vbuf, dbuf [128]byte
	kb, val := kbuf[:0], vbuf[:0]
	ambiguous := false // reported once the whole body is known well-formed
	for len(body) > 0 {
		var pair []byte
		if i := bytes.IndexByte(body, '&'); i >= 0 {
			pair, body = body[:i], body[i+1:]
		} else {
			pair, body = body, nil
		}
		if len(pair) == 0 {
			continue
		}
		k, v, _ := bytes.Cut(pair, []byte{'='})
		var ok bool
		if kb, ok = appendUnescaped(kb[:0], k); !ok {
			return "", false, ErrMalformed
		}
		m := formKeyMatch(kb, name)
		if m == keyOther || ambiguous {
			if !validEscapes(v) {
				return "", false, ErrMalformed
			}
			continue
		}
		if m == keyArray {
			if !validEscapes(v) {
				return "", false, ErrMalformed
			}
			ambiguous = true
			continue
		}
		cur := dbuf[:0]
		if !found {
			cur = val[:0]
		}
		if cur, ok = appendUnescaped(cur, v); !ok || !utf8.Valid(cur) {
			return "", false, ErrMalformed
		}
		if !found {
			val, found = cur, true
		} else if !bytes.Equal(val, cur) {
			ambiguous = true
		}
	}
	switch {
	case ambiguous:
		return "", false, ErrAmbiguous
	case !found:
		return "", false, nil
	}
	return string(val), true, nil
}

// QueryField reads the parameter name of a raw query string (without the
// '?') exactly as FormField reads a form body: origins parse both with the
// same code.
func QueryField(rawQuery []byte, name string) (value string, found bool, err error) {
	return FormField(rawQuery, name)
}

type keyMatch uint8

const (
	keyOther keyMatch = iota // names another field
	keyFlat                  // names the field
	keyArray                 // names the field as an array or a map
)

// formKeyMatch tells whether a decoded form key names the field name, to
// Go and Express (exactly) or to PHP (php_register_variable_ex: leading
// spaces dropped, the name cut at a NUL byte, ' ' and '.' turned into '_'
// up to the first '['; a '[' with a ']' after it makes an array, an
// unclosed one becomes '_' and so do ' ', '.' and '[' after it). Express's
// qs reads "name[...]" as an array or a map as PHP does.
func formKeyMatch(key []byte, name string) keyMatch {
	if string(key) == name {
		return keyFlat
	}
	if i := bytes.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	for len(key) > 0 && key[0] == ' ' {
		key = key[1:]
	}
	// Compare PHP's variable name with name, byte by byte, without
	// building it.
	n := 0 // bytes of name matched
	unclosed := false
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == ' ' || c == '.':
			c = '_'
		case c == '[' && !unclosed:
			if bytes.IndexByte(key[i+1:], ']') >= 0 {
				if n == len(name) && n > 0 {
					return keyArray
				}
				return keyOther
			}
			unclosed = true
			c = '_'
		case c == '[':
			c = '_'
		}
		if n == len(name) || name[n] != c {
			return keyOther
		}
		n++
	}
	if n == len(name) && n > 0 {
		return keyFlat
	}
	return keyOther
}

// appendUnescaped appends the form-decoded s ('+' is a space, %XX a byte)
// to dst; ok is false for a '%' not followed by two hex digits.
func appendUnescaped(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			dst = append(dst, ' ')
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return dst, false
			}
			dst = append(dst, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, true
}

// validEscapes reports whether every '%' in s starts a %XX escape.
func validEscapes(s []byte) bool {
	for {
		i := bytes.IndexByte(s, '%')
		if i < 0 {
			return true
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		s = s[i+3:]
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
