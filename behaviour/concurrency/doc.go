// Package concurrency is the concurrency limit of rule { } blocks,
// algorithm = "concurrency" (docs/policy.md, "Concurrency limits"). A rate
// limit counts arrivals; a concurrency rule counts the requests of a key
// that are at the origin now, and refuses a new one while limit of them
// are, with Retry-After RetryAfter and no RateLimit fields (it is no quota
// over a window).
//
// The store needs nothing new: a concurrency rule's op is a Distinct op
// (the count_distinct algorithm) whose Member is a lease ID unique to the
// request and whose period is the rule's lease. Distinct keeps each member
// with the time it was counted and admits a new one while fewer than
// limit are live, so the set of live members is the set of requests in
// flight; the refund once the origin answers (rules.Engine.Settle, or
// rules.Engine.Release when it does not) removes the member, and a member
// no node ever removes (its node died) stops counting when its lease ends,
// in the memory store and in Redis alike. In Redis the set is shared by
// the fleet, so limit is the fleet's, not each node's.
//
// It is a rules.Feature (builtin.Features lists it) whose algorithm word
// (rules.AlgorithmType) compiles to a Stage: a Shape phase (the request's
// lease ID, on its op), and a part in rules' in-flight lifecycle
// (rules.Holder: the lease held once the main call answered, given back
// once, docs/architecture.md, "The decision pipeline"). Its lease
// attribute, its limit and the rule's own attributes that mean nothing for
// requests in flight are compiled once the rule's other attributes are
// (Feature.RuleDone); an adaptive { } rule (behaviour/adaptive) is a
// concurrency rule whose limit its block finds, on this node, with no
// lease. A compiled Stage is safe for concurrent use: it hands out lease
// IDs with an atomic counter.
package concurrency
