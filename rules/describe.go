package rules

import "time"

// Paths returns the match-form paths the rule matches, exact ones first and
// then prefixes ("/api/*"); empty means any path. For the admin API
// (GET /admin/rules); the hot path reads the compiled form.
func (r *Rule) Paths() []string {
	if r.anyPath {
		return nil
	}
	ps := make([]string, 0, len(r.exact)+len(r.prefixes))
	ps = append(ps, r.exact...)
	for _, p := range r.prefixes {
		ps = append(ps, p+"*")
	}
	return ps
}

// Hosts returns the hosts the rule matches (lower case, no port); empty
// means any host.
func (r *Rule) Hosts() []string { return r.hosts }

// KnownVisitors returns the rule's known_visitors (docs/policy.md,
// "known_visitors"): how long a visitor that succeeded is not held to the
// rule, 0 for none. For tools that read a policy (the attack suite's
// bounds); the hot path reads the compiled form.
func (r *Rule) KnownVisitors() time.Duration { return time.Duration(r.knownUS) * time.Microsecond }

var actionNames = [...]string{ActionLimit: "limit", ActionDeny: "deny", ActionLog: "log", ActionSkip: "skip"}

// String returns the action as policies.hcl spells it.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}
