package otp

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// normalizationColumns are the columns of normalization-cases.csv (see
// testdata/data/phones/SOURCES.md).
var normalizationColumns = []string{
	"input", "default_region", "variant", "parse_error", "e164", "is_possible",
	"is_valid", "type", "region_of_number", "matches_metadata_e164", "note",
}

// wantNormalized is what one row of normalization-cases.csv says Normalize
// must return. The table's expected result is the pair (parse_error,
// is_possible): a row with a parse_error, or one that parses to a number
// that is not possible, is ErrInvalidPhone; any other row gives its e164
// column and the region_of_number column (UnknownRegion where that is
// empty). is_valid is not the criterion: the AR national-format rows are
// possible but not valid, and docs/policy.md's invalid_identity refuses only
// numbers that do not parse or are not possible.
type wantNormalized struct {
	invalid bool
	reason  error // for parse errors: the reason Normalize gives
	e164    string
	region  string
}

func wantFromRow(t *testing.T, r csvRow) wantNormalized {
	t.Helper()
	switch perr := r.get(t, "parse_error"); perr {
	case "":
	case "the phone number supplied is not a number":
		return wantNormalized{invalid: true, reason: errPhoneNotNumber}
	case "invalid country code":
		return wantNormalized{invalid: true, reason: errPhoneCountryCode}
	default:
		t.Fatalf("line %d: unknown parse_error %q", r.line, perr)
	}
	switch p := r.get(t, "is_possible"); p {
	case "false":
		return wantNormalized{invalid: true, reason: errPhoneNotPossible}
	case "true":
	default:
		t.Fatalf("line %d: is_possible is %q", r.line, p)
	}
	region := r.get(t, "region_of_number")
	if region == "" {
		region = UnknownRegion
	}
	return wantNormalized{e164: r.get(t, "e164"), region: region}
}

