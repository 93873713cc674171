package fields

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Source
		wantErr string // a substring of the error; "" for none
	}{
		{in: "json:phone", want: Source{Kind: SourceJSON, Name: "phone", Path: []string{"phone"}}},
		{in: "json:user.phone", want: Source{Kind: SourceJSON, Name: "user.phone", Path: []string{"user", "phone"}}},
		{in: "form:phone", want: Source{Kind: SourceForm, Name: "phone"}},
		{in: "form:user[phone]", want: Source{Kind: SourceForm, Name: "user[phone]"}},
		{in: "header:X-Phone", want: Source{Kind: SourceHeader, Name: "X-Phone"}},
		{in: "query:phone", want: Source{Kind: SourceQuery, Name: "phone"}},
		{in: "cookie:__Host-session", want: Source{Kind: SourceCookie, Name: "__Host-session"}},
		{in: "json:a:b", want: Source{Kind: SourceJSON, Name: "a:b", Path: []string{"a:b"}}},

		{in: "phone", wantErr: "has no kind"},
		{in: "body:phone", wantErr: `unknown kind "body"`},
		{in: "JSON:phone", wantErr: `unknown kind "JSON"`},
		{in: "json:", wantErr: "empty name"},
		{in: "json:user..phone", wantErr: "empty path segment 2"},
		{in: "json:.phone", wantErr: "empty path segment 1"},
		{in: "json:phone.", wantErr: "empty path segment 2"},
		{in: "json:" + strings.Repeat("a.", MaxPathSegments) + "a", wantErr: "path segments"},
		{in: "header:X Phone", wantErr: "not allowed in a header name at byte 8"},
		{in: "cookie:a=b", wantErr: "not allowed in a cookie name"},
		{in: "query:a\nb", wantErr: "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSource(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSource(%q) = %+v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSource(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseSource(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestSourceBodyField(t *testing.T) {
	t.Parallel()
	jsonSrc, _ := ParseSource("json:phone")
	formSrc, _ := ParseSource("form:phone")
	hdrSrc, _ := ParseSource("header:phone")
	jsonBody := []byte(`{"phone":"1"}`)
	formBody := []byte(`phone=2`)
	tests := []struct {
		name   string
		src    Source
		format BodyFormat
		body   []byte
		want   string
		found  bool
	}{
		{"json from json", jsonSrc, BodyJSON, jsonBody, "1", true},
		{"form from form", formSrc, BodyForm, formBody, "2", true},
		{"json from form", jsonSrc, BodyForm, formBody, "", false},
		{"form from json", formSrc, BodyJSON, jsonBody, "", false},
		{"json from none", jsonSrc, BodyNone, jsonBody, "", false},
		{"header", hdrSrc, BodyJSON, jsonBody, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, found, err := tt.src.BodyField(tt.format, tt.body)
			if err != nil || got != tt.want || found != tt.found {
				t.Errorf("BodyField = %q, %v, %v; want %q, %v, nil", got, found, err, tt.want, tt.found)
			}
		})
	}
	for _, src := range []Source{jsonSrc, formSrc} {
		if _, found, err := src.BodyField(BodyAmbiguous, jsonBody); found || !errors.Is(err, ErrAmbiguous) {
			t.Errorf("%s from an ambiguous body: found %v, error %v; want ErrAmbiguous", src, found, err)
		}
	}
	for _, src := range []Source{jsonSrc, formSrc} {
		if _, found, err := src.BodyField(BodyUnreadable, jsonBody); found || !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s from an unreadable body: found %v, error %v; want ErrUnreadable", src, found, err)
		}
	}
	if _, found, err := hdrSrc.BodyField(BodyAmbiguous, jsonBody); found || err != nil {
		t.Errorf("header from an ambiguous body: found %v, error %v; want nothing", found, err)
	}
	for _, tt := range []struct {
		src  Source
		want BodyFormat
	}{{jsonSrc, BodyJSON}, {formSrc, BodyForm}, {hdrSrc, BodyNone}} {
		if got := tt.src.Body(); got != tt.want {
			t.Errorf("%s.Body() = %s, want %s", tt.src, got, tt.want)
		}
	}
}

func TestBodyKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ct   string
		body string
		want BodyFormat
	}{
		{"json", "application/json", `{"a":1}`, BodyJSON},
		{"json with charset", "application/json; charset=utf-8", `{}`, BodyJSON},
		{"json upper case", "Application/JSON", `[]`, BodyJSON},
		{"json with spaces", " application/json ;charset=utf-8", ``, BodyJSON},
		{"problem+json", "application/problem+json", `{}`, BodyJSON},
		{"vnd+json", "application/vnd.api+json", `x`, BodyJSON},
		{"json body sent as a form", "application/x-www-form-urlencoded", `{"phone":"1"}`, BodyAmbiguous},
		{"json and form at once", "application/x-www-form-urlencoded; charset=utf-8", `{"a":"&phone=%2B14155550142&b=","phone":"+13125551037"}`, BodyAmbiguous},
		{"json body sent as a form, spaces", "application/x-www-form-urlencoded", " \n\t\r{}", BodyAmbiguous},
		{"form", "application/x-www-form-urlencoded", `phone=1`, BodyForm},
		{"form with charset", "application/x-www-form-urlencoded; charset=UTF-8", `phone=1`, BodyForm},
		{"form upper case", "APPLICATION/X-WWW-FORM-URLENCODED", ``, BodyForm},
		{"form, brace later", "application/x-www-form-urlencoded", `a={"phone":"1"}`, BodyForm},
		{"empty", "", ``, BodyNone},

		// docs/body-identities.md §1: a type that does not parse, or names
		// another type or charset.
		{"bypass 1: comma", "application/x-www-form-urlencoded,x", `{"phone":"+12025550100","a":"&phone=%2B79161234567&b="}`, BodyUnreadable},
		{"bypass 1: space", "application/x-www-form-urlencoded x", `{"phone":"1"}`, BodyUnreadable},
		{"bypass 1: longer subtype", "application/x-www-form-urlencodedfoo", `{"phone":"1"}`, BodyUnreadable},
		{"bypass 1: slash", "application/x-www-form-urlencoded/", `{"phone":"1"}`, BodyUnreadable},
		{"json, comma", "application/json,application/x-www-form-urlencoded", `{"phone":"1"}`, BodyUnreadable},
		{"json, another charset", "application/json; charset=utf-16", `{"phone":"1"}`, BodyUnreadable},
		{"form, another charset", "application/x-www-form-urlencoded; charset=latin1", `phone=1`, BodyUnreadable},
		{"text", "text/plain", `phone=1`, BodyUnreadable},
		{"json body as text/plain", "text/plain", " \n{\"phone\":\"1\"}", BodyUnreadable},
		{"text/json", "text/json", `{"phone":"1"}`, BodyUnreadable},
		{"jsonx", "application/jsonx", `x`, BodyUnreadable},
		{"just +json", "+json", `x`, BodyUnreadable},
		{"other type before an empty body", "text/plain", ``, BodyUnreadable},
		// §2: multipart.
		{"multipart", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"phone\"\r\n\r\n1\r\n--x--", BodyUnreadable},
		// §2: no Content-Type before a body (Rack reads a form, PHP's
		// json_decode(php://input) JSON).
		{"json body without a type", "", `{"phone":"1"}`, BodyUnreadable},
		{"form body without a type", "", `phone=1`, BodyUnreadable},
		{"json array without a type", "", `[{"phone":"1"}]`, BodyUnreadable},
		// §4: a byte order mark.
		{"json with a BOM", "application/json", "\uFEFF{}", BodyUnreadable},
		{"form with a BOM", "application/x-www-form-urlencoded", "\uFEFFphone=1", BodyUnreadable},
		{"json body sent as a form, BOM and spaces", "application/x-www-form-urlencoded", "\uFEFF \n{}", BodyUnreadable},
		{"json body with a BOM, no type", "", "\uFEFF{}", BodyUnreadable},
		// Python's json.loads reads UTF-16 and UTF-32 bodies, by their
		// mark or by the NULs of their ASCII.
		{"UTF-16LE with a mark as a form", "application/x-www-form-urlencoded", "\xff\xfe{\x00}\x00", BodyUnreadable},
		{"UTF-16BE with a mark as JSON", "application/json", "\xfe\xff\x00{\x00}", BodyUnreadable},
		{"UTF-32BE with a mark", "application/json", "\x00\x00\xfe\xff\x00\x00\x00{", BodyUnreadable},
		{"UTF-16BE without a mark as a form", "application/x-www-form-urlencoded", "\x00{\x00\"\x00p\x00}", BodyUnreadable},
		{"UTF-16LE without a mark as a form", "application/x-www-form-urlencoded", "p\x00=\x001\x00", BodyUnreadable},
		{"raw NUL in a form", "application/x-www-form-urlencoded", "phone=1&x=\x00", BodyUnreadable},
		{"escaped NUL in a form is the field's business", "application/x-www-form-urlencoded", "phone=1&x=%00", BodyForm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := BodyKind(tt.ct, []byte(tt.body)); got != tt.want {
				t.Errorf("BodyKind(%q, %q) = %s, want %s", tt.ct, tt.body, got, tt.want)
			}
			if got := BodyKind([]byte(tt.ct), []byte(tt.body)); got != tt.want {
				t.Errorf("BodyKind([]byte(%q), %q) = %s, want %s", tt.ct, tt.body, got, tt.want)
			}
		})
	}
}

