package otp

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
)

// MaxPhoneBytes caps the raw text Normalize reads. A number written in
// full-width digits (3 bytes each) with its separators stays under it (the
// longest test vector is 40 bytes), and the cap bounds the
// regular-expression work phonenumbers does on hostile input (about
// linear in the length).
const MaxPhoneBytes = 64

// UnknownRegion is the region of a possible number that no single region of
// its country code claims (a NANP number in an unassigned area code, say).
// It is libphonenumber's own "unknown region"; phone_country_in never
// matches it unless it is listed, and phone_country_not_in refuses it.
const UnknownRegion = "ZZ"

// ErrInvalidPhone reports a phone number that does not parse or is not a
// possible number. Normalize wraps it with the reason; match it with
// errors.Is.
var ErrInvalidPhone = errors.New("invalid phone number")

// phoneError is an invalid-phone reason. The values are preallocated, so a
// flood of garbage numbers never allocates an error.
type phoneError struct{ reason string }

func (e *phoneError) Error() string        { return "invalid phone number: " + e.reason }
func (e *phoneError) Is(target error) bool { return target == ErrInvalidPhone }

var (
	errPhoneTooLong     = &phoneError{"longer than 64 bytes"}
	errPhoneEncoding    = &phoneError{"not valid UTF-8"}
	errPhoneNotNumber   = &phoneError{"not a phone number"}
	errPhoneCountryCode = &phoneError{"no valid country code"}
	errPhoneTooShort    = &phoneError{"too short"}
	errPhoneNSNTooLong  = &phoneError{"too long"}
	errPhoneNotPossible = &phoneError{"not a possible number"}
	errPhoneLocalOnly   = &phoneError{"a local number without its area code"}
	errPhoneNotWritten  = &phoneError{"text around or inside the number"}
	errPhoneParse       = &phoneError{"does not parse"}
	errPhoneUnstable    = &phoneError{"its E.164 form reads as another number"}
)

// Phone is a normalised phone number.
type Phone struct {
	// E164 is the number in E.164: '+', the country code and the national
	// significant number, digits only ("+12015550123"). An extension is
	// dropped.
	E164 string
	// Region is the ISO 3166-1 alpha-2 code of the number ("US"), "001" for
	// a non-geographic number (+800, +882, ...), or UnknownRegion.
	Region string
}

// minRangeDigits is the shortest E.164 number (digits after '+') whose
// range drops its last three digits. What remains has at least four digits,
// so it always holds the whole country code (at most three digits) and one
// more: two countries can never share a range.
const minRangeDigits = 7

// Range returns the phone_range characteristic: the E.164 number without
// its last three digits ("+12015550123" → "+12015550"), the block an SMS
// pumping run walks through. A number with fewer than seven digits is its
// own range. Range is never empty for a Phone that Normalize returned.
func (p Phone) Range() string {
	if len(p.E164)-1 < minRangeDigits {
		return p.E164
	}
	return p.E164[:len(p.E164)-3]
}

// Country returns the phone_country characteristic: the number's region.
func (p Phone) Country() string { return p.Region }

// Normalize reads a phone number the way libphonenumber does and returns it
// in E.164. defaultRegion (the policy's phone_region, an upper-case ISO
// 3166-1 code; "" for none) is the region of numbers written without a
// country code. Every spelling of one number gives one E164: spaces, dashes,
// brackets, dots, a national prefix ("07400 123456" in GB), an international
// prefix of the default region ("00" in DE, "011" in US), "tel:" URIs, a
// "(0)" trunk digit, an extension, full-width and Arabic-Indic or other
// Unicode decimal digits. Without a default region a leading "00" is read
// as '+', the ITU international prefix.
//
// Anything over MaxPhoneBytes or not UTF-8, anything that does not parse,
// that phonenumbers reads only by skipping or dropping text around or inside
// the number (writtenAsPhone: "call me 5550199", "+44 7700 900123x"), that
// parses to a number that is not possible (phonenumbers.IsPossibleNumber:
// the right length for its country; a number of a locally dialled length
// only when valid, see possible), or whose E.164 form phonenumbers reads
// back as another number, is ErrInvalidPhone wrapped with the reason. A number need not be valid in
// the stricter sense (assigned ranges): an unassigned but possible number
// is still one subscriber's number to the origin, and refusing it would let
// it go unlimited when invalid_identity is "skip".
func Normalize(raw string, defaultRegion string) (Phone, error) {
	if len(raw) > MaxPhoneBytes {
		return Phone{}, errPhoneTooLong
	}
	if !utf8.ValidString(raw) {
		return Phone{}, errPhoneEncoding
	}
	s := foldPhoneText(raw)
	region := defaultRegion
	if region == "" {
		region = UnknownRegion
	}
	if region == UnknownRegion {
		s = leadingIDDToPlus(s)
	}
	var num phonenumbers.PhoneNumber
	if err := phonenumbers.ParseToNumber(s, region, &num); err != nil {
		return Phone{}, parseError(err)
	}
	if !writtenAsPhone(s) {
		return Phone{}, errPhoneNotWritten
	}
	if err := possible(&num); err != nil {
		return Phone{}, err
	}
	p := Phone{
		E164:   phonenumbers.Format(&num, phonenumbers.E164),
		Region: phonenumbers.GetRegionCodeForNumber(&num),
	}
	if p.E164 != s && !stableE164(p.E164) {
		return Phone{}, errPhoneUnstable
	}
	if p.Region == "" {
		p.Region = UnknownRegion
	}
	return p, nil
}

