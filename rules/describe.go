package rules

import "slices"

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

// String returns the action as policies.hcl spells it (actions), or
// "unknown".
func (a Action) String() string {
	if i := slices.Index(actions.Values, a); i >= 0 {
		return actions.Words[i]
	}
	return "unknown"
}
