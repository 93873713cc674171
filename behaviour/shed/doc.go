// Package shed is load shedding's policy language (docs/policy.md, "Load
// shedding"): a rule's priority ("low", "normal", "high", "critical") and
// the edge block's load_shedding { } (max_in_flight, the node's ceiling
// on the requests it has at the origin; shed_at, each priority's share of
// a capacity; retry_after and retry_after_jitter, the Retry-After of a
// shed request on an ordinary route). When the origin is saturated the
// edge answers 503 rather than forwarding, and sheds the lower priorities
// first, so that the routes that matter keep working.
//
// It is a rules.Feature (builtin.Features lists it): priority is a rule
// attribute it compiles into the rule's Priority, and, once every rule is
// compiled (Feature.PolicyDone), it compiles load_shedding { }, which
// package node decodes with the edge block and keeps as written
// (node.Config.LoadShedding), warns where the settings shed nothing, and
// hands admission its numbers (rules.Compiler.SetShedding). Admission
// itself, the gate's last step, stays the Engine's (rules/shed.go): its
// counts outlive a reload, and every adaptive rule's limiter admits by
// the same priorities and shares. Of reads the compiled block (the
// gateway's Retry-After jitter). A compiled Settings is immutable and safe
// for concurrent use.
package shed
