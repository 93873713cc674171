// Package fields reads request fields (JSON and form bodies, query
// strings, headers and cookies) exactly as origins' parsers read them, or
// refuses: where parsers could disagree, a field is an error, never a
// guess, so the edge and the origin never name two different values for
// one identity (docs/body-identities.md).
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
// never read two different values of one field, a phone number or an
// account, for one request.
//
// # Sources
//
// [ParseSource] parses a source string (json:PATH, form:NAME,
// header:NAME, query:NAME, cookie:NAME), as the identity block lists them.
// [Feature] gives rules the header:, cookie:, query:, json: and form:
// characteristics, and [Lookup] reads one identity source from a
// request for other features (package otp reads phone numbers and OTP
// challenge IDs through it).
//
// # Concurrency and cost
//
// Everything is safe for concurrent use: the package holds no mutable
// state. The readers are pure, and none retains the byte slices it is
// given, except that a [JSONDoc] (a body checked once by [ParseJSON], for
// reading several fields) refers to its body; [Lookup] and [BodyField]
// write only to the rules.Scratch they are given.
// The body readers are linear in the body's length (times the path's depth
// for JSON), allocate only the returned string, and return preallocated
// errors; BodyKind, ParseMediaType and CheckMerged allocate nothing.
package fields
