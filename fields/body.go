package fields

import (
	"bytes"
	"errors"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// BodyFormat is how a request body is read: which of json: and form:
// sources apply to it.
type BodyFormat uint8

// The body formats.
const (
	// BodyNone: no Content-Type and an empty body. No field is in the
	// body; the query and cookies are still checked (Source.CheckMerged).
	BodyNone BodyFormat = iota
	// BodyJSON: json: sources apply.
	BodyJSON
	// BodyForm: form: sources apply.
	BodyForm
	// BodyAmbiguous: a form-typed body that origins read as JSON or as a
	// form. No source can be trusted.
	BodyAmbiguous
	// BodyUnreadable: a body origins read in ways the edge cannot follow
	// (a Content-Type that does not parse, names another type or charset,
	// or is missing before a body; a byte order mark). No source can be
	// trusted.
	BodyUnreadable
)

// String returns "none", "json", "form", "ambiguous" or "unreadable".
func (f BodyFormat) String() string {
	switch f {
	case BodyJSON:
		return "json"
	case BodyForm:
		return "form"
	case BodyAmbiguous:
		return "ambiguous"
	case BodyUnreadable:
		return "unreadable"
	}
	return "none"
}

// Errors reading a body field. They are sentinels: a flood of bad bodies
// never allocates an error. An error means the request names no identity
// the edge can trust, which a rule treats as an invalid identity
// (invalid_identity), never as a missing one.
var (
	// ErrMalformed reports a body that is not well-formed JSON or
	// application/x-www-form-urlencoded (a bad escape, a control character
	// in a string, invalid UTF-8, a lone surrogate or a NUL in a JSON
	// document, a document nested deeper than encoding/json allows, a
	// form value that is not UTF-8 or holds a NUL).
	ErrMalformed = errors.New("malformed body")
	// ErrAmbiguous reports a field that origins' parsers could read as
	// different values: a JSON key given twice (compared case-insensitively,
	// as encoding/json matches struct fields) with different values, a form
	// field given twice with different values or as an array, or a JSON
	// number whose text parsers disagree on (a fraction, an exponent, an
	// integer beyond 2^53).
	ErrAmbiguous = errors.New("ambiguous field")
	// ErrNotIdentity reports a JSON object, array, boolean or null where
	// the field should be: no parser reads it as a string.
	ErrNotIdentity = errors.New("field is not a string or a number")
	// ErrUnreadable reports a body of BodyUnreadable or BodyAmbiguous
	// format, or a request whose body identity cannot be read at all
	// (a Content-Encoding): docs/body-identities.md.
	ErrUnreadable = errors.New("body origins read another way")
	// ErrMerged reports a body field whose name is also in the query
	// string or a cookie, with another value or while the body lacks it:
	// origins that merge them (PHP's $_REQUEST, Go's FormValue, Flask's
	// request.values, Rails' params) may read that value instead.
	ErrMerged = errors.New("field also in the query or a cookie")
	// ErrOnlyInQuery reports a body field the body lacks while the query
	// string has it: origins that merge them read the query's value.
	ErrOnlyInQuery = errors.New("field only in the query")
)

// BodyKind tells which parser applies to a body, from its Content-Type
// (the field value as received, without the name) and the body
// (docs/body-identities.md §1, §2, §4):
//
//   - no Content-Type (or an empty one) and an empty body: BodyNone;
//   - no Content-Type before a body: BodyUnreadable (Rack reads it as a
//     form, PHP's json_decode(php://input) as JSON, most stacks not at all);
//   - a body that starts with a byte order mark: BodyUnreadable (Python
//     skips UTF-8's, PHP's json_decode and Go's encoding/json fail, a form
//     parser makes it part of the first name; Python's json.loads reads a
//     UTF-16 or UTF-32 body after its mark);
//   - otherwise by ParseMediaType: MediaJSON is BodyJSON; MediaForm is
//     BodyForm, or BodyAmbiguous when the body's first byte after JSON
//     white space is '{' (an origin that goes by Content-Type reads a
//     form, one that decodes JSON whatever the type reads JSON, and
//     {"a":"&phone=VICTIM&b=","phone":"DECOY"} says one number to each),
//     and BodyUnreadable when the body holds a raw NUL (no form does:
//     UTF-16 or UTF-32 JSON, which Python's json.loads detects and reads);
//     anything else (a value that does not parse, multipart/form-data,
//     text/plain, a charset other than UTF-8) is BodyUnreadable, even
//     before an empty body.
//
// It allocates nothing and reads at most MaxContentTypeBytes of
// contentType and the white space at the start of body.
func BodyKind[T ~string | ~[]byte](contentType T, body []byte) BodyFormat {
	if len(contentType) == 0 {
		if len(body) == 0 {
			return BodyNone
		}
		return BodyUnreadable
	}
	if hasBOM(body) {
		return BodyUnreadable
	}
	switch ParseMediaType(contentType) {
	case MediaJSON:
		return BodyJSON
	case MediaForm:
		switch i := skipJSONSpace(body, 0); {
		case i < len(body) && body[i] == '{':
			return BodyAmbiguous
		case bytes.IndexByte(body, 0) >= 0:
			return BodyUnreadable
		}
		return BodyForm
	}
	return BodyUnreadable
}

// MaxContentTypeBytes caps the Content-Type value ParseMediaType reads: a
// longer one is MediaInvalid. The longest a JSON or form body needs,
// "application/x-www-form-urlencoded; charset=utf-8", is 48 bytes; vendor
// JSON types run to some tens.
const MaxContentTypeBytes = 256

// Media is what a Content-Type value says about reading a body.
type Media uint8

// The media verdicts of ParseMediaType.
const (
	// MediaInvalid: the value does not parse by RFC 9110 §8.3.1, is
	// longer than MaxContentTypeBytes, or names the charset twice.
	MediaInvalid Media = iota
	// MediaOther: a well-formed media type no body source reads
	// (multipart/form-data, text/plain, application/xml, ...).
	MediaOther
	// MediaCharset: a JSON or form type whose charset is not UTF-8.
	MediaCharset
	// MediaJSON: application/json or application/*+json, with no charset
	// or UTF-8.
	MediaJSON
	// MediaForm: application/x-www-form-urlencoded, with no charset or
	// UTF-8.
	MediaForm
)

// String returns "invalid", "other", "charset", "json" or "form".
func (m Media) String() string {
	switch m {
	case MediaOther:
		return "other"
	case MediaCharset:
		return "charset"
	case MediaJSON:
		return "json"
	case MediaForm:
		return "form"
	}
	return "invalid"
}

// ParseMediaType parses a Content-Type field value by the media-type
// grammar of RFC 9110 §8.3.1 and §5.6.6:
//
//	media-type = type "/" subtype parameters
//	parameters = *( OWS ";" OWS [ parameter ] )
//	parameter  = parameter-name "=" parameter-value
//	parameter-value = token / quoted-string
//
// type, subtype and parameter names are RFC 9110 tokens, compared without
// regard to ASCII case; OWS is spaces and tabs, and is also allowed
// around the whole value (RFC 9110 §5.5 strips it from field values).
// Nothing else is accepted: not a comma ("application/x-www-form-urlencoded,x",
// a list, which some origins cut at the comma and read as a form), not
// white space without a ';' ("... x"), not a '/' in the subtype, not white
// space around '='. The charset parameter, a token or quoted-string, must
// be "utf-8" in any case or be absent; given twice it is MediaInvalid.
// Other parameters are ignored. docs/body-identities.md §1 says why each
// refusal is needed. It allocates nothing.
func ParseMediaType[T ~string | ~[]byte](ct T) Media {
	if len(ct) > MaxContentTypeBytes {
		return MediaInvalid
	}
	i := skipOWS(ct, 0)
	ts := i
	i = skipToken(ct, i)
	if i == ts || i == len(ct) || ct[i] != '/' {
		return MediaInvalid
	}
	te := i
	i++
	ss := i
	i = skipToken(ct, i)
	if i == ss {
		return MediaInvalid
	}
	se := i
	kind := MediaOther
	switch {
	case !equalFoldASCII(ct[ts:te], "application"):
	case equalFoldASCII(ct[ss:se], "json"),
		se-ss > len("+json") && equalFoldASCII(ct[se-len("+json"):se], "+json"):
		kind = MediaJSON
	case equalFoldASCII(ct[ss:se], "x-www-form-urlencoded"):
		kind = MediaForm
	}
	charset := 0 // 0 none, 1 UTF-8, 2 another
	for {
		i = skipOWS(ct, i)
		if i == len(ct) {
			break
		}
		if ct[i] != ';' {
			return MediaInvalid
		}
		i = skipOWS(ct, i+1)
		if i == len(ct) || ct[i] == ';' {
			continue // an empty parameter (RFC 9110 §5.6.6)
		}
		ns := i
		i = skipToken(ct, i)
		if i == ns || i == len(ct) || ct[i] != '=' {
			return MediaInvalid
		}
		isCharset := equalFoldASCII(ct[ns:i], "charset")
		i++
		var utf8 bool
		if i < len(ct) && ct[i] == '"' {
			var ok bool
			if i, utf8, ok = scanQuoted(ct, i); !ok {
				return MediaInvalid
			}
		} else {
			vs := i
			i = skipToken(ct, i)
			if i == vs {
				return MediaInvalid
			}
			utf8 = equalFoldASCII(ct[vs:i], "utf-8")
		}
		if isCharset {
			if charset != 0 {
				return MediaInvalid
			}
			charset = 2
			if utf8 {
				charset = 1
			}
		}
	}
	if charset == 2 && kind != MediaOther {
		return MediaCharset
	}
	return kind
}

// scanQuoted checks the RFC 9110 §5.6.4 quoted-string at s[i] ('"') and
// returns the index past it and whether its content, unescaped, is
// "utf-8" in any case.
func scanQuoted[T ~string | ~[]byte](s T, i int) (end int, utf8, ok bool) {
	const want = "utf-8"
	n := 0 // content bytes seen; matching while n <= len(want)
	match := true
	for i++; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, match && n == len(want), true
		case c == '\\':
			i++
			if i == len(s) || !isQuotedPairChar(s[i]) {
				return 0, false, false
			}
			c = s[i]
		case !isQDText(c):
			return 0, false, false
		}
		if match && (n >= len(want) || lowerASCII(c) != want[n]) {
			match = false
		}
		n++
	}
	return 0, false, false
}

