package cost

import (
	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/rules"
)

// settler is the Settle phase of a rule with settle_from: a Stage of its
// own, so a rule whose cost settles nothing does not ask for the origin's
// answer (rules.Decision.Settle).
type settler struct{ c *Stage }

// Behaviour names the stage.
func (settler) Behaviour() string { return "cost" }

// Settle appends to settle the ops that settle m's cost once the origin
// answered: the real cost from the settle_from header of its answer
// (Scratch.Response), minus what the take charged, added (OpAdd: never
// refused, into debt) or refunded, on the rule's key and its IP ceiling's.
// A response without the header, or with a value that is not an integer,
// settles nothing; SettleInvalid counts the values clamped or ignored. A
// known caller was not charged: nothing to settle.
func (t settler) Settle(s *rules.Scratch, m *rules.Match, _ int, _ []byte, settle []rules.Op) []rules.Op {
	c := t.c
	h := s.Response()
	if h == nil || m.Known {
		return settle
	}
	real, ok, clamped := SettleCost(h.PeekBytes(c.settleFrom), c.max)
	if clamped {
		c.countInvalid(s)
	}
	if !ok {
		return settle
	}
	for _, i := range [2]int{m.Op, m.CeilingOp} {
		if i < 0 {
			continue
		}
		op := s.Ops[i]
		diff := real - op.Cost
		switch {
		case diff > 0:
			op.Kind, op.Cost = rules.OpAdd, diff
		case diff < 0:
			op.Kind, op.Cost = rules.OpRefund, -diff
		default:
			continue
		}
		op.Attempts = false
		settle = append(settle, op)
	}
	return settle
}

// invalid is the request's count of settle_from values clamped or
// ignored, in the memo slot "cost.settle" (one per Scratch, reused).
type invalid struct{ n int }

func (c *Stage) countInvalid(s *rules.Scratch) {
	m := s.Memo(c.slot)
	st := memo.State[invalid](m)
	if !m.Done {
		m.Done, st.n = true, 0
	}
	st.n++
}

// SettleInvalid returns how many settle_from values the request's
// Engine.Settle found invalid or out of range (SettleCost's clamped), for
// edge_settle_invalid_total: 0 before Settle, and until the next request
// begins on s.
func SettleInvalid(s *rules.Scratch) int {
	for i := range s.Matches {
		c := Of(s.Matches[i].Rule)
		if c == nil || c.settleFrom == nil {
			continue
		}
		m := s.Memo(c.slot)
		if st, ok := m.State.(*invalid); ok && m.Done {
			return st.n
		}
		return 0
	}
	return 0
}

var (
	_ rules.Shaper  = (*Stage)(nil)
	_ rules.Settler = settler{}
)