// TestNormalizationCases runs every row of normalization-cases.csv (298).
func TestNormalizationCases(t *testing.T) {
	t.Parallel()
	rows := readTable(t, "normalization-cases.csv", normalizationColumns...)
	if len(rows) != 298 {
		t.Fatalf("got %d rows, want 298", len(rows))
	}
	var invalid, valid int
	for _, r := range rows {
		input, region := r.get(t, "input"), r.get(t, "default_region")
		t.Run(fmt.Sprintf("line%d_%s_%s", r.line, region, r.get(t, "variant")), func(t *testing.T) {
			want := wantFromRow(t, r)
			got, err := Normalize(input, region)
			if want.invalid {
				if !errors.Is(err, ErrInvalidPhone) {
					t.Fatalf("Normalize(%q, %q) = %+v, %v; want ErrInvalidPhone", input, region, got, err)
				}
				if err != want.reason {
					t.Errorf("Normalize(%q, %q): got reason %q, want %q", input, region, err, want.reason)
				}
				if got != (Phone{}) {
					t.Errorf("Normalize(%q, %q): got %+v with the error, want the zero Phone", input, region, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize(%q, %q): got error %v, want %s", input, region, err, want.e164)
			}
			if got.E164 != want.e164 || got.Region != want.region {
				t.Errorf("Normalize(%q, %q) = %+v, want {E164:%s Region:%s}", input, region, got, want.e164, want.region)
			}
		})
		if wantFromRow(t, r).invalid {
			invalid++
		} else {
			valid++
		}
	}
	t.Logf("%d rows: %d give an E.164 number, %d are invalid", len(rows), valid, invalid)
}

// TestNormalizationSameKey checks that every spelling of one number in
// normalization-cases.csv gives one Phone, so one key for phone,
// phone_range and phone_country, and that spellings the table lacks (other
// digit scripts, full-width '+' and spaces, a leading 00 without a default
// region) give it too.
func TestNormalizationSameKey(t *testing.T) {
	t.Parallel()
	rows := readTable(t, "normalization-cases.csv", normalizationColumns...)
	type spelling struct{ input, region, variant string }
	groups := map[string][]spelling{} // metadata E.164 → its spellings
	for _, r := range rows {
		if r.get(t, "matches_metadata_e164") != "true" {
			continue
		}
		e := r.get(t, "e164")
		groups[e] = append(groups[e], spelling{r.get(t, "input"), r.get(t, "default_region"), r.get(t, "variant")})
	}
	if len(groups) != 29 { // 28 regions' mobile numbers and +800
		t.Fatalf("got %d numbers, want 29", len(groups))
	}
	for e164, spellings := range groups {
		// Spellings built here from the E.164 number.
		digits := e164[1:]
		spellings = append(spellings,
			spelling{"00" + digits, "", "00_without_region"},
			spelling{"  00 " + digits, "", "00_without_region_spaced"},
			spelling{"＋" + digits, "", "fullwidth_plus"},
			spelling{"+\u3000" + digits[:2] + "\u3000" + digits[2:], "", "ideographic_spaces"},
			spelling{"+" + mapDigits(digits, '٠'), "", "arabic_indic"},
			spelling{"+" + mapDigits(digits, '۰'), "", "eastern_arabic_indic"},
			spelling{"+" + mapDigits(digits, '०'), "", "devanagari"},
			spelling{"+" + mapDigits(digits, '০'), "", "bengali"},
			spelling{"+" + mapDigits(digits, '𝟎'), "", "mathematical_bold"},
			spelling{"tel:+" + digits, "", "rfc3966_plain"},
			spelling{"+" + digits + " ext. 7", "", "extension"},
		)
		t.Run(e164, func(t *testing.T) {
			t.Parallel()
			// Ten spellings per mobile number in the table (eight for AR,
			// whose two national ones read as another number), one for +800,
			// and eleven built here.
			if len(spellings) < 8+11 && e164 != "+80012345678" {
				t.Fatalf("got %d spellings, want at least 19", len(spellings))
			}
			first, err := Normalize(spellings[0].input, spellings[0].region)
			if err != nil {
				t.Fatalf("Normalize(%q, %q): %v", spellings[0].input, spellings[0].region, err)
			}
			if first.E164 != e164 {
				t.Fatalf("Normalize(%q, %q) = %s, want %s", spellings[0].input, spellings[0].region, first.E164, e164)
			}
			for _, s := range spellings[1:] {
				got, err := Normalize(s.input, s.region)
				if err != nil {
					t.Errorf("%s: Normalize(%q, %q): %v", s.variant, s.input, s.region, err)
					continue
				}
				if got != first || got.Range() != first.Range() || got.Country() != first.Country() {
					t.Errorf("%s: Normalize(%q, %q) = %+v, want %+v", s.variant, s.input, s.region, got, first)
				}
			}
		})
	}
}

// mapDigits rewrites the ASCII digits of s in the script whose zero is
// zero.
func mapDigits(s string, zero rune) string {
	var b strings.Builder
	for _, c := range s {
		if c >= '0' && c <= '9' {
			b.WriteRune(zero + (c - '0'))
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// exampleColumns are the columns of libphonenumber-example-numbers.csv.
var exampleColumns = []string{
	"region", "country_code", "type", "national_number", "e164", "national_format",
	"international_format", "valid", "detected_type", "detected_region",
}

// TestExampleNumbers runs every row of libphonenumber-example-numbers.csv
// (1,144). Every number is valid, so each must normalise from its e164 and
// international_format columns (no default region) to the e164 column,
// with detected_region as its region; its national_format must too with
// its region as the default, except for AR mobile numbers, whose national
// format phonenumbers re-reads as another number (SOURCES.md). Its range
// must keep the country code.
func TestExampleNumbers(t *testing.T) {
	t.Parallel()
	rows := readTable(t, "libphonenumber-example-numbers.csv", exampleColumns...)
	if len(rows) != 1144 {
		t.Fatalf("got %d rows, want 1144", len(rows))
	}
	for _, r := range rows {
		region, typ, e164 := r.get(t, "region"), r.get(t, "type"), r.get(t, "e164")
		t.Run(fmt.Sprintf("line%d_%s_%s", r.line, region, typ), func(t *testing.T) {
			if v := r.get(t, "valid"); v != "true" {
				t.Fatalf("valid is %q; the table says every number is valid", v)
			}
			want := Phone{E164: e164, Region: r.get(t, "detected_region")}
			check := func(input, defaultRegion string) {
				t.Helper()
				got, err := Normalize(input, defaultRegion)
				if err != nil {
					t.Errorf("Normalize(%q, %q): %v, want %s", input, defaultRegion, err, e164)
					return
				}
				if got != want {
					t.Errorf("Normalize(%q, %q) = %+v, want %+v", input, defaultRegion, got, want)
				}
			}
			check(e164, "")
			check(r.get(t, "international_format"), "")
			check(e164, "US") // a '+' number ignores the default region
			if region != "001" {
				national := r.get(t, "national_format")
				if region == "AR" && typ == "mobile" {
					got, err := Normalize(national, region)
					if err != nil || got.E164 == e164 {
						t.Errorf("Normalize(%q, AR) = %+v, %v; SOURCES.md says it re-parses to another number", national, got, err)
					}
				} else {
					check(national, region)
				}
			}
			p := Phone{E164: e164}
			cc := "+" + r.get(t, "country_code")
			if rg := p.Range(); !strings.HasPrefix(rg, cc) || len(rg) <= len(cc) || !strings.HasPrefix(e164, rg) {
				t.Errorf("Range() of %s = %q, want a prefix of it longer than %s", e164, rg, cc)
			}
		})
	}
}

func TestRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e164 string
		want string
	}{
		{"US", "+12015550123", "+12015550"},
		{"GB mobile", "+447400123456", "+447400123"},
		{"AC five-digit national number", "+24762889", "+24762"},
		{"seven digits, the shortest cut", "+6834002", "+6834"},
		{"six digits: the whole number", "+290123", "+290123"},
		{"five digits: the whole number", "+24712", "+24712"},
		{"two digits: the whole number", "+12", "+12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := (Phone{E164: tt.e164}).Range(); got != tt.want {
				t.Errorf("Range() of %s = %q, want %q", tt.e164, got, tt.want)
			}
		})
	}
}

// TestRangeShortNumbers normalises the shortest possible numbers there are
// (four-digit national numbers of Niue, Tokelau, Saint Helena) and checks
// their ranges keep the country code and differ between countries.
func TestRangeShortNumbers(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, in := range []string{"+683 4002", "+690 3010", "+290 2222", "+247 62889", "+500 31234", "+688 20123"} {
		p, err := Normalize(in, "")
		if err != nil {
			t.Errorf("Normalize(%q): %v", in, err)
			continue
		}
		rg := p.Range()
		if rg == "" || !strings.HasPrefix(p.E164, rg) || len(rg) < 5 {
			t.Errorf("Normalize(%q) = %+v: Range() = %q, want a non-empty prefix with the country code and a digit more", in, p, rg)
		}
		if prev, ok := seen[rg]; ok && prev != p.Region {
			t.Errorf("Range() %q is shared by %s and %s", rg, prev, p.Region)
		}
		seen[rg] = p.Region
	}
}

func TestNormalizeInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		raw    string
		region string
		want   error
	}{
		{"empty", "", "US", errPhoneNotNumber},
		{"spaces", "   ", "US", errPhoneNotNumber},
		{"letters", "call me", "US", errPhoneNotNumber},
		{"too long", "+1 " + strings.Repeat("2", MaxPhoneBytes), "US", errPhoneTooLong},
		{"one byte over the cap", strings.Repeat(" ", MaxPhoneBytes-11) + "+12015550123", "US", errPhoneTooLong},
		{"invalid UTF-8", "+1201555\xff0123", "US", errPhoneEncoding},
		{"national without region", "2015550123", "", errPhoneCountryCode},
		{"unassigned country code", "+999 1234567", "", errPhoneCountryCode},
		{"00 then unassigned code", "00999 1234567", "", errPhoneCountryCode},
		{"short", "12345", "US", errPhoneNotPossible},
		{"one digit", "+1", "", errPhoneNotNumber},
		{"too long for the country", "+1 201 555 01234", "", errPhoneNotPossible},
		{"00 from US is not an international prefix", "00 44 7400 123456", "US", errPhoneNotPossible},
		{"nul byte", "+1201555\x000123", "", errPhoneNotNumber},
		// phonenumbers reads these by skipping or dropping text; the edge
		// does not guess.
		{"words before the number", "call me 5550199", "US", errPhoneNotWritten},
		{"a label before the number", "phone: +12025550100", "US", errPhoneNotWritten},
		{"a dash before the number", "-2025550100", "US", errPhoneNotWritten},
		{"a stray letter after the number", "+44 7700 900123x", "US", errPhoneNotWritten},
		{"a stray letter inside the number", "+1 202 5a55 0100", "US", errPhoneNotWritten},
		{"two stray letters", "+1 202 555 0100 ab", "US", errPhoneNotWritten},
		{"a star after the number", "2025550100*", "US", errPhoneNotWritten},
		{"a local number without its area code", "555-0199", "US", errPhoneLocalOnly},
		{"a local number in E.164 form", "+1 555 0199", "", errPhoneLocalOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Normalize(tt.raw, tt.region)
			if !errors.Is(err, ErrInvalidPhone) || err != tt.want {
				t.Errorf("Normalize(%q, %q) = %+v, %v; want %v", tt.raw, tt.region, got, err, tt.want)
			}
		})
	}
}