// isQDText reports whether c is RFC 9110 qdtext: HTAB, SP, %x21,
// %x23-5B, %x5D-7E or obs-text.
func isQDText(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E) || c >= 0x80
}

// isQuotedPairChar reports whether c may follow '\' in a quoted-pair:
// HTAB, SP, VCHAR or obs-text.
func isQuotedPairChar(c byte) bool {
	return c == '\t' || (c >= 0x20 && c != 0x7F)
}

func skipOWS[T ~string | ~[]byte](s T, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func skipToken[T ~string | ~[]byte](s T, i int) int {
	for i < len(s) && httpsyntax.IsTokenChar(s[i]) {
		i++
	}
	return i
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// equalFoldASCII compares s with lower, an ASCII lower-case string,
// ignoring ASCII case.
func equalFoldASCII[T ~string | ~[]byte](s T, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if lowerASCII(s[i]) != lower[i] {
			return false
		}
	}
	return true
}

// hasBOM reports whether b starts with a byte order mark: UTF-8's, or
// UTF-16's or UTF-32's (FF FE, FE FF, 00 00 FE FF), which Python's
// json.loads reads as that encoding.
func hasBOM(b []byte) bool {
	switch {
	case len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF:
	case len(b) >= 2 && (b[0] == 0xFF && b[1] == 0xFE || b[0] == 0xFE && b[1] == 0xFF):
	case len(b) >= 4 && b[0] == 0 && b[1] == 0 && b[2] == 0xFE && b[3] == 0xFF:
	default:
		return false
	}
	return true
}
