package otp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
)

// fuzzRegions are the default regions FuzzNormalize picks from by index.
var fuzzRegions = []string{"", "US", "GB", "DE", "AR", "IT", "RU", "JP", "IN", "BR", "ZZ", "001", "us", "XX"}

// FuzzNormalize: no panic; an error is ErrInvalidPhone with the zero Phone;
// a result is '+' and digits, its Range a non-empty prefix holding the
// country code, its Region non-empty, and normalising its E164 again gives
// the same Phone (so a key never depends on how the number was written).
// On ASCII input with a default region, the result is exactly phonenumbers'
// own: the edge adds nothing to the library there.
func FuzzNormalize(f *testing.F) {
	for _, r := range readTable(f, "normalization-cases.csv", "input", "default_region") {
		region := 0
		for i, fr := range fuzzRegions {
			if fr == r.fields["default_region"] {
				region = i
			}
		}
		f.Add(r.fields["input"], uint8(region))
	}
	f.Add("+６８３ ４００２", uint8(0))
	f.Add("00 1 201 555 0123", uint8(0))
	f.Add("tel:+1-201-555-0123;phone-context=+1", uint8(1))
	f.Add("+1 800 FLOWERS ext 12", uint8(1))
	f.Add("+१२०१५५५०१२३", uint8(0))
	f.Fuzz(func(t *testing.T, raw string, ri uint8) {
		region := fuzzRegions[int(ri)%len(fuzzRegions)]
		p, err := Normalize(raw, region)
		if err != nil {
			if !errors.Is(err, ErrInvalidPhone) {
				t.Fatalf("Normalize(%q, %q): error %v is not ErrInvalidPhone", raw, region, err)
			}
			if p != (Phone{}) {
				t.Fatalf("Normalize(%q, %q) = %+v with error %v", raw, region, p, err)
			}
			return
		}
		checkPhone(t, raw, region, p)
		again, err := Normalize(p.E164, "")
		if err != nil || again != p {
			t.Fatalf("Normalize(%q, %q) = %+v, but Normalize(%q) = %+v, %v", raw, region, p, p.E164, again, err)
		}
		if region != "" && region != UnknownRegion && isASCII(raw) {
			num, err := phonenumbers.Parse(raw, region)
			if err != nil || !phonenumbers.IsPossibleNumber(num) || phonenumbers.Format(num, phonenumbers.E164) != p.E164 {
				t.Fatalf("Normalize(%q, %q) = %+v; phonenumbers says %v, %v", raw, region, p, num, err)
			}
		}
	})
}

func checkPhone(t *testing.T, raw, region string, p Phone) {
	t.Helper()
	if len(p.E164) < 3 || p.E164[0] != '+' {
		t.Fatalf("Normalize(%q, %q) = %+v: E164 does not start with '+' and digits", raw, region, p)
	}
	for i := 1; i < len(p.E164); i++ {
		if c := p.E164[i]; c < '0' || c > '9' {
			t.Fatalf("Normalize(%q, %q) = %+v: non-digit %q in E164", raw, region, p, c)
		}
	}
	if len(p.E164)-1 > 17+3 {
		t.Fatalf("Normalize(%q, %q) = %+v: too many digits", raw, region, p)
	}
	rg := p.Range()
	if rg == "" || !strings.HasPrefix(p.E164, rg) {
		t.Fatalf("Normalize(%q, %q) = %+v: Range() = %q is not a non-empty prefix", raw, region, p, rg)
	}
	num, err := phonenumbers.Parse(p.E164, "ZZ")
	if err != nil {
		t.Fatalf("Normalize(%q, %q) = %+v does not parse: %v", raw, region, p, err)
	}
	if cc := "+" + strconv.Itoa(int(num.GetCountryCode())); len(rg) <= len(cc) || !strings.HasPrefix(rg, cc) {
		t.Fatalf("Normalize(%q, %q) = %+v: Range() = %q does not keep %s and a digit more", raw, region, p, rg, cc)
	}
	if p.Country() == "" || p.Country() != p.Region {
		t.Fatalf("Normalize(%q, %q) = %+v: bad Country() %q", raw, region, p, p.Country())
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

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
	`[]`,
	``,
}

// FuzzJSONField: no panic; a found value never comes with an error; and,
// against encoding/json: the body is malformed exactly when json.Valid
// says so (after a BOM), and when the body decodes and has no duplicate
// keys (compared case-insensitively), the field is what encoding/json sees
// when it matches keys as it matches struct fields.
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
		if valid := json.Valid(doc); valid != (err != ErrMalformed) {
			t.Fatalf("json.Valid = %v, JSONField error %v", valid, err)
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
// against net/url.ParseQuery (Go's ParseForm): a bad escape is
// ErrMalformed; and when the body parses, the field is found exactly when
// Go sees it or PHP files a pair under its name, ambiguous when they see
// more than one value or PHP or Express an array, and otherwise equal to
// Go's value.
func FuzzFormField(f *testing.F) {
	for _, s := range []string{
		"phone=2025550100", "a=1&phone=%2B1+202&b", "phone=1&phone=2", "phone[]=1",
		"+phone=1", "challenge.id=1&challenge_id=1", "phone=%zz", "phone=%FF", "a[b.c=1", "phone%00x=1",
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
		if name == "" || bytes.IndexByte(body, ';') >= 0 {
			return // Go drops pairs with a semicolon and reports an error
		}
		q, qerr := url.ParseQuery(string(body))
		if qerr != nil {
			if err != ErrMalformed {
				t.Fatalf("ParseQuery: %v, FormField error %v", qerr, err)
			}
			return
		}
		goVals := q[name]
		var phpVals []string
		phpArray := false
		for _, pair := range strings.Split(string(body), "&") {
			if pair == "" {
				continue
			}
			k, val, _ := strings.Cut(pair, "=")
			k, _ = url.QueryUnescape(k)
			val, _ = url.QueryUnescape(val)
			switch base, array := slowPHPName(k); {
			case base != name || k == name:
			case array:
				phpArray = true
			default:
				phpVals = append(phpVals, val)
			}
		}
		all := append(append([]string(nil), goVals...), phpVals...)
		switch {
		case phpArray || len(all) > 1 && !allEqual(all):
			if err != ErrAmbiguous && err != ErrMalformed {
				t.Fatalf("FormField(%q, %q) = %q, %v, %v; want ErrAmbiguous (Go %q, PHP %q, array %v)", body, name, v, found, err, goVals, phpVals, phpArray)
			}
		case len(all) == 0:
			if found || err != nil {
				t.Fatalf("FormField(%q, %q) = %q, %v, %v; want not found", body, name, v, found, err)
			}
		case !utf8.ValidString(all[0]):
			if err != ErrMalformed {
				t.Fatalf("FormField(%q, %q) = %q, %v, %v; want ErrMalformed for invalid UTF-8", body, name, v, found, err)
			}
		default:
			if !found || err != nil || v != all[0] {
				t.Fatalf("FormField(%q, %q) = %q, %v, %v; want %q", body, name, v, found, err, all[0])
			}
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
