package fields

import (
	"errors"
	"strings"
	"testing"
)

func TestJSONField(t *testing.T) {
	t.Parallel()
	deep := func(n int) string {
		return `{"phone":"1","x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	tests := []struct {
		name      string
		body      string
		path      string
		want      string
		wantFound bool
		wantErr   error
	}{
		{name: "top level", body: `{"phone":"+1 (202) 555-0100"}`, path: "phone", want: "+1 (202) 555-0100", wantFound: true},
		{name: "white space everywhere", body: " \t\r\n{ \"phone\" \n: \"2025550100\" , \"x\" : 1 }\n", path: "phone", want: "2025550100", wantFound: true},
		{name: "nested", body: `{"user":{"name":"a","phone":"2025550100"}}`, path: "user.phone", want: "2025550100", wantFound: true},
		{name: "three levels", body: `{"a":{"b":{"c":"v"}}}`, path: "a.b.c", want: "v", wantFound: true},
		{name: "after skipped containers", body: `{"x":[{"phone":"no"},[1,2,{"a":"}"}]],"y":{"phone":"no"},"phone":"yes"}`, path: "phone", want: "yes", wantFound: true},
		{name: "empty string", body: `{"phone":""}`, path: "phone", want: "", wantFound: true},

		{name: "missing", body: `{"name":"a"}`, path: "phone"},
		{name: "empty object", body: `{}`, path: "phone"},
		{name: "nested missing", body: `{"user":{"name":"a"}}`, path: "user.phone"},
		{name: "through a string", body: `{"user":"2025550100"}`, path: "user.phone"},
		{name: "through an array", body: `{"user":[{"phone":"2025550100"}]}`, path: "user.phone"},
		{name: "through null", body: `{"user":null}`, path: "user.phone"},
		{name: "top-level array", body: `[{"phone":"2025550100"}]`, path: "phone"},
		{name: "top-level string", body: `"2025550100"`, path: "phone"},
		{name: "top-level number", body: `2025550100`, path: "phone"},
		{name: "empty body", body: ``, path: "phone"},
		{name: "white space body", body: " \n\t\r", path: "phone"},
		{name: "only a BOM", body: "\uFEFF", path: "phone", wantErr: ErrMalformed},

		{name: "integer", body: `{"phone":2025550100}`, path: "phone", want: "2025550100", wantFound: true},
		{name: "zero", body: `{"code":0}`, path: "code", want: "0", wantFound: true},
		{name: "negative integer", body: `{"id":-42}`, path: "id", want: "-42", wantFound: true},
		{name: "largest safe integer", body: `{"id":9007199254740991}`, path: "id", want: "9007199254740991", wantFound: true},
		{name: "largest safe negative", body: `{"id":-9007199254740991}`, path: "id", want: "-9007199254740991", wantFound: true},
		{name: "2^53 is not exact everywhere", body: `{"id":9007199254740992}`, path: "id", wantErr: ErrAmbiguous},
		{name: "huge integer", body: `{"phone":123456789012345678901234567890}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "20-digit integer", body: `{"phone":12345678901234567890}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "fraction", body: `{"phone":2025550100.0}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "exponent", body: `{"phone":2.0255501e9}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "integer exponent", body: `{"phone":1E3}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "minus zero", body: `{"phone":-0}`, path: "phone", wantErr: ErrAmbiguous},

		{name: "unicode escapes", body: `{"phone":"\u002b\u0031\u0032\u0030\u0032"}`, path: "phone", want: "+1202", wantFound: true},
		{name: "escaped key", body: `{"\u0070hone":"2025550100"}`, path: "phone", want: "2025550100", wantFound: true},
		{name: "short escapes", body: `{"s":"a\"b\\c\/d\be\ff\ng\rh\ti"}`, path: "s", want: "a\"b\\c/d\be\ff\ng\rh\ti", wantFound: true},
		{name: "surrogate pair", body: `{"s":"\ud83d\ude00"}`, path: "s", want: "😀", wantFound: true},
		// Go replaces a lone surrogate, Python keeps it, PHP fails.
		{name: "lone high surrogate", body: `{"s":"\ud83dx"}`, path: "s", wantErr: ErrMalformed},
		{name: "high surrogate then escape", body: `{"s":"\ud83d\u0041"}`, path: "s", wantErr: ErrMalformed},
		{name: "high surrogate at the end", body: `{"s":"\ud83d"}`, path: "s", wantErr: ErrMalformed},
		{name: "two high surrogates", body: `{"s":"\ud83d\ud83d"}`, path: "s", wantErr: ErrMalformed},
		{name: "lone low surrogate", body: `{"s":"\ude00"}`, path: "s", wantErr: ErrMalformed},
		{name: "lone surrogate elsewhere", body: `{"x":"\ude00","s":"1"}`, path: "s", wantErr: ErrMalformed},
		{name: "lone surrogate in a key", body: `{"\ude00":1,"s":"1"}`, path: "s", wantErr: ErrMalformed},
		// C code and databases cut a string at a NUL.
		{name: "escaped NUL", body: `{"s":"1\u0000"}`, path: "s", wantErr: ErrMalformed},
		{name: "escaped NUL in a key", body: `{"s\u0000x":"2","s":"1"}`, path: "s", wantErr: ErrMalformed},
		{name: "escaped NUL elsewhere", body: `{"x":["\u0000"],"s":"1"}`, path: "s", wantErr: ErrMalformed},
		{name: "escaped U+0001", body: `{"s":"1\u0001"}`, path: "s", want: "1\x01", wantFound: true},
		{name: "raw UTF-8", body: `{"s":"٢٠٢٥٥٥٠١٠٠"}`, path: "s", want: "٢٠٢٥٥٥٠١٠٠", wantFound: true},
		// Go and Express replace invalid UTF-8 with U+FFFD, Python and PHP fail.
		{name: "invalid UTF-8", body: "{\"s\":\"a\xffb\xc3\"}", path: "s", wantErr: ErrMalformed},
		{name: "overlong UTF-8", body: "{\"s\":\"\xc0\xaf\"}", path: "s", wantErr: ErrMalformed},
		{name: "UTF-8 surrogate", body: "{\"s\":\"\xed\xa0\x80\"}", path: "s", wantErr: ErrMalformed},
		{name: "invalid UTF-8 elsewhere", body: "{\"x\":\"\xff\",\"s\":\"1\"}", path: "s", wantErr: ErrMalformed},
		// Python skips a byte order mark, PHP and Go fail.
		{name: "BOM", body: "\uFEFF{\"phone\":\"2025550100\"}", path: "phone", wantErr: ErrMalformed},
		{name: "BOM and space", body: "\uFEFF \n{\"phone\":\"1\"}", path: "phone", wantErr: ErrMalformed},

		{name: "identical duplicates", body: `{"phone":"1","phone":"1"}`, path: "phone", want: "1", wantFound: true},
		{name: "duplicates equal once decoded", body: `{"phone":"12","phone":"\u00312"}`, path: "phone", want: "12", wantFound: true},
		{name: "duplicates differ", body: `{"phone":"1","phone":"2"}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "case-insensitive duplicates differ", body: `{"phone":"1","Phone":"2"}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "case-insensitive duplicates agree", body: `{"phone":"1","PHONE":"1"}`, path: "phone", want: "1", wantFound: true},
		{name: "only another case", body: `{"Phone":"2025550100"}`, path: "phone", want: "2025550100", wantFound: true},
		{name: "Kelvin sign folds to k", body: `{"kid":"1","\u212Aid":"2"}`, path: "kid", wantErr: ErrAmbiguous},
		{name: "long s folds to s", body: "{\"session\":\"1\",\"\u017Fession\":\"2\"}", path: "session", wantErr: ErrAmbiguous},
		{name: "escaped key duplicate", body: `{"phone":"1","\u0050hone":"2"}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "number and string duplicates", body: `{"phone":1,"phone":"1"}`, path: "phone", wantErr: ErrAmbiguous},
		{name: "number duplicates agree", body: `{"phone":12,"phone":12}`, path: "phone", want: "12", wantFound: true},
		{name: "duplicate outside the path", body: `{"a":"1","a":"2","phone":"3"}`, path: "phone", want: "3", wantFound: true},
		{name: "nested duplicates differ", body: `{"user":{"phone":"1","phone":"2"}}`, path: "user.phone", wantErr: ErrAmbiguous},
		{name: "parent duplicates identical", body: `{"user":{"phone":"1"},"user":{"phone":"1"}}`, path: "user.phone", want: "1", wantFound: true},
		{name: "parent duplicates merge in Go", body: `{"user":{"phone":"1"},"user":{"name":"x"}}`, path: "user.phone", wantErr: ErrAmbiguous},
		{name: "parent duplicates differ in case", body: `{"user":{"phone":"1"},"User":{"phone":"2"}}`, path: "user.phone", wantErr: ErrAmbiguous},
		{name: "parent duplicate of another type", body: `{"user":{"phone":"1"},"user":"x"}`, path: "user.phone", wantErr: ErrAmbiguous},
		{name: "duplicate with the same value reformatted", body: `{"user":{"phone":"1"},"user":{ "phone":"1"}}`, path: "user.phone", wantErr: ErrAmbiguous},

		{name: "object", body: `{"phone":{"number":"1"}}`, path: "phone", wantErr: ErrNotIdentity},
		{name: "array", body: `{"phone":["1","2"]}`, path: "phone", wantErr: ErrNotIdentity},
		{name: "empty array", body: `{"phone":[]}`, path: "phone", wantErr: ErrNotIdentity},
		{name: "true", body: `{"phone":true}`, path: "phone", wantErr: ErrNotIdentity},
		{name: "false", body: `{"phone":false}`, path: "phone", wantErr: ErrNotIdentity},
		{name: "null", body: `{"phone":null}`, path: "phone", wantErr: ErrNotIdentity},

		{name: "unterminated object", body: `{"phone":"1"`, path: "phone", wantErr: ErrMalformed},
		{name: "unterminated string", body: `{"phone":"1}`, path: "phone", wantErr: ErrMalformed},
		{name: "trailing comma", body: `{"phone":"1",}`, path: "phone", wantErr: ErrMalformed},
		{name: "single quotes", body: `{'phone':'1'}`, path: "phone", wantErr: ErrMalformed},
		{name: "bare key", body: `{phone:"1"}`, path: "phone", wantErr: ErrMalformed},
		{name: "control character", body: "{\"phone\":\"1\x01\"}", path: "phone", wantErr: ErrMalformed},
		{name: "raw newline in string", body: "{\"phone\":\"1\n2\"}", path: "phone", wantErr: ErrMalformed},
		{name: "unknown escape", body: `{"phone":"\x41"}`, path: "phone", wantErr: ErrMalformed},
		{name: "single-quote escape", body: `{"phone":"\'"}`, path: "phone", wantErr: ErrMalformed},
		{name: "short unicode escape", body: `{"phone":"\u12"}`, path: "phone", wantErr: ErrMalformed},
		{name: "trailing garbage", body: `{"phone":"1"} x`, path: "phone", wantErr: ErrMalformed},
		{name: "two documents", body: `{"phone":"1"}{"phone":"2"}`, path: "phone", wantErr: ErrMalformed},
		{name: "NaN", body: `{"phone":NaN}`, path: "phone", wantErr: ErrMalformed},
		{name: "Infinity", body: `{"phone":Infinity}`, path: "phone", wantErr: ErrMalformed},
		{name: "leading zero", body: `{"phone":0123}`, path: "phone", wantErr: ErrMalformed},
		{name: "plus sign", body: `{"phone":+1}`, path: "phone", wantErr: ErrMalformed},
		{name: "bare fraction", body: `{"phone":.5}`, path: "phone", wantErr: ErrMalformed},
		{name: "empty exponent", body: `{"phone":1e}`, path: "phone", wantErr: ErrMalformed},
		{name: "comment", body: "{\"phone\":\"1\" /* c */}", path: "phone", wantErr: ErrMalformed},
		{name: "malformed after the field", body: `{"phone":"1","x":tru}`, path: "phone", wantErr: ErrMalformed},
		{name: "mismatched brackets", body: `{"phone":"1","x":[}`, path: "phone", wantErr: ErrMalformed},
		{name: "missing colon", body: `{"phone" "1"}`, path: "phone", wantErr: ErrMalformed},
		{name: "missing value", body: `{"phone":}`, path: "phone", wantErr: ErrMalformed},
		{name: "non-breaking space is not white space", body: "{\"phone\":\u00a0\"1\"}", path: "phone", wantErr: ErrMalformed},
		{name: "BOM twice", body: "\uFEFF\uFEFF{}", path: "phone", wantErr: ErrMalformed},
		{name: "form body", body: `phone=2025550100`, path: "phone", wantErr: ErrMalformed},
		{name: "10000 levels", body: deep(10000), path: "phone", want: "1", wantFound: true},
		{name: "10001 levels", body: deep(10001), path: "phone", wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, found, err := JSONField([]byte(tt.body), strings.Split(tt.path, "."))
			if !errors.Is(err, tt.wantErr) || got != tt.want || found != tt.wantFound {
				t.Errorf("JSONField(%.80q, %s) = %q, %v, %v; want %q, %v, %v", tt.body, tt.path, got, found, err, tt.want, tt.wantFound, tt.wantErr)
			}
		})
	}
}

func TestJSONFieldEmptyPath(t *testing.T) {
	t.Parallel()
	if _, found, err := JSONField([]byte(`{"a":"1"}`), nil); err == nil || found {
		t.Errorf("JSONField with no path: found %v, err %v; want an error", found, err)
	}
}

// TestJSONDoc reads several fields of one body checked once.
func TestJSONDoc(t *testing.T) {
	t.Parallel()
	doc := ParseJSON([]byte(`{"phone":"2025550100","challenge_id":"c-1","user":{"phone":1},"x":null}`))
	if doc.Err() != nil {
		t.Fatalf("Err() = %v", doc.Err())
	}
	for _, tt := range []struct {
		path  []string
		want  string
		found bool
		err   error
	}{
		{[]string{"phone"}, "2025550100", true, nil},
		{[]string{"challenge_id"}, "c-1", true, nil},
		{[]string{"user", "phone"}, "1", true, nil},
		{[]string{"x"}, "", false, ErrNotIdentity},
		{[]string{"email"}, "", false, nil},
		{nil, "", false, errEmptyPath},
	} {
		got, found, err := doc.Field(tt.path)
		if got != tt.want || found != tt.found || err != tt.err {
			t.Errorf("Field(%q) = %q, %v, %v; want %q, %v, %v", tt.path, got, found, err, tt.want, tt.found, tt.err)
		}
	}
	bad := ParseJSON([]byte(`{"phone":`))
	if _, _, err := bad.Field([]string{"phone"}); bad.Err() != ErrMalformed || err != ErrMalformed {
		t.Errorf("malformed: Err() = %v, Field error %v; want ErrMalformed", bad.Err(), err)
	}
	var zero JSONDoc
	if v, found, err := zero.Field([]string{"phone"}); v != "" || found || err != nil {
		t.Errorf("zero JSONDoc: %q, %v, %v; want not found", v, found, err)
	}
}
