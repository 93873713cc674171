// Package route reads a request's route the way its origin will: the
// canonical path the origin receives (AppendCanonicalPath), the match form
// rules compare (AppendMatchPath: Unicode folded as the origins that fold
// do), the host (AppendHost) and the methods an override header names
// (AppendMethodTokens). The gateway builds a request's route with it, and
// it compiles a rule's methods, paths and hosts into the Matcher the
// request is matched by (Compile, Matcher.Match) through the same
// functions, so one spelling on either side matches every spelling of it
// on the other (docs/host-and-path.md, docs/policy.md "Matching"). Its
// functions are pure, append to a caller-owned buffer and allocate nothing
// once it has grown; a Matcher is immutable and Match allocates nothing.
package route
