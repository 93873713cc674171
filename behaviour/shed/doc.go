// Package shed is load shedding (docs/policy.md, "Load shedding"): a
// rule's priority ("low", "normal", "high", "critical") and the edge
// block's load_shedding { } (max_in_flight, the node's ceiling on the
// requests it has at the origin; shed_at, each priority's share of a
// capacity; retry_after and retry_after_jitter, the Retry-After of a shed
// request on an ordinary route), and the admission that reads them. When
// the origin is saturated the edge answers 503 rather than forwarding, and
// sheds the lower priorities first, so that the routes that matter keep
// working.
//
// It is a rules.Feature (builtin.Features lists it): priority is a rule
// attribute, and, once every rule is compiled (Feature.PolicyDone), it
// compiles load_shedding { }, which package node decodes with the edge
// block and keeps as written (node.Config.LoadShedding), warns where the
// settings shed nothing, and, when the policy sheds (a max_in_flight, or
// an adaptive rule: behaviour/adaptive), adds its admission as a request
// hook: a rules.Admitter, the gate's last step, before the store call
// (admit.go). Admission counts in Slots the Engine keeps across reloads
// (rules.Engine.LocalSlots: the node's count of no rule, and each adaptive
// rule's limiter), which rules' in-flight lifecycle gives back once. Of
// reads the compiled block (the gateway's Retry-After jitter), InFlight
// and Stats the Engine's counts (metrics), RequestPriority a request's
// priority (its log line). A compiled Settings is immutable and safe for
// concurrent use; so is admission, whose counts are atomic.
package shed
