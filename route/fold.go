package route

import (
	"unicode"
	"unicode/utf8"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// Unicode folding for route and method matching. Origins compare paths and
// methods in many ways: Go's strings.ToLower maps "İ" (U+0130) to "i", JS
// toUpperCase maps "ſ" (U+017F) to "S", .NET and Java fold the Kelvin sign
// "K" (U+212A) to "k", IIS "best fit" maps fullwidth forms ("Ｌ", U+FF2C) to
// ASCII. Matching must be conservative (a spelling any origin routes to
// /login must match /login), so the match form folds every rune that one of
// these maps to ASCII.

// foldRune returns the ASCII letter or character r folds to, or r.
func foldRune(r rune) rune {
	if 0xFF01 <= r && r <= 0xFF5E { // fullwidth ASCII variants
		r -= 0xFEE0
	}
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	if l := unicode.ToLower(r); l < utf8.RuneSelf {
		return l
	}
	if u := unicode.ToUpper(r); u < utf8.RuneSelf {
		return unicode.ToLower(u)
	}
	return r
}

// needsFold reports whether p has a raw byte or a percent-escape of a byte
// at or above 0x80: only then can Unicode folding change the match form.
func needsFold(p []byte) bool {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c >= utf8.RuneSelf:
			return true
		case c == '%':
			if v, ok := httpsyntax.Unescape(p, i); ok && v >= utf8.RuneSelf {
				return true
			}
		}
	}
	return false
}

// appendFolded appends p with percent-escapes of bytes >= 0x80 decoded,
// every rune that folds to ASCII written as that ASCII byte, and every other
// non-ASCII rune (or invalid byte) written back percent-encoded.
func appendFolded(dst, p []byte) []byte {
	var raw [utf8.UTFMax]byte
	for i := 0; i < len(p); {
		// Gather one rune's bytes, raw or escaped.
		n, j := 0, i
		for n < utf8.UTFMax && j < len(p) {
			c, w := p[j], 1
			if c == '%' {
				if v, ok := httpsyntax.Unescape(p, j); ok && v >= utf8.RuneSelf {
					c, w = v, 3
				}
			}
			if c < utf8.RuneSelf || (n > 0 && c&0xC0 != 0x80) {
				break
			}
			raw[n] = c
			n++
			j += w
			if utf8.FullRune(raw[:n]) {
				break
			}
		}
		if n == 0 {
			dst = append(dst, p[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(raw[:n])
		if f := foldRune(r); r != utf8.RuneError && size == n && f < utf8.RuneSelf {
			dst = append(dst, byte(f))
		} else {
			for _, b := range raw[:n] {
				dst = append(dst, '%', pathUpperHex[b>>4], pathUpperHex[b&15])
			}
		}
		i = j
	}
	return dst
}

// AppendMethodTokens appends the methods a method-override header value may
// name, each upper case and followed by a space: every run of ASCII letters
// after Unicode folding. "POST\u00a0" and "post, GET" name POST (and GET),
// whatever an origin trims or splits. Matching under every token is
// conservative: a request is held to every rule any of them matches.
func AppendMethodTokens(dst, v []byte) []byte {
	in := false
	for i := 0; i < len(v); {
		r, w := rune(v[i]), 1
		if r >= utf8.RuneSelf {
			r, w = utf8.DecodeRune(v[i:])
		}
		i += w
		r = foldRune(r)
		if 'a' <= r && r <= 'z' {
			dst = append(dst, byte(r-'a'+'A'))
			in = true
			continue
		}
		if in {
			dst = append(dst, ' ')
			in = false
		}
	}
	if in {
		dst = append(dst, ' ')
	}
	return dst
}
