// Package refusal is how an ordinary (not sensitive) limit rule's
// informative refusal is answered (docs/policy.md, "Refusals";
// docs/headers.md, "Retry-After jitter"): refusal_status, refusal_body and
// refusal_content_type choose the status and body in place of 429 and the
// problem+json body, and retry_after_jitter spreads Retry-After and the
// rule's RateLimit t over up to that fraction more of the true wait, so
// clients refused together do not all come back at once.
//
// It is a rules.Feature (builtin.Features lists it) whose four attributes
// compile to one Stage per rule, the Refusal, with no phase of its own:
// the decision is the same whatever the answer says, and the gateway reads
// the answer's settings through Of and Jitter when it writes a refusal.
// A compiled Refusal is immutable and safe for concurrent use.
package refusal
