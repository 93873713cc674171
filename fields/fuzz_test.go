package fields

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonSeeds are bodies both JSON fuzzers start from.
var jsonSeeds = []string{
	`{"phone":"+1 (202) 555-0100"}`,
	`{"user":{"phone":"2025550100","name":"a"},"phone":1}`,
	`{"phone":"1","Phone":"2"}`,
	`{"user":{"phone":"1"},"user":{"phone":"1"}}`,
	`{"phone":2025550100}`,
	`{"phone":1e3,"x":[1,2,{"y":null}]}`,
	`{"\u0070hone":"\u0032\ud83d\ude00"}`,
	"\uFEFF{\"phone\":\"1\"}",
	`{"phone":{"a":[]}}`,
	`{"phone":"1",}`,
	`{"phone":"1\u0000"}`,
	`{"phone":"\ud83d\u0041","x":"\udc00"}`,
	"{\"phone\":\"\xc0\xaf\"}",
	"{\"phone\":\"\xed\xa0\x80\"}",
	`[]`,
	``,
}

// FuzzJSONField: no panic; a found value never comes with an error; and,
// against encoding/json: the body is malformed exactly when json.Valid
// says so (a byte order mark included), when it is not UTF-8, or when it
// holds a \u escape of NUL or of a lone surrogate (docs/body-identities.md
// §4); and when the body decodes and has no duplicate keys (compared
// case-insensitively), the field is what encoding/json sees when it
// matches keys as it matches struct fields.
func FuzzJSONField(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s), "phone")
		f.Add([]byte(s), "user.phone")
	}
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		segs := strings.Split(path, ".")
		if len(segs) > MaxPathSegments {
			return
		}
		for _, s := range segs {
			if s == "" {
				return
			}
		}
		v, found, err := JSONField(body, segs)
		if found && err != nil {
			t.Fatalf("found %q with error %v", v, err)
		}
		if !found && v != "" {
			t.Fatalf("not found, but value %q", v)
		}
		doc := body
		if len(bytes.Trim(doc, " \t\r\n")) == 0 {
			if found || err != nil {
				t.Fatalf("empty body: %q, %v, %v", v, found, err)
			}
			return
		}
		valid := json.Valid(doc) && utf8.Valid(doc) && !slowJSONEscapesBad(string(doc))
		if valid != (err != ErrMalformed) {
			t.Fatalf("JSONField(%q) error %v; json.Valid %v, utf8.Valid %v, bad escapes %v", body, err, json.Valid(doc), utf8.Valid(doc), json.Valid(doc) && slowJSONEscapesBad(string(doc)))
		}
		if err == ErrMalformed || hasFoldedDuplicateKeys(doc) {
			return
		}
		d := json.NewDecoder(bytes.NewReader(doc))
		d.UseNumber()
		var x any
		if err := d.Decode(&x); err != nil {
			t.Fatalf("json.Valid but Decode fails: %v", err)
		}
		want, wantFound, wantErr := jsonReference(x, segs)
		if v != want || found != wantFound || err != wantErr {
			t.Fatalf("JSONField(%q, %q) = %q, %v, %v; encoding/json sees %q, %v, %v", body, path, v, found, err, want, wantFound, wantErr)
		}
	})
}

// jsonReference walks a value encoding/json decoded along path, matching
// keys case-insensitively as it matches struct fields.
func jsonReference(x any, path []string) (string, bool, error) {
	for _, seg := range path {
		m, ok := x.(map[string]any)
		if !ok {
			return "", false, nil
		}
		var next any
		found := false
		for k, v := range m {
			if strings.EqualFold(k, seg) {
				next, found = v, true
			}
		}
		if !found {
			return "", false, nil
		}
		x = next
	}
	switch v := x.(type) {
	case string:
		return v, true, nil
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n > maxSafeInteger || n < -maxSafeInteger || strconv.FormatInt(n, 10) != string(v) {
			return "", false, ErrAmbiguous
		}
		return string(v), true, nil
	}
	return "", false, ErrNotIdentity
}

// hasFoldedDuplicateKeys reports whether any object of a valid document
// has two keys equal under strings.EqualFold.
func hasFoldedDuplicateKeys(doc []byte) bool {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	type frame struct {
		object bool
		keys   []string
		isKey  bool // the next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			return true // not a document this check can read; skip it
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.isKey {
			if k, ok := tok.(string); ok {
				for _, prev := range top.keys {
					if strings.EqualFold(prev, k) {
						return true
					}
				}
				top.keys = append(top.keys, k)
				top.isKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, isKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the parent object wants a key next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].isKey = true
		}
	}
}