// TestNormalizeWrittenAsPhone: what a phone number is written with stays
// readable: vanity letters (three or more), extensions, tel: URIs, Unicode
// dashes and spaces, a bracketed country code, trailing punctuation; and a
// number of a locally dialled length that is valid in its own right.
func TestNormalizeWrittenAsPhone(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, region, e164 string }{
		{"1-800-FLOWERS", "US", "+18003569377"},
		{"+1 800 FLOWERS ext 12", "", "+18003569377"},
		{"Tel:+12025550100", "US", "+12025550100"},
		{"+1 202 555 0100;ext=42", "", "+12025550100"},
		{"+1 202 555 0100 x42", "", "+12025550100"},
		{"+1 (202) 555-0100 ext 7#", "", "+12025550100"},
		{"(+44) 7400 123456", "US", "+447400123456"},
		{"+1\u00a0202\u00a0555\u00a00100", "", "+12025550100"},
		{"+1\u2010202\u2010555\u20100100", "", "+12025550100"},
		{"  202.555.0100.  ", "US", "+12025550100"},
		{"310-1234", "CA", "+13101234"}, // a CA universal access number: seven digits, valid
	}
	for _, tt := range tests {
		got, err := Normalize(tt.raw, tt.region)
		if err != nil || got.E164 != tt.e164 {
			t.Errorf("Normalize(%q, %q) = %+v, %v; want %s", tt.raw, tt.region, got, err, tt.e164)
		}
	}
}