// stableE164 reports whether e164 reads back as itself. A few junk inputs
// ("00000000000" from DE) give an E.164 text that phonenumbers reads as
// another number, as a national prefix inside it is stripped the second
// time; keyed on, such a number would be two keys for one text. A number
// given in its E.164 form is its own proof and skips the second parse.
func stableE164(e164 string) bool {
	var num phonenumbers.PhoneNumber
	if err := phonenumbers.ParseToNumber(e164, UnknownRegion, &num); err != nil {
		return false
	}
	return possible(&num) == nil && phonenumbers.Format(&num, phonenumbers.E164) == e164
}

// possible returns nil when num is a possible number: the right length for
// its country (phonenumbers.IsPossibleNumber) and a whole number. A number
// of a length only dialled locally ("555-0199" in US: IsPossibleNumber
// says yes) is a whole number only when it is valid in its own right (CA's
// seven-digit 310 numbers); otherwise its area code is missing, it names a
// subscriber in every area code at once and has no E.164 form, and it is
// errPhoneLocalOnly.
func possible(num *phonenumbers.PhoneNumber) error {
	switch phonenumbers.IsPossibleNumberWithReason(num) {
	case phonenumbers.IS_POSSIBLE:
		return nil
	case phonenumbers.IS_POSSIBLE_LOCAL_ONLY:
		if phonenumbers.IsValidNumber(num) {
			return nil
		}
		return errPhoneLocalOnly
	}
	return errPhoneNotPossible
}

// writtenAsPhone reports whether s (folded by foldPhoneText) is written only
// with what a phone number is written with, so that phonenumbers read all of
// it: an optional "tel:" prefix (its ";" parameters are phonenumbers' to
// check), an optional '+' after white space or an opening bracket, digits,
// the punctuation phonenumbers knows (spaces, dashes, dots, slashes,
// brackets, tildes), letters only as a vanity number (three or more, which
// phonenumbers turns into keypad digits), and an extension. phonenumbers
// itself reads a number out of more: it skips whatever comes before the
// first digit or '+' ("call me 5550199", "phone: +12025550100"), and
// drops one or two letters anywhere as "spurious" ("+1 202 5a55 0100",
// "+44 7700 900123x") and stars ("2025550100*"). Each of those is a guess
// at what the sender meant, which the edge refuses to make (an origin may
// read such text otherwise, or not at all): the identity is invalid, for
// the rule's invalid_identity to decide. One or two letters include the
// old Brazilian "0xx" carrier placeholder, which is refused with the rest.
func writtenAsPhone(s string) bool {
	s = strings.TrimLeft(s, " \t")
	if len(s) >= 4 && strings.EqualFold(s[:4], "tel:") {
		s = s[4:]
		if i := strings.IndexByte(s, ';'); i >= 0 {
			s = s[:i]
		}
	}
	s, _ = phonenumbers.MaybeSeparateExtensionFromPhone(s)
	digits, letters := 0, 0
	for _, r := range s {
		switch {
		case '0' <= r && r <= '9':
			digits++
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			if digits == 0 {
				return false // text before the number
			}
			letters++
		case r == '+':
			if digits > 0 {
				return false
			}
		case r == ' ', r == '\t', r == '(', r == '[':
		case phonePunct(r):
			if digits == 0 {
				return false
			}
		default:
			return false
		}
	}
	return letters == 0 || letters >= 3
}

