// Package otp reads the identities of the identity { } block out of a
// request body and turns phone numbers into keys: the phone, phone_range,
// phone_country and otp_session characteristics that OTP rules count on.
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
// country code; [Phone.Country] its region. [AppendSessionKey] builds the
// otp_session key from the phone and a challenge ID.
//
// # Body fields
//
// [BodyKind] tells from Content-Type ([ParseMediaType], RFC 9110's
// media-type grammar) and the body whether json: or form: sources apply,
// or whether the body is one origins read in ways the edge cannot follow
// (docs/body-identities.md). [JSONField] and [FormField] (and [QueryField]
// for query strings) read a field the way origins' parsers read it, and
// refuse to guess where parsers disagree: a field given twice with
// different values (JSON keys compared case-insensitively, as
// encoding/json matches struct fields; form names as Go, PHP, Rack and
// Express file them) is [ErrAmbiguous], a body that is not well-formed
// (or holds invalid UTF-8, a lone surrogate or a NUL) is [ErrMalformed],
// a JSON object, array, boolean or null where the value should be is
// [ErrNotIdentity]. [Source.CheckMerged] holds a body field to the query
// string and cookies of the same name, which PHP's $_REQUEST, Go's
// FormValue and Rails' params merge in. The edge and the origin therefore
// never name two different phone numbers for one request. [ParseSource]
// parses the identity block's source strings.
//
// # Concurrency and cost
//
// Every function is pure and safe for concurrent use: the package holds no
// mutable state (phonenumbers keeps a mutex-guarded cache of compiled
// regular expressions). No function retains the byte slices it is given,
// except that a [JSONDoc] (a body checked once by [ParseJSON], for reading
// several fields) refers to its body.
// The body readers are linear in the body's length (times the path's depth
// for JSON), allocate only the returned string, and return preallocated
// errors; BodyKind, ParseMediaType and CheckMerged allocate nothing; Normalize costs what phonenumbers costs, some microseconds and
// tens of allocations, and refuses input over [MaxPhoneBytes] before
// parsing.
package otp
