package login

import (
	"bytes"
	"errors"
	"slices"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
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

// fold is Unicode full case folding (Unicode 15's CaseFolding.txt, C+F), as
// golang.org/x/text implements it; stateless, safe for concurrent use.
var fold = cases.Fold()

// Normalizer turns an account identifier into the form an identity
// provider compares, appending to caller-owned buffers so that, once warm,
// it allocates nothing. A Normalizer is not safe for concurrent use; the
// engine keeps one per pooled Scratch.
type Normalizer struct {
	a, b []byte
}

// Normalize appends the normal form of raw to dst: surrounding white space
// trimmed, NFKC (compatibility characters such as full-width letters and
// ligatures become their plain forms), Unicode case folding, accents
// folded as Unicode collation at primary strength folds them (foldAccents:
// é is e, ø is o, æ is ae, a zero-width space is nothing), NFKC again, white
// space trimmed again. Every spelling a case- and accent-insensitive
// database collation (MySQL 8's default utf8mb4_0900_ai_ci, SQL Server's
// _CI_AI) or an identity provider treats as one account
// ("Alice@Example.com", " alice@example.com", "ａｌｉｃｅ@example.com",
// "alicé@example.com", "ÀLICE@example.com") gives one value, so none gets
// a fresh budget (docs/policy.md, "The account's normal form"). It returns
// ErrInvalidAccount for raw over MaxAccountBytes, not valid UTF-8, holding
// a control character, or empty once normalised. With aliases, provider
// aliases of an email address are folded too (Aliases).
func (n *Normalizer) Normalize(dst []byte, raw string, aliases bool) ([]byte, error) {
	if len(raw) > MaxAccountBytes || !utf8.ValidString(raw) {
		return dst, ErrInvalidAccount
	}
	raw = trimSpace(raw)
	var v []byte
	if isASCII(raw) {
		// ASCII is its own NFKC form, and its case folding is lower case:
		// the common account allocates nothing.
		n.a = append(n.a[:0], raw...)
		for i, c := range n.a {
			if 'A' <= c && c <= 'Z' {
				n.a[i] = c + 'a' - 'A'
			}
		}
		v = n.a
	} else {
		n.a = norm.NFKC.AppendString(n.a[:0], raw)
		var err error
		if n.b, err = transformAppend(fold, n.b[:0], n.a); err != nil {
			return dst, ErrInvalidAccount
		}
		if isASCII(n.b) {
			// Full-width Latin and the like: ASCII once NFKC and folded,
			// and ASCII has no accents.
			v = bytes.TrimFunc(n.b, unicode.IsSpace)
		} else {
			n.a = norm.NFC.Append(n.a[:0], n.b...)
			n.b = foldAccents(n.b[:0], n.a)
			n.a = norm.NFKC.Append(n.a[:0], n.b...)
			v = bytes.TrimFunc(n.a, unicode.IsSpace)
		}
	}
	if len(v) == 0 {
		return dst, ErrInvalidAccount
	}
	for _, r := range string(v) {
		if unicode.IsControl(r) {
			return dst, ErrInvalidAccount
		}
	}
	if aliases {
		return appendAliasFolded(dst, v), nil
	}
	return append(dst, v...), nil
}

// foldAccents appends src with accents folded, as a collation at primary
// strength compares them, to dst: the letters of foldTable replaced by
// their base letters (é by e, ø by o, ǣ by ae, but й kept, which the
// collation tells from и), the combining marks it ignores removed (an
// acute accent written apart; a diaeresis after a Latin letter, the marks
// of latinMarks; a Devanagari vowel sign is kept), every format character
// (Cf: zero-width spaces and joiners, the soft hyphen, bidirectional
// marks) removed, and "l·", NFKC's ŀ, read as l. src is NFC and case
// folded. Both tables are the collation's, derived by TestFoldTable.
func foldAccents(dst, src []byte) []byte {
	latin := false // the last letter written is Latin
	for i := 0; i < len(src); {
		r, w := utf8.DecodeRune(src[i:])
		i += w
		if r < utf8.RuneSelf {
			dst = append(dst, byte(r))
			latin = 'a' <= r && r <= 'z'
			continue
		}
		if v, ok := foldTable[r]; ok {
			dst = append(dst, v...)
			if v != "" {
				latin = unicode.Is(unicode.Latin, lastRune(dst))
			}
			continue
		}
		switch {
		case unicode.Is(unicode.Cf, r):
		case latin && latinMarks[r]:
		case r == '\u00b7' && len(dst) > 0 && dst[len(dst)-1] == 'l':
			// "l·", which NFKC makes of ŀ: the collation's contraction, l.
		default:
			dst = utf8.AppendRune(dst, r)
			if !unicode.Is(unicode.Mn, r) {
				latin = unicode.Is(unicode.Latin, r)
			}
		}
	}
	return dst
}

// lastRune returns the last rune of b (utf8.RuneError when none).
func lastRune(b []byte) rune {
	r, _ := utf8.DecodeLastRune(b)
	return r
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
