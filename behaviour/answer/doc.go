// Package answer is what a rule's counter learns from the origin's answer
// (docs/policy.md, "count" and "reset_on_success"): count = "failures"
// charges one unit before proxying, so that concurrent guesses cannot
// overshoot, and gives it back unless the answer is a failure; and
// reset_on_success clears the rule's counter for the key once the answer
// is a success. The answer is classified by the origin's X-Edge-Outcome
// when it sends one ("success" or "failure"), else by the rule's
// failure_status and success_status (IsFailure, IsSuccess, which
// behaviour/known and behaviour/ban read too).
//
// It is a rules.Feature (builtin.Features lists it) with no attribute:
// rules compiles count, reset_on_success, failure_status and
// success_status, the words of its own rule block, and once a rule is
// compiled (Feature.RuleDone) this package gives one that needs it its
// rules.Hook, which Engine.Settle runs in its one store call, before the
// rule's stages' Settle. A hook is immutable and safe for concurrent use.
package answer
