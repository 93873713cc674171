package otp

import (
	"errors"
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