func TestNormalizeExactlyAtCap(t *testing.T) {
	t.Parallel()
	raw := strings.Repeat(" ", MaxPhoneBytes-12) + "+12015550123"
	if len(raw) != MaxPhoneBytes {
		t.Fatalf("test input is %d bytes", len(raw))
	}
	got, err := Normalize(raw, "US")
	if err != nil || got.E164 != "+12015550123" {
		t.Errorf("Normalize(%d bytes) = %+v, %v; want +12015550123", len(raw), got, err)
	}
}

func TestValidRegion(t *testing.T) {
	t.Parallel()
	for _, r := range []string{"US", "GB", "AC", "VA"} {
		if !ValidRegion(r) {
			t.Errorf("ValidRegion(%q) = false, want true", r)
		}
	}
	for _, r := range []string{"", "ZZ", "001", "us", "XX", "USA"} {
		if ValidRegion(r) {
			t.Errorf("ValidRegion(%q) = true, want false", r)
		}
	}
}

// TestDigitTables holds the Unicode tables to what digitValue assumes:
// every Nd range is whole blocks of ten starting at a zero.
func TestDigitTables(t *testing.T) {
	t.Parallel()
	check := func(lo, hi, stride uint32) {
		if stride != 1 || (hi-lo+1)%10 != 0 {
			t.Errorf("Nd range %U-%U stride %d is not whole blocks of ten", lo, hi, stride)
		}
		for r := lo; r <= hi; r++ {
			d, ok := digitValue(rune(r))
			if !ok || rune(d) != (rune(r)-rune(lo))%10 || !unicode.IsDigit(rune(r)) {
				t.Errorf("digitValue(%U) = %d, %v", r, d, ok)
			}
		}
	}
	for _, rg := range unicode.Nd.R16 {
		check(uint32(rg.Lo), uint32(rg.Hi), uint32(rg.Stride))
	}
	for _, rg := range unicode.Nd.R32 {
		check(rg.Lo, rg.Hi, rg.Stride)
	}
	for _, r := range []rune{'a', '+', 'Ⅻ', '½', '²', 0x10FFFF} {
		if d, ok := digitValue(r); ok {
			t.Errorf("digitValue(%U) = %d, true; want false", r, d)
		}
	}
}

// TestNormalizeUnknownRegion: a possible number on a shared country code
// that no region of it claims is keyed with Region ZZ, never "".
func TestNormalizeUnknownRegion(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, e164 string }{
		{"+1 200 555 0123", "+12005550123"}, // NANP area code 200 is unassigned
		{"+1 099 555 0123", "+10995550123"},
		{"+7 000 000 0000", "+70000000000"},
		{"+44 1000 000000", "+441000000000"},
	}
	for _, tt := range tests {
		p, err := Normalize(tt.raw, "US")
		if err != nil || p.E164 != tt.e164 || p.Region != UnknownRegion || p.Country() != UnknownRegion {
			t.Errorf("Normalize(%q) = %+v, %v; want {%s ZZ}", tt.raw, p, err, tt.e164)
		}
	}
}
