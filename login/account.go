package login

import (
	"bytes"
	"errors"
	"slices"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// MaxAccountBytes caps an account identifier as sent: a longer one is an
// invalid identity, refused before any Unicode work. An email address is
// at most 254 bytes (RFC 5321 §4.5.3.1.3 with its path's brackets
// removed); a username is shorter.
const MaxAccountBytes = 512

// ErrInvalidAccount is Normalize's error for an account that is empty
// once normalised, too long, not UTF-8, or holds a control character.
var ErrInvalidAccount = errors.New("invalid account")

// Normalizer turns an account identifier into the form an identity
// provider and an origin's database compare, appending to caller-owned
// buffers so that, once warm, it allocates nothing. A Normalizer is not
// safe for concurrent use; the engine keeps one per pooled Scratch.
type Normalizer struct {
	a, b []byte
	c    *collator // made at the first account that is not ASCII
}

// collator is a Normalizer's Unicode collation at primary strength and its
// buffers (a collate.Collator is not safe for concurrent use).
type collator struct {
	col             *collate.Collator
	buf, sub, probe collate.Buffer // the account's key, appendNewer's, weightRune's
	fold            cases.Caser
	nfkc, cf        []byte
}

func newCollator() *collator {
	return &collator{col: collate.New(language.Und, collate.IgnoreCase, collate.IgnoreDiacritics, collate.IgnoreWidth), fold: cases.Fold()}
}

// Normalize appends the normal form of raw to dst: surrounding white space
// trimmed, then the spelling of raw's primary collation key (Unicode
// collation at primary strength, golang.org/x/text/collate's CLDR root
// order with case, accents and width ignored: appendPrimary), NFC, white
// space trimmed again. Two spellings that the collation takes as one
// (MySQL 8's default utf8mb4_0900_ai_ci and SQL Server's _CI_AI compare
// accounts so) give one value, so none gets a fresh budget: "Alice@Example.com",
// " alice@example.com", "ａｌｉｃｅ@example.com", "alicé@example.com",
// "ÀLICE@example.com", "ali\u00adce@example.com" are "alice@example.com"
// (docs/policy.md, "The account's normal form"). An ASCII account is
// lower-cased, which is its key's spelling. It returns ErrInvalidAccount
// for raw over MaxAccountBytes, not valid UTF-8, holding a control
// character, or empty once normalised. With aliases, provider aliases of
// an email address are folded too (Aliases).
func (n *Normalizer) Normalize(dst []byte, raw string, aliases bool) ([]byte, error) {
	if len(raw) > MaxAccountBytes || !utf8.ValidString(raw) {
		return dst, ErrInvalidAccount
	}
	raw = trimSpace(raw)
	for _, r := range raw {
		if unicode.IsControl(r) {
			return dst, ErrInvalidAccount
		}
	}
	var v []byte
	if isASCII(raw) {
		// ASCII's primary key spells it lower-cased (TestFoldTable): the
		// common account allocates nothing.
		n.a = append(n.a[:0], raw...)
		for i, c := range n.a {
			if 'A' <= c && c <= 'Z' {
				n.a[i] = c + 'a' - 'A'
			}
		}
		v = n.a
	} else {
		if n.c == nil {
			n.c = newCollator()
		}
		n.b = n.c.appendPrimary(n.b[:0], raw)
		n.a = norm.NFC.Append(n.a[:0], n.b...)
		v = bytes.TrimFunc(n.a, unicode.IsSpace)
	}
	if len(v) == 0 {
		return dst, ErrInvalidAccount
	}
	if aliases {
		return appendAliasFolded(dst, v), nil
	}
	return append(dst, v...), nil
}

// appendPrimary appends to dst the spelling of s's primary collation key:
// each primary weight, in order, written as its canonical rune
// (weightRune), and nothing for the weights of what the collation
// ignores. The normal form is thus a function of the key, and two
// spellings the collation takes as one are one normal form whatever
// expansions, contractions, ignorables and marks they hold.
func (c *collator) appendPrimary(dst []byte, s string) []byte {
	c.buf.Reset()
	key := c.col.KeyFromString(&c.buf, s)
	for len(key) > 0 {
		var w int
		w, key = nextPrimary(key)
		r, newer := c.weightRune(w)
		switch {
		case r < 0:
		case newer:
			dst = c.appendNewer(dst, r)
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// appendNewer appends the spelling of r, a code point that the
// collation's data (Unicode 6.2, collationUnicodeVersion) does not know
// and weighs by its code point alone: nothing for a format character, a
// mark or another default ignorable of Go's Unicode tables (which Unicode's
// own collation table, DUCET, ignores at primary strength), else the
// primary spelling of r's NFKC and case folding when they change it (a
// lower-case letter of a script whose capitals the data knows), else r.
func (c *collator) appendNewer(dst []byte, r rune) []byte {
	if unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) {
		return dst
	}
	var rb [utf8.UTFMax]byte
	raw := rb[:utf8.EncodeRune(rb[:], r)]
	c.nfkc = norm.NFKC.Append(c.nfkc[:0], raw...)
	var err error
	if c.cf, err = transformAppend(c.fold, c.cf[:0], c.nfkc); err != nil || bytes.Equal(c.cf, raw) {
		return append(dst, raw...)
	}
	c.sub.Reset()
	key := c.col.Key(&c.sub, c.cf)
	for len(key) > 0 {
		var w int
		w, key = nextPrimary(key)
		if x, _ := c.weightRune(w); x >= 0 {
			dst = utf8.AppendRune(dst, x)
		}
	}
	return dst
}

// nextPrimary reads the first primary weight of a key at primary strength:
// two bytes, or three when the first has its high bit set
// (golang.org/x/text/collate's appendPrimary, checked by TestFoldTable).
func nextPrimary(key []byte) (int, []byte) {
	if key[0]&0x80 == 0 || len(key) < 3 {
		if len(key) < 2 {
			return 0, nil
		}
		return int(key[0])<<8 | int(key[1]), key[2:]
	}
	return int(key[0]&0x7f)<<16 | int(key[1])<<8 | int(key[2]), key[3:]
}

// The collation weighs a code point its data does not list by the code
// point plus an offset (golang.org/x/text/internal/colltab's
// implicitPrimary, checked by TestFoldTable): the common unified
// ideographs, the other ideographs, and the rest, which are the code
// points newer than its data (or unassigned). The last two overlap: an
// ideograph from U+30000 on (Unicode 13 and later) weighs what a code point
// 0x30000 below it does when the data does not know that one.
const (
	implicitCommon = 0x10000
	implicitRare   = 0x20000
	implicitOther  = 0x50000
)

// weightRune returns the canonical rune of primary weight w: from
// primaryRuns for the weights the data lists (-1 for one whose canonical
// rune Go's Unicode tables make a format character: U+180E, a space in the
// data's Unicode 6.2, ignored since 6.3), the code point itself for an
// implicit weight, newer reporting one the data does not know. Where an
// ideograph and a newer code point share a weight, the newer code point is
// read when Go's tables assign it (an account holds a U+2066 more often
// than a U+32066), else the ideograph. A weight the table lacks (a
// contraction's own, if any) becomes a rune of the Supplementary Private
// Use Area-B, so that the spelling stays a function of the key.
func (c *collator) weightRune(w int) (r rune, newer bool) {
	switch {
	case w >= implicitOther:
		r, x := rune(w-implicitOther), rune(w-implicitRare)
		if !unicode.Is(unicode.Ideographic, x) {
			return r, true
		}
		if assigned(r) {
			c.probe.Reset()
			var rb [utf8.UTFMax]byte
			if k := c.col.Key(&c.probe, rb[:utf8.EncodeRune(rb[:], r)]); len(k) == 3 {
				if kw, _ := nextPrimary(k); kw == w {
					return r, true
				}
			}
		}
		return x, false
	case w >= implicitRare:
		return rune(w - implicitRare), false
	case w >= implicitCommon:
		return rune(w - implicitCommon), false
	}
	return listedRune(w), false
}

// listedRune returns the canonical rune of a weight below implicitCommon
// (weightRune) from primaryRuns.
func listedRune(w int) rune {
	lo, hi := 0, len(primaryRuns)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(primaryRuns[m].w)+int(primaryRuns[m].n) <= w {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(primaryRuns) && int(primaryRuns[lo].w) <= w {
		if run := primaryRuns[lo]; run.r >= 0 {
			return run.r + rune(w-int(run.w))
		}
		return -1
	}
	return 0x100000 + rune(w)
}

// assigned reports whether Go's Unicode tables assign r a category other
// than control, private use or surrogate.
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cf)
}

// primaryRun maps the primary weights [w, w+n) to the runes [r, r+n), or
// to nothing when r is -1 (primaryRuns).
type primaryRun struct {
	w, n uint16
	r    rune
}

func isASCII[T ~string | ~[]byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += w
	}
	for j > i {
		r, w := utf8.DecodeLastRuneInString(s[i:j])
		if !unicode.IsSpace(r) {
			break
		}
		j -= w
	}
	return s[i:j]
}

// transformAppend appends t's transformation of src to dst, growing dst
// as needed (once per buffer: a warm buffer is reused).
func transformAppend(t transform.Transformer, dst, src []byte) ([]byte, error) {
	t.Reset()
	for {
		nDst, nSrc, err := t.Transform(dst[len(dst):cap(dst)], src, true)
		dst = dst[:len(dst)+nDst]
		src = src[nSrc:]
		switch err {
		case nil:
			return dst, nil
		case transform.ErrShortDst:
			dst = slices.Grow(dst, max(len(src)*2, 64))
		default:
			return dst, err
		}
	}
}

// Providers whose mailboxes have aliases that reach one inbox, and how
// (Aliases). Each entry is the domain's canonical form.
var (
	// dotsAndTags: the local part's dots are ignored and "+tag" is a
	// subaddress (Gmail; googlemail.com is the same service).
	dotsAndTags = map[string]string{"gmail.com": "gmail.com", "googlemail.com": "gmail.com"}
	// plusTags: "+tag" is a subaddress.
	plusTags = map[string]bool{
		"outlook.com": true, "hotmail.com": true, "live.com": true,
		"icloud.com": true, "me.com": true, "mac.com": true,
		"fastmail.com": true, "protonmail.com": true, "proton.me": true,
	}
)

// appendAliasFolded appends an already normalised account with the
// aliases of its email provider folded (the rule's account_aliases): at
// Gmail (gmail.com, googlemail.com) dots in the local part are dropped,
// a "+tag" is dropped and the domain becomes gmail.com; at the providers
// of plusTags a "+tag" is dropped. Anything else, an address with no '@'
// or more than one included, is appended as it is. Signup rules use it:
// "j.doe+1@gmail.com" and "jdoe@googlemail.com" are one inbox, so one
// signup budget.
func appendAliasFolded(dst, v []byte) []byte {
	at := bytes.IndexByte(v, '@')
	if at <= 0 || bytes.IndexByte(v[at+1:], '@') >= 0 {
		return append(dst, v...)
	}
	local, domain := v[:at], v[at+1:]
	canon, gmail := dotsAndTags[string(domain)]
	if !gmail && !plusTags[string(domain)] {
		return append(dst, v...)
	}
	if i := bytes.IndexByte(local, '+'); i > 0 {
		local = local[:i]
	}
	start := len(dst)
	for _, c := range local {
		if gmail && c == '.' {
			continue
		}
		dst = append(dst, c)
	}
	if len(dst) == start {
		return append(dst[:start], v...) // nothing left of the local part: keep it whole
	}
	dst = append(dst, '@')
	if gmail {
		return append(dst, canon...)
	}
	return append(dst, domain...)
}
