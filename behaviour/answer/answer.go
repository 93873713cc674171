package answer

import (
	"slices"

	"github.com/edge-gateway/edge/rules"
)

// Feature returns the hooks of count = "failures" and reset_on_success.
func Feature() rules.Feature {
	return rules.Feature{Name: "answer", RuleDone: compile}
}

// compile gives r the hook that learns from the origin's answer: a
// failures rule's (countFailures), or else reset_on_success's. A rule
// that counts nothing takes no count = "failures" (rules refuses it).
func compile(_ *rules.Compiler, r *rules.Rule) {
	switch {
	case r.Count == rules.CountFailures && !r.Counts():
	case r.Count == rules.CountFailures:
		r.Hooks = append(r.Hooks, countFailures{failure: r.FailureStatus, success: r.SuccessStatus, reset: r.ResetOnSuccess})
	case r.ResetOnSuccess:
		r.Hooks = append(r.Hooks, resetOnSuccess{success: r.SuccessStatus})
	}
}

// resetOnSuccess is reset_on_success: the Hook that clears a rule's
// counter for the key once the origin's answer is a success. A success
// that may be another caller's than the counter's (Match.Several,
// Match.Folded: the request named several accounts, or one spelling of an
// account that shares its counter with others) clears nothing: it gives
// back its own charge, as a success under count = "failures" does, so
// that an attacker's own successful login beside (or spelled like) a
// victim's account never wipes the victim's failures.
type resetOnSuccess struct{ success []int }

func (h resetOnSuccess) AfterOrigin(m *rules.Match, ops []rules.Op, status int, outcome []byte, settle []rules.Op) []rules.Op {
	if !IsSuccess(h.success, status, outcome) {
		return settle
	}
	op := ops[m.Op]
	switch {
	case !m.Several && !m.Folded:
		op.Kind = rules.OpReset
	case m.Known:
		return settle // not charged: nothing to give back
	default:
		op.Kind = rules.OpRefund
	}
	return append(settle, op)
}

// countFailures is count = "failures" (docs/policy.md, "count"). The rule
// took one unit before proxying (a count_distinct rule: its value), so
// concurrent guesses cannot overshoot: a failure keeps it; anything else
// gives it back (an OpRefund, its ceiling's too; a distinct value leaves
// the set), and a success under reset_on_success clears the key instead (not
// a distinct set: one success must not forget the other values; nor a
// success that may be another caller's, Several or Folded, which gives
// back its own charge alone: resetOnSuccess). A crowd logging in
// successfully is therefore never counted.
type countFailures struct {
	failure, success []int
	reset            bool
}

func (h countFailures) AfterOrigin(m *rules.Match, ops []rules.Op, status int, outcome []byte, settle []rules.Op) []rules.Op {
	if IsFailure(h.failure, status, outcome) {
		return settle
	}
	op := ops[m.Op]
	reset := h.reset && op.Algorithm != rules.Distinct && !m.Several && !m.Folded && IsSuccess(h.success, status, outcome)
	if m.Known {
		// A known visitor was not charged: nothing to give back, but a
		// success still clears the key under reset_on_success.
		if reset {
			op.Kind = rules.OpReset
			settle = append(settle, op)
		}
		return settle
	}
	op.Kind = rules.OpRefund
	if reset {
		op.Kind = rules.OpReset
	}
	settle = append(settle, op)
	if m.CeilingOp >= 0 {
		c := ops[m.CeilingOp]
		c.Kind = rules.OpRefund // a ceiling is shared by many: refunded, never reset
		settle = append(settle, c)
	}
	return settle
}

// IsFailure classifies the origin's answer for count = "failures":
// X-Edge-Outcome "failure" or "success" when the origin sent one, else
// whether status is one of failure (a rule's failure_status).
func IsFailure(failure []int, status int, outcome []byte) bool {
	return is("failure", failure, status, outcome)
}

// IsSuccess classifies the origin's answer: X-Edge-Outcome "success" or
// "failure" when the origin sent one, else whether status is one of
// success (a rule's success_status).
func IsSuccess(success []int, status int, outcome []byte) bool {
	return is("success", success, status, outcome)
}

// is reports whether the answer is word ("success" or "failure"): the
// origin's X-Edge-Outcome when it is either word, else whether status is
// one of statuses.
func is(word string, statuses []int, status int, outcome []byte) bool {
	switch string(outcome) {
	case "success", "failure":
		return string(outcome) == word
	}
	return slices.Contains(statuses, status)
}

var (
	_ rules.Hook = resetOnSuccess{}
	_ rules.Hook = countFailures{}
)
