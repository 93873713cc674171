package otp

import "errors"

// BodyFormat is how a request body is read: which of json: and form:
// sources apply to it.
type BodyFormat uint8

// The body formats.
const (
	BodyNone      BodyFormat = iota // no body field applies
	BodyJSON                        // json: sources apply
	BodyForm                        // form: sources apply
	BodyAmbiguous                   // origins read it as JSON or as a form: no source can be trusted
)

// String returns "none", "json", "form" or "ambiguous".
func (f BodyFormat) String() string {
	switch f {
	case BodyJSON:
		return "json"
	case BodyForm:
		return "form"
	case BodyAmbiguous:
		return "ambiguous"
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
	// in a string, a document nested deeper than encoding/json allows, a
	// form value that is not UTF-8).
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
)

// BodyKind tells which parser applies to a body. It is JSON when the media
// type of contentType is application/json or ends in +json, or when the
// body's first byte after white space (and a UTF-8 byte order mark) is '{'
// and the media type is another (or none), since many handlers decode JSON
// without looking at Content-Type; form when the media type is
// application/x-www-form-urlencoded and the body does not start so; none
// otherwise (multipart bodies included).
//
// A body sent as application/x-www-form-urlencoded that starts with '{' is
// ambiguous: an origin that goes by Content-Type reads it as a form, one
// that decodes JSON whatever the type reads it as JSON, and a body written
// to say one phone number to each ({"a":"&phone=VICTIM&b=","phone":"DECOY"})
// would have the edge count one number while the origin texts another. No
// json: or form: source is read from it: the identity is invalid, for the
// rule's invalid_identity to decide (a 400 by default).
func BodyKind(contentType string, body []byte) BodyFormat {
	mt := mediaType(contentType)
	if equalFoldASCII(mt, "application/json") || (len(mt) > 5 && equalFoldASCII(mt[len(mt)-5:], "+json")) {
		return BodyJSON
	}
	form := equalFoldASCII(mt, "application/x-www-form-urlencoded")
	if i := skipJSONSpace(body, skipBOM(body)); i < len(body) && body[i] == '{' {
		if form {
			return BodyAmbiguous
		}
		return BodyJSON
	}
	if form {
		return BodyForm
	}
	return BodyNone
}

// mediaType returns the media type of a Content-Type value: the text before
// any ';', without surrounding spaces and tabs.
func mediaType(ct string) string {
	for i := 0; i < len(ct); i++ {
		if ct[i] == ';' {
			ct = ct[:i]
			break
		}
	}
	start, end := 0, len(ct)
	for start < end && (ct[start] == ' ' || ct[start] == '\t') {
		start++
	}
	for end > start && (ct[end-1] == ' ' || ct[end-1] == '\t') {
		end--
	}
	return ct[start:end]
}

// equalFoldASCII compares s with lower, an ASCII lower-case string,
// ignoring ASCII case.
func equalFoldASCII(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// skipBOM returns the length of a leading UTF-8 byte order mark: 3 or 0.
func skipBOM(b []byte) int {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return 3
	}
	return 0
}
