// Package memo holds what the features that keep per-request state in a
// rules.Memo slot (Compiler.Slot) share: the state itself, made once per
// Scratch and reused by every request on it, so that the decision path
// allocates nothing once warm. Safe for concurrent use on distinct
// Scratches, as a Scratch is.
package memo

import "github.com/edge-gateway/edge/rules"

// State returns memo slot m's State as a *T, made the first time (once
// per Scratch): a feature's per-request values, reused. Whether they are
// this request's is m.Done's to say (Scratch.Begin clears it).
func State[T any](m *rules.Memo) *T {
	st, _ := m.State.(*T)
	if st == nil {
		st = new(T)
		m.State = st
	}
	return st
}
