// Package values counts every value of an identity with several
// (docs/policy.md, "identity { }"). An identity is a list of sources, and a
// request may carry several of them with values that disagree: a login
// body with a username and an email, an origin that logs people in by
// either. Counting the first alone let an attacker guess at one email
// under a fresh username each time. So a rule keyed on such an identity
// (a rules.MultiCharacteristic in its key or its count_distinct) counts
// every value: its match is expanded into one rules.Match per combination
// of values (Match.Value 1, 2, ... for the further ones, right after the
// first), each its own key and its own op in the request's one store
// call; the request is refused if any is over its limit (all-or-nothing,
// as ever), and each match is charged, refunded, reset, known, banned and
// explained as a rule's only match is. Equal values count once. A rule
// whose combinations could exceed MaxCombinations is refused at compile.
//
// It is a rules.Feature (builtin.Features lists it) with no attribute:
// once a rule is compiled (Feature.RuleDone) whose key or count_distinct
// can carry several values, it gets a Stage, a rules.Expander: the Engine
// asks it for the value of each characteristic it keys (AppendKeyValue),
// and once the rule's first match is counted it adds the others (Expand),
// as it adds their keys for a ban of ban_scope = "sensitive"
// (rules.Scratch.RuleKeys). The combination being keyed lives in one memo
// slot of the policy's, marked only while a rule's values are expanded
// (every characteristic gives its first value otherwise). A Stage is
// immutable and safe for concurrent use.
package values
