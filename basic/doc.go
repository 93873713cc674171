// Package basic is the feature of what every request can be keyed and
// judged by without any block of the policy (docs/policy.md,
// "Characteristics" and "when { }"): the ip, route and global
// characteristics, and the ip_in and ip_not_in conditions on the client
// address. rules names none of them: like every other characteristic and
// condition they are a feature's, in builtin.Features
// (docs/architecture.md, "Extension points"). Their values are compiled
// once per rule and read the request only; they are safe for concurrent
// use and allocate nothing on the hot path.
package basic