// FuzzFormField: no panic; a found value never comes with an error; and,
// against the slow references of slow_test.go (each parser's reading of a
// name, from Go, PHP, Rack and qs): a bad escape anywhere is ErrMalformed;
// otherwise readings that disagree or make the field an array are
// ErrAmbiguous, a value read that is not UTF-8 or holds a NUL is
// ErrMalformed (either, when both), and the field is found exactly when a
// reading names it, with the value they agree on. Go's own url.ParseQuery
// never sees a value of the field that the edge does not.
func FuzzFormField(f *testing.F) {
	for _, s := range []string{
		"phone=2025550100", "a=1&phone=%2B1+202&b", "phone=1&phone=2", "phone[]=1",
		"+phone=1", "challenge.id=1&challenge_id=1", "phone=%zz", "phone=%FF", "a[b.c=1", "phone%00x=1",
		"[phone]=1&phone=2", "phone]=1", "]]phone=2", "[phone=3", "phone]x=1", "[phone][x]=1",
		"x=1;phone=2", "phone=1;x", "a=b]=c&phone=1", "phone=b]=c", "++phone=1", "phone=1%00",
		"user[phone]=1&user]phone=2", "challenge[id=1", "x]y[phone]=1", "[]=1&phone=1",
	} {
		f.Add([]byte(s), "phone")
		f.Add([]byte(s), "challenge_id")
	}
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		v, found, err := FormField(body, name)
		if found && err != nil {
			t.Fatalf("found %q with error %v", v, err)
		}
		if !found && v != "" {
			t.Fatalf("not found, but value %q", v)
		}
		if name == "" || !isPlainName(name) {
			return
		}
		ref := slowFormField(string(body), name)
		bad := func(want string) {
			t.Helper()
			t.Fatalf("FormField(%q, %q) = %q, %v, %v; want %s (reference %+v)", body, name, v, found, err, want, ref)
		}
		switch {
		case ref.badEscape:
			if err != ErrMalformed {
				bad("ErrMalformed")
			}
		case ref.conflict && ref.badValue:
			if err != ErrAmbiguous && err != ErrMalformed {
				bad("ErrAmbiguous or ErrMalformed")
			}
		case ref.conflict:
			if err != ErrAmbiguous {
				bad("ErrAmbiguous")
			}
		case ref.badValue:
			if err != ErrMalformed {
				bad("ErrMalformed")
			}
		case !ref.found:
			if found || err != nil {
				bad("not found")
			}
		default:
			if !found || err != nil || v != ref.value {
				bad(fmt.Sprintf("%q", ref.value))
			}
		}
		// Go's ParseForm: whatever it reads under the name, the edge read
		// the same or refused.
		if q, qerr := url.ParseQuery(string(body)); qerr == nil && err == nil {
			for _, gv := range q[name] {
				if !found || gv != v {
					t.Fatalf("FormField(%q, %q) = %q, %v; Go reads %q", body, name, v, found, gv)
				}
			}
		}
	})
}

// FuzzCheckMerged: no panic, and CheckMerged answers exactly as the slow
// reference does for a plain name and a plain two-segment json: path:
// every reading of the query (by Go, PHP, Rack and qs) and of the Cookie
// header (by PHP) that names the field agrees with the body's value, or
// with the query's when the body lacks it.
func FuzzCheckMerged(f *testing.F) {
	for _, s := range [][3]string{
		{"phone=%2B1", "", "+1"}, {"phone=2", "", "1"}, {"[phone]=1", "", "1"}, {"+phone=2", "", "1"},
		{"phone[]=1", "", "1"}, {"x=1;phone=2", "", "2"}, {"phone=%zz", "", "%zz"}, {"ph%one=1", "", ""},
		{"", "phone=1", "1"}, {"", " phone=%2B1", "+1"}, {"", "phone=+1", "+1"}, {"", "phone.=1; a=b", "1"},
		{"user[phone]=1", "", "1"}, {"user=1", "", "1"}, {"user]phone=1", "user[phone]=2", "1"},
		{"a=b]=c", "", "c"}, {"phone=1", "phone=2", ""},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), s[2], true, false)
		f.Add([]byte(s[0]), []byte(s[1]), s[2], false, true)
	}
	f.Fuzz(func(t *testing.T, query, cookies []byte, value string, found, nested bool) {
		src, _ := ParseSource("form:phone")
		path := []string{"phone"}
		if nested {
			src, _ = ParseSource("json:user.phone")
			path = []string{"user", "phone"}
		}
		if !found {
			value = ""
		}
		got := src.CheckMerged(query, cookies, value, found)
		want := slowCheckMerged(string(query), string(cookies), path, value, found)
		if len(query) == 0 && len(cookies) == 0 {
			want = nil
		}
		if got != want {
			t.Fatalf("%s.CheckMerged(%q, %q, %q, %v) = %v, want %v", src, query, cookies, value, found, got, want)
		}
		// A JSON body read as a form is checked as a query is.
		if fv, ref := jsonFormView(query, path, value, found), slowCheckMerged(string(query), "", path, value, found); fv != (ref != nil) {
			t.Fatalf("jsonFormView(%q, %q, %q, %v) = %v, the reference says %v", query, path, value, found, fv, ref)
		}
		// The one-segment json: path reads as the form name does.
		if !nested {
			js, _ := ParseSource("json:phone")
			if jg := js.CheckMerged(query, cookies, value, found); jg != got {
				t.Fatalf("json:phone.CheckMerged = %v, form:phone's %v", jg, got)
			}
		}
	})
}