// phonePunct reports whether r is punctuation phonenumbers reads inside a
// number (its VALID_PUNCTUATION without the letter 'x', after
// foldPhoneText has mapped the full-width forms to ASCII, and without the
// space and opening brackets, which writtenAsPhone takes anywhere): ASCII
// dashes, dots, slashes, closing brackets and tildes, Unicode dashes and
// minus signs, no-break, zero-width and soft-hyphen spaces.
func phonePunct(r rune) bool {
	switch r {
	case '-', '.', '/', ')', ']', '~',
		'\u2212', '\u30FC', '\u00A0', '\u00AD', '\u200B', '\u2060', '\u2053', '\u223C':
		return true
	}
	return '\u2010' <= r && r <= '\u2015'
}

// ValidRegion reports whether region is a region Normalize knows as a
// default region (an upper-case ISO 3166-1 alpha-2 code such as "US"). Use
// it to check phone_region when a policy compiles. A Phone's Region is one
// of these, "001" for a non-geographic number, or UnknownRegion.
func ValidRegion(region string) bool {
	return phonenumbers.GetCountryCodeForRegion(region) != 0
}

// parseError maps phonenumbers' parse errors to preallocated reasons.
func parseError(err error) error {
	switch {
	case errors.Is(err, phonenumbers.ErrNotANumber):
		return errPhoneNotNumber
	case errors.Is(err, phonenumbers.ErrInvalidCountryCode):
		return errPhoneCountryCode
	case errors.Is(err, phonenumbers.ErrTooShortNSN), errors.Is(err, phonenumbers.ErrTooShortAfterIDD):
		return errPhoneTooShort
	case errors.Is(err, phonenumbers.ErrNumTooLong):
		return errPhoneNSNTooLong
	default:
		return errPhoneParse
	}
}

// foldPhoneText maps every Unicode decimal digit (Arabic-Indic U+0660..,
// Eastern Arabic-Indic U+06F0.., Devanagari, full-width U+FF10.., ...) to
// its ASCII digit, the full-width forms of ASCII (U+FF01..U+FF5E: '＋',
// brackets, letters) to ASCII, and the ideographic space to a space.
// phonenumbers maps only Arabic-Indic and full-width digits itself and lets
// other digits through unconverted, so without this "+१२०१५५५०१२३" would
// not be the same key as "+12015550123", which a Java origin
// (Character.digit) says it is. ASCII input is returned as is.
func foldPhoneText(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		switch {
		case r < utf8.RuneSelf:
			b.WriteByte(byte(r))
		case r >= 0xFF01 && r <= 0xFF5E:
			b.WriteByte(byte(r - 0xFEE0))
		case r == 0x3000:
			b.WriteByte(' ')
		default:
			if d, ok := digitValue(r); ok {
				b.WriteByte('0' + d)
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// digitValue returns the value of a Unicode decimal digit (category Nd).
// Every Nd range in the Unicode tables is a run of whole blocks of ten
// starting at a zero (TestDigitTables holds the tables to that), so the
// value is the offset in the range modulo ten.
func digitValue(r rune) (byte, bool) {
	for _, rg := range unicode.Nd.R16 {
		if r < rune(rg.Lo) {
			return 0, false
		}
		if r <= rune(rg.Hi) {
			return byte((r - rune(rg.Lo)) % 10), true
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r < rune(rg.Lo) {
			return 0, false
		}
		if r <= rune(rg.Hi) {
			return byte((r - rune(rg.Lo)) % 10), true
		}
	}
	return 0, false
}

// leadingIDDToPlus reads a leading "00" as '+' for a number parsed without
// a default region, where it can mean nothing else. With a default region,
// phonenumbers applies that region's own international prefix ("00" from
// DE, "011" from US), and "00 44 ..." from US stays the invalid national
// number the test vectors say it is.
func leadingIDDToPlus(s string) string {
	t := strings.TrimLeft(s, " \t")
	if len(t) > 2 && t[0] == '0' && t[1] == '0' {
		return "+" + t[2:]
	}
	return s
}