// TestParseMediaType: RFC 9110 §8.3.1's grammar, and nothing else.
func TestParseMediaType(t *testing.T) {
	t.Parallel()
	long := "application/json; x=" + strings.Repeat("a", MaxContentTypeBytes)
	tests := []struct {
		ct   string
		want Media
	}{
		{"application/json", MediaJSON},
		{"APPLICATION/JSON", MediaJSON},
		{"application/problem+json", MediaJSON},
		{"application/vnd.example.v1+JSON", MediaJSON},
		{"application/x-www-form-urlencoded", MediaForm},
		{"Application/X-WWW-Form-URLEncoded", MediaForm},
		{" \tapplication/json \t", MediaJSON},
		{"application/json;charset=utf-8", MediaJSON},
		{"application/json ; charset=UTF-8", MediaJSON},
		{"application/json;\tcharset=Utf-8", MediaJSON},
		{`application/json; charset="utf-8"`, MediaJSON},
		{`application/json; charset="u\tf-8"`, MediaJSON},
		{`application/json; charset="utf-8"; x="a;b,c\"d"`, MediaJSON},
		{"application/json; x=1; y=2", MediaJSON},
		{"application/json;", MediaJSON},
		{"application/json;;charset=utf-8;", MediaJSON},
		{"application/json; ;", MediaJSON},
		{"application/x-www-form-urlencoded; CHARSET=utf-8", MediaForm},
		{"application/json; charset=", MediaInvalid},
		{"application/json; charset=utf-8; charset=utf-8", MediaInvalid},
		{"application/json; charset=utf-8; Charset=latin1", MediaInvalid},
		{"application/json; charset=latin1", MediaCharset},
		{"application/json; charset=utf8", MediaCharset},
		{"application/json; charset=utf-16", MediaCharset},
		{`application/json; charset="utf-8 "`, MediaCharset},
		{`application/json; charset="utf-8x"`, MediaCharset},
		{`application/json; charset="utf"`, MediaCharset},
		{"application/x-www-form-urlencoded; charset=iso-8859-1", MediaCharset},
		{"text/plain; charset=latin1", MediaOther},
		{"text/plain", MediaOther},
		{"text/json", MediaOther},
		{"multipart/form-data; boundary=XyZ", MediaOther},
		{`multipart/form-data; boundary="a b"`, MediaOther},
		{"application/xml", MediaOther},
		{"application/jsonx", MediaOther},
		{"application/+json", MediaOther},
		{"application/x-www-form-urlencodedfoo", MediaOther},
		{"x/json", MediaOther},

		{"", MediaInvalid},
		{" ", MediaInvalid},
		{"application", MediaInvalid},
		{"application/", MediaInvalid},
		{"/json", MediaInvalid},
		{"application/x-www-form-urlencoded,x", MediaInvalid},
		{"application/x-www-form-urlencoded, application/json", MediaInvalid},
		{"application/x-www-form-urlencoded x", MediaInvalid},
		{"application/x-www-form-urlencoded/", MediaInvalid},
		{"application/json/x", MediaInvalid},
		{"application /json", MediaInvalid},
		{"application/ json", MediaInvalid},
		{"application/json; charset = utf-8", MediaInvalid},
		{"application/json; charset =utf-8", MediaInvalid},
		{"application/json; charset= utf-8", MediaInvalid},
		{"application/json; =utf-8", MediaInvalid},
		{"application/json; charset", MediaInvalid},
		{"application/json; charset=utf-8 x", MediaInvalid},
		{"application/json; charset=utf-8,x", MediaInvalid},
		{`application/json; charset="utf-8`, MediaInvalid},
		{`application/json; charset="utf-8\`, MediaInvalid},
		{"application/json; x=\"a\x7fb\"", MediaInvalid},
		{"application/json; x=\"a\x01b\"", MediaInvalid},
		{`application/json; x="a"b`, MediaInvalid},
		{"application/json\x00", MediaInvalid},
		{"application/json\r\n", MediaInvalid},
		{"application/j\xc3\xa9son", MediaInvalid},
		{"application/json x", MediaInvalid},
		{"application/json\v", MediaInvalid},
		{long, MediaInvalid},
		{long[:MaxContentTypeBytes], MediaJSON},
	}
	for _, tt := range tests {
		if got := ParseMediaType(tt.ct); got != tt.want {
			t.Errorf("ParseMediaType(%.60q) = %s, want %s", tt.ct, got, tt.want)
		}
	}
}

// TestJSONFormView: a JSON field is also read from the same bytes as a
// form, as PHP's parse_str(php://input) reads any body
// (docs/body-identities.md §4): a form reading that names the field with
// another value, or while the JSON lacks it, is ErrAmbiguous.
func TestJSONFormView(t *testing.T) {
	t.Parallel()
	phone, _ := ParseSource("json:phone")
	nested, _ := ParseSource("json:user.phone")
	tests := []struct {
		name    string
		src     Source
		body    string
		want    string
		wantErr error
	}{
		{"plain", phone, `{"phone":"+12025550100"}`, "+12025550100", nil},
		{"plain, with = and & elsewhere", phone, `{"phone":"+12025550100","url":"https://x/?a=1&b=2","tok":"YQ=="}`, "+12025550100", nil},
		{"bypass 1 as JSON", phone, `{"phone":"+12025550100","a":"&phone=%2B79161234567&b="}`, "", ErrAmbiguous},
		{"bypass 1, JSON lacks it", phone, `{"a":"&phone=%2B79161234567&b="}`, "", ErrAmbiguous},
		{"form view with the JSON's tail", phone, `{"phone":"1","a":"&phone=1"}`, "", ErrAmbiguous},
		{"Rack spelling", phone, `{"phone":"1","a":"&[phone]=2&"}`, "", ErrAmbiguous},
		{"PHP spelling", phone, `{"phone":"1","a":"&+phone=2&"}`, "", ErrAmbiguous},
		{"array", phone, `{"phone":"1","a":"&phone[]=1&"}`, "", ErrAmbiguous},
		{"other name", phone, `{"phone":"1","a":"&phones=2&xphone=3"}`, "1", nil},
		{"a JSON array", phone, `["&phone=%2B79161234567&"]`, "", ErrAmbiguous},
		{"nested", nested, `{"user":{"phone":"1"},"a":"&user[phone]=2&"}`, "", ErrAmbiguous},
		{"nested, parent", nested, `{"user":{"phone":"1"},"a":"&user=2&"}`, "", ErrAmbiguous},
		{"nested, sibling", nested, `{"user":{"phone":"1"},"a":"&user[name]=2&"}`, "1", nil},
		{"nested, flat name is another field", nested, `{"user":{"phone":"1"},"a":"&phone=2&"}`, "1", nil},
	}
	for _, tt := range tests {
		got, _, err := tt.src.BodyField(BodyJSON, []byte(tt.body))
		if got != tt.want || err != tt.wantErr {
			t.Errorf("%s: %s.BodyField(%q) = %q, %v; want %q, %v", tt.name, tt.src, tt.body, got, err, tt.want, tt.wantErr)
		}
	}
}
