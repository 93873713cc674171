package fields

import (
	"fmt"
	"strings"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// SourceKind is where an identity source reads its value.
type SourceKind uint8

// The source kinds, as written before the colon in a policy.
const (
	SourceJSON   SourceKind = iota + 1 // json:PATH, a field of a JSON body
	SourceForm                         // form:NAME, a field of a form body
	SourceHeader                       // header:NAME, a request header
	SourceQuery                        // query:NAME, a query-string parameter
	SourceCookie                       // cookie:NAME, a request cookie
)

// String returns the kind as a policy writes it ("json").
func (k SourceKind) String() string {
	switch k {
	case SourceJSON:
		return "json"
	case SourceForm:
		return "form"
	case SourceHeader:
		return "header"
	case SourceQuery:
		return "query"
	case SourceCookie:
		return "cookie"
	}
	return "invalid"
}

// MaxPathSegments caps the depth of a json: path.
const MaxPathSegments = 16

// Source is one place an identity (phone, account, otp_session) is read
// from, as the identity { } block lists them: "json:user.phone",
// "form:phone", "header:X-Phone", "query:phone", "cookie:session".
type Source struct {
	Kind SourceKind
	// Name is the text after the colon: the dot path of a json: source,
	// the exact (case-sensitive) field, parameter or cookie name, or the
	// header name (matched case-insensitively, as HTTP does).
	Name string
	// Path is Name split at its dots, for json: sources only.
	Path []string
}

// String returns the source as a policy writes it ("json:user.phone").
func (s Source) String() string { return s.Kind.String() + ":" + s.Name }

// Body returns the body format the source reads from: BodyJSON for json:,
// BodyForm for form:, BodyNone for sources outside the body.
func (s Source) Body() BodyFormat {
	switch s.Kind {
	case SourceJSON:
		return BodyJSON
	case SourceForm:
		return BodyForm
	}
	return BodyNone
}

// BodyField reads a json: or form: source from a body of the given format
// (BodyKind's answer). A source of another format, or a body of none, has
// nothing to read: found is false and err nil. An ambiguous body is
// ErrAmbiguous and an unreadable one ErrUnreadable for every body source
// (docs/body-identities.md §1). A JSON field is also read from the same
// bytes as a form, as PHP's parse_str(php://input) reads any body: a form
// reading that names the field with another value, or while the JSON
// lacks it, is ErrAmbiguous (§4).
func (s Source) BodyField(format BodyFormat, body []byte) (value string, found bool, err error) {
	switch {
	case s.Body() == BodyNone:
	case format == BodyAmbiguous:
		return "", false, ErrAmbiguous
	case format == BodyUnreadable:
		return "", false, ErrUnreadable
	case s.Kind == SourceJSON && format == BodyJSON:
		v, found, err := JSONField(body, s.Path)
		if err == nil && jsonFormView(body, s.Path, v, found) {
			return "", false, ErrAmbiguous
		}
		return v, found, err
	case s.Kind == SourceForm && format == BodyForm:
		return FormField(body, s.Name)
	}
	return "", false, nil
}

// CheckMerged checks a body source's reading (value, found: BodyField's
// answer) against the query string (raw, without the '?') and the Cookie
// header, as origins that merge them into the body's fields read them
// (docs/body-identities.md §6): PHP's $_REQUEST (the query, the body and,
// when request_order is unset, cookies, the later winning), Go's
// FormValue (the body first), Flask's request.values (the query first),
// Rails' params (the body over the query, JSON bodies included).
//
// The source's name is looked for in the query as FormField looks for it
// in a form body (every parser's spelling: "phone", "+phone",
// "challenge.id" for challenge_id, "[phone]"), and a json: path's also as
// its bracket spelling (user[phone] for json:user.phone); in cookies as
// PHP files cookie names. Wherever it is found, the body must have found
// the same value: a name present with another value, given as an array
// or a map (phone[]=…, user=… for json:user.phone), or with a bad escape
// in its value is ErrMerged. When the body lacks the field and the query
// has it (cookies agreeing or silent), err is ErrOnlyInQuery: a merging
// origin reads the query's value, which the caller may read too (a
// query: source of the same name) or must refuse. A cookie of the name
// while neither the body nor the query has it is ErrMerged. A source
// outside the body, or a request with neither a query nor cookies, is
// never in conflict.
//
// It allocates nothing unless value is over 128 bytes.
func (s Source) CheckMerged(rawQuery, cookies []byte, value string, found bool) error {
	if s.Body() == BodyNone || len(rawQuery) == 0 && len(cookies) == 0 {
		return nil
	}
	var t target
	if s.Kind == SourceJSON {
		t.setPath(s.Path)
	} else {
		t.setName(s.Name)
	}
	var kbuf, vbuf, dbuf [128]byte
	b := formBufs{kbuf[:0], vbuf[:0], dbuf[:0]}
	sc := formScan{seeded: true, found: found}
	if found {
		sc.val = append(vbuf[:0], value...)
		sc, _ = scanForm(sc, &t, rawQuery, b) // a lenient scan never fails
	} else {
		// The query's own reading, which cookies must then agree with.
		sc, _ = scanForm(formScan{}, &t, rawQuery, b)
		sc.seeded = true
	}
	if !sc.conflict {
		sc = scanCookies(sc, &t, cookies, b)
	}
	switch {
	case sc.conflict:
		return ErrMerged
	case !found && sc.found:
		return ErrOnlyInQuery
	}
	return nil
}

// MergedName is the name a merging origin files the source's field
// under in the query string (docs/body-identities.md §6): a form: name,
// a one-segment json: path; "" for a deeper path or a source outside the
// body.
func (s Source) MergedName() string {
	switch {
	case s.Kind == SourceForm:
		return s.Name
	case s.Kind == SourceJSON && len(s.Path) == 1:
		return s.Path[0]
	}
	return ""
}

// ParseSource parses a source as the identity { } block writes it. The kind
// is lower case; the name is not empty. A json: path is dot-separated with
// no empty segment and at most MaxPathSegments of them; a header or cookie
// name is an RFC 9110 token; form and query names are matched exactly, so
// they may hold any character but a control character. The error reads as
// a diagnostic's detail.
func ParseSource(s string) (Source, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		return Source{}, fmt.Errorf("source %q has no kind: write json:PATH, form:NAME, header:NAME, query:NAME or cookie:NAME", s)
	}
	var src Source
	switch kind {
	case "json":
		src.Kind = SourceJSON
	case "form":
		src.Kind = SourceForm
	case "header":
		src.Kind = SourceHeader
	case "query":
		src.Kind = SourceQuery
	case "cookie":
		src.Kind = SourceCookie
	default:
		return Source{}, fmt.Errorf("source %q has an unknown kind %q: use json, form, header, query or cookie", s, kind)
	}
	if name == "" {
		return Source{}, fmt.Errorf("source %q has an empty name", s)
	}
	src.Name = name
	switch src.Kind {
	case SourceJSON:
		path := strings.Split(name, ".")
		if len(path) > MaxPathSegments {
			return Source{}, fmt.Errorf("source %q has %d path segments, at most %d are allowed", s, len(path), MaxPathSegments)
		}
		for i, seg := range path {
			if seg == "" {
				return Source{}, fmt.Errorf("source %q has an empty path segment %d: write a dot path such as user.phone", s, i+1)
			}
		}
		src.Path = path
	case SourceHeader, SourceCookie:
		for i := 0; i < len(name); i++ {
			if !httpsyntax.IsTokenChar(name[i]) {
				return Source{}, fmt.Errorf("source %q has a character not allowed in a %s name at byte %d", s, kind, i+len(kind)+1)
			}
		}
	default:
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 || name[i] == 0x7f {
				return Source{}, fmt.Errorf("source %q has a control character at byte %d", s, i+len(kind)+1)
			}
		}
	}
	return src, nil
}