// The RFC 9110 §5.6.2, §5.6.4 and §8.3.1 grammar as regular expressions,
// for FuzzParseMediaType. Input bytes over 0x7F are mapped to \x01 first
// (and \x01 itself to \x00), so obs-text is \x01 here.
const (
	reToken  = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
	reQuoted = `"(?:[\t !#-\[\]-~\x01]|\\[\t -~\x01])*"`
)

var (
	reMediaType = regexp.MustCompile(`^[ \t]*(` + reToken + `)/(` + reToken + `)((?:[ \t]*;[ \t]*(?:` + reToken + `=(?:` + reToken + `|` + reQuoted + `))?)*)[ \t]*$`)
	reParam     = regexp.MustCompile(`;[ \t]*(` + reToken + `)=(` + reToken + `|` + reQuoted + `)`)
)

// slowMediaType is ParseMediaType written with the grammar's regular
// expressions.
func slowMediaType(ct string) Media {
	if len(ct) > MaxContentTypeBytes {
		return MediaInvalid
	}
	b := []byte(ct)
	for i, c := range b {
		switch {
		case c >= 0x80:
			b[i] = 1
		case c == 1:
			b[i] = 0
		}
	}
	m := reMediaType.FindStringSubmatch(string(b))
	if m == nil {
		return MediaInvalid
	}
	typ, sub := strings.ToLower(m[1]), strings.ToLower(m[2])
	kind := MediaOther
	switch {
	case typ != "application":
	case sub == "json" || len(sub) > 5 && strings.HasSuffix(sub, "+json"):
		kind = MediaJSON
	case sub == "x-www-form-urlencoded":
		kind = MediaForm
	}
	charsets := 0
	other := false
	for _, p := range reParam.FindAllStringSubmatch(m[3], -1) {
		if strings.ToLower(p[1]) != "charset" {
			continue
		}
		charsets++
		v := p[2]
		if strings.HasPrefix(v, `"`) {
			v = regexp.MustCompile(`\\(.)`).ReplaceAllString(v[1:len(v)-1], "$1")
		}
		other = other || strings.ToLower(v) != "utf-8"
	}
	switch {
	case charsets > 1:
		return MediaInvalid
	case other && kind != MediaOther:
		return MediaCharset
	}
	return kind
}

// FuzzParseMediaType: ParseMediaType is the RFC 9110 grammar exactly (as
// slowMediaType writes it), the same on a string and on bytes, and
// BodyKind follows it.
func FuzzParseMediaType(f *testing.F) {
	for _, s := range []string{
		"application/json", "application/json; charset=utf-8", `application/json; charset="UTF-8"`,
		"application/x-www-form-urlencoded,x", "application/x-www-form-urlencoded x", "application/x-www-form-urlencodedfoo",
		"application/x-www-form-urlencoded/", "application/vnd.a+json;;", "multipart/form-data; boundary=\"a;b\"",
		"text/plain; charset=latin1", "application/json; charset=utf-8; charset=utf-8", "application/json ; x=\"\\\"\"",
		" application/json\t", "application/json; charset= utf-8", "application/json; x=\"\xff\"", "\xff/json",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		got := ParseMediaType(ct)
		if want := slowMediaType(ct); got != want {
			t.Fatalf("ParseMediaType(%q) = %s, want %s", ct, got, want)
		}
		if b := ParseMediaType([]byte(ct)); b != got {
			t.Fatalf("ParseMediaType([]byte(%q)) = %s, on a string %s", ct, b, got)
		}
		kind := BodyKind(ct, []byte("a=1"))
		switch {
		case ct == "":
			if kind != BodyUnreadable {
				t.Fatalf("BodyKind(%q, a body) = %s", ct, kind)
			}
		case got == MediaJSON && kind != BodyJSON, got == MediaForm && kind != BodyForm,
			got != MediaJSON && got != MediaForm && kind != BodyUnreadable:
			t.Fatalf("BodyKind(%q) = %s, ParseMediaType %s", ct, kind, got)
		}
	})
}

// slowPHPName is PHP's php_register_variable_ex renaming, written out
// plainly: the base variable name a key files under, and whether it makes
// an array.
func slowPHPName(key string) (string, bool) {
	if i := strings.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	key = strings.TrimLeft(key, " ")
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case ' ', '.':
			b.WriteByte('_')
		case '[':
			if strings.IndexByte(key[i+1:], ']') >= 0 {
				return b.String(), true
			}
			// Unclosed: PHP writes '_' and renames the rest.
			b.WriteByte('_')
			b.WriteString(strings.NewReplacer(" ", "_", ".", "_", "[", "_").Replace(key[i+1:]))
			return b.String(), false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), false
}

func allEqual(vals []string) bool {
	for _, v := range vals[1:] {
		if v != vals[0] {
			return false
		}
	}
	return true
}
