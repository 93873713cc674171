// Package rules is the core of the edge's decision: the policy language's
// own blocks, the Engine that decides a request against a compiled Policy,
// and the Store contract every counter store meets (the limit algorithms
// are rules/counter's).
// docs/architecture.md is the map; docs/policy.md the language.
//
// # Compiling a policy
//
// [Load] parses policies.hcl and compiles it into an immutable [*Policy],
// or returns every problem it found as hcl.Diagnostics with file:line,col,
// sorted by position and stable from run to run. rules decodes the rule
// and known blocks itself (compile*.go); everything else comes from the
// [Feature] values the caller passes: their blocks, characteristics,
// when { } conditions, rule attributes and hooks. The node's own blocks,
// edge { } and store { }, are a feature's too (package node), which hands
// what the rules read of them to the policy ([Node], [Compiler.SetNode]). rules knows no feature
// by name and imports none, and names no characteristic or condition (ip,
// route and global are package basic's); builtin.Features lists this
// build's. Attribute values are read by rules/hclattr, blocks decoded
// around their errors by rules/hcldecode. A reload
// compiles a new Policy and swaps a pointer, and counters follow a rule by
// the hash of its name ([Rule.ID]), so they survive the reload.
//
// # Deciding a request
//
// [Engine.Check] matches every rule against a [Request] (method, method
// overrides, host, match path, client address; [route.AppendCanonicalPath],
// [route.AppendMatchPath], [route.AppendHost] build them the way the origin reads
// them), resolves each matching rule's key through its characteristics,
// and makes one [Store.Take] call for all of them. A request passes only if
// every enforcing rule allows it; the [Decision] says what the edge does
// (forward, 429, 403, 400 for a missing or invalid identity, 503 for a
// fail-closed store failure) and [Engine.Settle] runs the rules' hooks once
// the origin answered. The decision path allocates nothing: a pooled
// [Scratch] holds the ops, results and features' memo slots.
//
// # Counters
//
// A [Key] is the rule's ID, a tag byte and a keyed hash (HMAC-SHA256 under
// the key secret) of the characteristic values: no raw phone number,
// account or address reaches a store. The algorithms ([GCRA],
// [TokenBucket], [LeakyBucket], [FixedWindow], [SlidingWindow],
// [SlidingLog], and count_distinct's [Distinct]) are written once in
// rules/counter, as the lesson gives them, one table entry each
// (counter.Spec) that the stores read; the memory store runs them directly
// and the Redis store's script mirrors them, and rules/storetest holds both
// to the same tables. [Op], [Result] and [Key] are counter's types.
package rules
