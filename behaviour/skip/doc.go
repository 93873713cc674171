// Package skip is the exemptions of rule { } blocks (docs/policy.md,
// "Exemptions: action = "skip""): a rule whose action is "skip" counts
// nothing and refuses nothing; when it matches a request (its methods,
// paths and hosts, and every when { } condition), the rules its skip list
// names do not apply to that request at all, as if they had not matched:
// no count, no refusal, no bare answer, recorded as rules.OutcomeExempt.
// The office network that must never meet the login limits, the
// monitoring probe, the partner with its own contract:
//
//	rule "office" {
//	  action = "skip"
//	  skip   = ["login-per-ip", "login-per-account"]
//	  when { ip_in = ["10.0.0.0/8", "2001:db8::/32"] }
//	}
//
// Skip rules are decided before every other rule, so one applies wherever
// it is written. skip = ["*"] skips every rule that is not a skip rule, the
// sensitive ones too; a skip rule is never skipped itself, so no order or
// cycle among them can matter.
//
// It is a rules.Feature (builtin.Features lists it): the skip attribute
// compiles to a Stage with an Exempt phase (rules.Exempter), which the
// Engine runs at the start of the match phase for the skip rules a request
// matches; the rule names are checked, and turned into rules, once every
// rule is compiled (Feature.PolicyDone), since a skip rule may come before
// the rules it skips.
//
// The word "skip" itself stays in rules' vocabulary of action (limit,
// deny, log, skip): what an action means for counting (a skip rule counts
// nothing, takes no limit, key, max_keys or count, is never forgiven nor
// put in dry-run) is checked by rules' own attributes, which a feature
// cannot see. This package owns what a skip rule does: its list, and the
// exemptions.
package skip
