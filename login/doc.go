// Package login is the edge's login and signup feature: the account
// attribute of the identity { } block (where the login identifier comes
// from: JSON or form fields, read by package fields exactly as origins read
// them) and the account characteristic, the identifier normalised as an
// identity provider and an accent- and case-insensitive database collation
// compare it ([Normalizer]: white space trimmed, then the spelling of its
// key under Unicode collation at primary strength), so that no spelling of
// one account gets a budget of its own. The account_aliases rule attribute also folds the aliases an
// email provider delivers to one inbox, for signup rules.
//
// The counting itself is the rules engine's: count = "failures" (a unit
// charged before the origin answers, given back unless it is a failure),
// count_distinct = "account" (credential stuffing: distinct failing
// accounts per client), known_visitors (an account-wide rule that cannot
// lock out the real user's known browser) and ban. docs/policy.md
// documents them with login policies; docs/architecture.md, "Extension
// points", shows how this package plugs in.
//
// The account is keyed, like every identity, by its keyed hash: no store,
// log or metric sees it. Normalising an ASCII account allocates nothing
// once a Scratch is warm; other scripts go through golang.org/x/text's
// collation, whose contraction matching allocates 128 bytes at each letter
// that may begin a contraction (l, for "l·").
package login
