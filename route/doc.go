// Package route reads a request's route the way its origin will: the
// canonical path the origin receives (AppendCanonicalPath), the match form
// rules compare (AppendMatchPath: Unicode folded as the origins that fold
// do), the host (AppendHost) and the methods an override header names
// (AppendMethodTokens). The gateway builds a request's route with it, and
// rules compiles a policy's paths and hosts with it, so one spelling on
// either side matches every spelling of it on the other
// (docs/host-and-path.md). Its functions are pure, append to a
// caller-owned buffer and allocate nothing once it has grown.
package route
