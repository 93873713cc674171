package fields

import (
	"errors"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// Feature returns the fields feature: the header:, cookie:, query:, json:
// and form: characteristics, which key a rule on one request field, and the
// header_present and header_equals conditions. Other features read their
// identity sources through Lookup.
func Feature() rules.Feature {
	return rules.Feature{
		Name: "fields",
		Characteristics: []rules.CharacteristicType{
			{Name: "header", Prefixed: true, Example: "header:X-Api-Key", Tag: rules.TagHeader, Compile: compileField(SourceHeader)},
			{Name: "cookie", Prefixed: true, Example: "cookie:session", Tag: rules.TagCookie, Compile: compileField(SourceCookie)},
			{Name: "query", Prefixed: true, Example: "query:client_id", Tag: rules.TagQuery, Compile: compileField(SourceQuery)},
			{Name: "json", Prefixed: true, Example: "json:user.phone", Tag: rules.TagJSON, Compile: compileField(SourceJSON)},
			{Name: "form", Prefixed: true, Example: "form:phone", Tag: rules.TagForm, Compile: compileField(SourceForm)},
		},
		Conditions: conditions(), // header_present, header_equals (conditions.go)
	}
}

func compileField(kind SourceKind) func(c *rules.Compiler, r *rules.Rule, arg string, rng hcl.Range) rules.Characteristic {
	return func(c *rules.Compiler, r *rules.Rule, arg string, rng hcl.Range) rules.Characteristic {
		switch kind {
		case SourceHeader:
			c.ReadsHeader(arg)
			return rawField{kind: kind, name: []byte(arg)}
		case SourceCookie, SourceQuery:
			return rawField{kind: kind, name: []byte(arg)}
		}
		src, err := ParseSource(kind.String() + ":" + arg)
		if err != nil {
			c.Errorf(rng, "Invalid characteristic", "%v", err)
			return nil
		}
		return bodyChar{src: src, slot: c.Slot("fields." + src.String())}
	}
}

// rawField is header:NAME, cookie:NAME or query:NAME as a key: the value
// as the request carries it (a header's first line, fasthttp's reading of
// the cookie and the query parameter); absent or empty is Missing.
type rawField struct {
	kind SourceKind
	name []byte
}

func (f rawField) AppendValue(buf []byte, req *rules.Request, _ *rules.Scratch) ([]byte, rules.Status) {
	if req.Fields == nil {
		return buf, rules.Missing
	}
	var v []byte
	switch f.kind {
	case SourceHeader:
		v = req.Fields.Header(f.name)
	case SourceCookie:
		v = req.Fields.Cookie(f.name)
	default:
		v = req.Fields.Query(f.name)
	}
	if len(v) == 0 {
		return buf, rules.Missing
	}
	return rules.AppendValue(buf, v), rules.Present
}

// bodyChar is json:PATH or form:NAME as a key: the body field read as
// every origin reads it (BodyField), once per request however many rules
// key on it.
type bodyChar struct {
	src  Source
	slot int
}

func (b bodyChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	m := s.Memo(b.slot)
	if !m.Done {
		var v string
		v, m.Status = BodyField(b.src, nil, req, s)
		m.Value = append(m.Value[:0], v...)
		m.Done = true
	}
	if m.Status != rules.Present {
		return buf, m.Status
	}
	return rules.AppendValue(buf, m.Value), rules.Present
}

// CompileSources compiles an identity's list of sources (identity { phone =
// ["json:phone", "form:phone"] }), reporting bad ones at their element and
// recording header sources as read (Compiler.ReadsHeader). attr names the
// attribute in diagnostics.
func CompileSources(c *rules.Compiler, expr hcl.Expression, attr string) []Source {
	list, rngs := c.StringList(expr, attr)
	var out []Source
	for i, s := range list {
		src, err := ParseSource(s)
		if err != nil {
			c.Errorf(rngs[i], "Invalid source", "%v; sources are json:PATH, form:NAME, header:NAME, query:NAME or cookie:NAME", err)
			continue
		}
		if src.Kind == SourceHeader {
			c.ReadsHeader(src.Name)
		}
		out = append(out, src)
	}
	return out
}

// Lookup reads one identity source src of an identity whose sources are
// all (the list src is in): the value with rules.Present, or Missing
// (absent or empty) or Invalid (present, but an origin could read it
// another way). A body field is read as every origin's parser reads it
// (BodyField); a query parameter given twice with different values is
// Invalid, and so is one a merging origin would read from the body instead
// when the body disagrees (docs/body-identities.md §6).
func Lookup(src Source, all []Source, req *rules.Request, s *rules.Scratch) (string, rules.Status) {
	if req.Fields == nil {
		return "", rules.Missing
	}
	var v []byte
	switch src.Kind {
	case SourceHeader:
		v = req.Fields.Header([]byte(src.Name))
	case SourceQuery:
		// Read as origins read it: a parameter given twice with
		// different values is ambiguous, hence invalid.
		q, found, err := QueryField(req.Fields.RawQuery(), src.Name)
		switch {
		case err != nil:
			return "", rules.Invalid
		case !found || q == "":
			return "", rules.Missing
		}
		// Origins that merge the query and the body read a body field of
		// the name first (Go's FormValue, Rails' params): when the
		// identity lists one, the body must agree with the query
		// (docs/body-identities.md §6).
		for _, b := range all {
			if b.MergedName() == src.Name {
				if _, st := BodyField(b, all, req, s); st == rules.Invalid {
					return "", rules.Invalid
				}
			}
		}
		return q, rules.Present
	case SourceCookie:
		v = req.Fields.Cookie([]byte(src.Name))
	case SourceJSON, SourceForm:
		return BodyField(src, all, req, s)
	}
	if len(v) == 0 {
		return "", rules.Missing
	}
	return string(v), rules.Present
}

// contentEncoding is the header that makes a body identity unreadable.
var contentEncoding = []byte("Content-Encoding")

// BodyField reads a json: or form: field from the body, only where every
// origin reads the same value (docs/body-identities.md). all is the
// identity's list of sources (nil for a key that names the field itself).
// It sets s.BodyParsed.
//
//   - a request with a Content-Encoding is Invalid (§3: Express inflates
//     gzip and deflate bodies, other stacks read the compressed bytes);
//   - a body BodyKind finds ambiguous or unreadable is Invalid (§1, §2: a
//     Content-Type that does not parse, names another type or charset, or
//     is missing before a body; multipart; a BOM);
//   - a JSON or form body is read by the source of its format (a source
//     of the other format is Missing: the next source is tried), and
//     malformed, ambiguous or non-string fields are Invalid (§4, §5);
//   - the field's name in the query string or a cookie must agree with
//     the body's reading (§6: PHP's $_REQUEST, Go's FormValue, Flask's
//     request.values and Rails' params merge them). A name only in the
//     query, the body lacking it or having none, is Missing when all lists
//     a query: source of that name (which reads it as the merging origin
//     does) and Invalid otherwise: a rule that skips a missing identity
//     would let the origin act on a value no counter saw.
func BodyField(src Source, all []Source, req *rules.Request, s *rules.Scratch) (string, rules.Status) {
	if req.Fields == nil {
		return "", rules.Missing
	}
	ct, body := req.Fields.Body()
	s.BodyParsed = true
	if len(req.Fields.Header(contentEncoding)) > 0 {
		return "", rules.Invalid
	}
	kind := BodyKind(ct, body)
	if kind != BodyNone && kind != BodyAmbiguous && kind != BodyUnreadable && kind != src.Body() {
		return "", rules.Missing // a body of the other format: its source reads it
	}
	v, found, err := src.BodyField(kind, body)
	if err != nil {
		return "", rules.Invalid
	}
	switch err := src.CheckMerged(req.Fields.RawQuery(), req.Fields.Cookies(), v, found); {
	case err == nil:
	case err == ErrOnlyInQuery && hasQuerySource(all, src.MergedName()):
		return "", rules.Missing
	default:
		return "", rules.Invalid
	}
	if !found || v == "" {
		return "", rules.Missing
	}
	return v, rules.Present
}

// hasQuerySource reports whether all lists query:name.
func hasQuerySource(all []Source, name string) bool {
	for _, o := range all {
		if o.Kind == SourceQuery && o.Name == name && name != "" {
			return true
		}
	}
	return false
}

// AppendText is a field's value as an operator names it (forgive): the
// value as the request carries it.
func (f rawField) AppendText(buf []byte, text string, _ *rules.Policy) ([]byte, error) {
	return appendFieldText(buf, text)
}

// AppendText is a body field's value as an operator names it (forgive):
// the value as every origin reads it.
func (b bodyChar) AppendText(buf []byte, text string, _ *rules.Policy) ([]byte, error) {
	return appendFieldText(buf, text)
}

func appendFieldText(buf []byte, text string) ([]byte, error) {
	if text == "" {
		return buf, errors.New("empty value (a request without the field is not counted)")
	}
	return rules.AppendValue(buf, text), nil
}

var (
	_ rules.TextCharacteristic = rawField{}
	_ rules.TextCharacteristic = bodyChar{}
)
