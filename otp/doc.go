// Package otp turns phone numbers into keys: the phone, phone_range,
// phone_country and otp_session characteristics that OTP rules count on.
// The identity { } block names where a request's phone number and OTP
// challenge ID come from; otp reads those sources through package
// [github.com/edge-gateway/edge/fields], which reads request fields
// exactly as origins' parsers read them or refuses
// (docs/body-identities.md).
//
// # Phone numbers
//
// [Normalize] reads a number with github.com/nyaruka/phonenumbers (Go's
// libphonenumber), the policy's phone_region as the default region, and
// returns its E.164 form ([Phone]). Every spelling of one number gives one
// key, so an attacker gains no fresh bucket by reformatting: spaces,
// dashes, brackets, dots, a national prefix, the default region's
// international prefix (and a leading 00 when there is no default region),
// tel: URIs, extensions, full-width and Arabic-Indic or any other Unicode
// decimal digits. A number that does not parse, that phonenumbers could
// read only by skipping words before it or dropping stray letters or
// symbols ("call me 5550199", "+44 7700 900123x"), that is not a possible
// number for its country (a local number without its area code included),
// or whose E.164 form reads back as another number is [ErrInvalidPhone]:
// the rule's invalid_identity decides (400 by default).
// [Phone.Range] is the number without its last three digits (the block an
// SMS pumping run walks through), never empty and always holding the
// country code; [Phone.Country] its region.
//
// # OTP sessions
//
// [AppendSessionKey] builds the otp_session key from the challenge ID
// alone, length-prefixed: an origin that finds a challenge by its ID must
// not give a fresh budget per phone number written beside it.
//
// # Concurrency and cost
//
// Every function is safe for concurrent use: the package holds no mutable
// state (phonenumbers keeps a mutex-guarded cache of compiled regular
// expressions), and no function retains the byte slices it is given.
// Normalize costs what phonenumbers costs, some microseconds and tens of
// allocations, and refuses input over [MaxPhoneBytes] before parsing;
// AppendSessionKey allocates nothing when dst has room.
package otp
