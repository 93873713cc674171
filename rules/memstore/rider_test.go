package memstore

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestRepeatedDistinctKeyHoldsOneRoom: two Distinct ops of one call on one
// key the store does not hold (the values of one request on one
// count_distinct key, rules/values.go) hold one room of their budget and
// one claim of their network's share between them: a call refused by
// another op gives back exactly what it took (the budget's count comes
// back to 0, never below, however often it happens), and a call that
// consumes stores one key counted once.
func TestRepeatedDistinctKeyHoldsOneRoom(t *testing.T) {
	t.Parallel()
	for _, sensitive := range []bool{false, true} {
		s := newStore(t, Options{Shards: 4, SweepInterval: -1})
		now := storetest.Base
		distinct := func(member uint64) rules.Op {
			op := ruleOp('d', 1, 10, sensitive, 5, time.Hour)
			op.Algorithm, op.Member = rules.Distinct, member
			op.Network, op.NetworkKeys = 0xa, 3
			return op
		}
		// A fixed window of one, spent: every call holding it is refused.
		gate := ruleOp('g', 1, 10, false, 1, time.Hour)
		gate.Algorithm = rules.FixedWindow
		take(t, s, now, gate)
		var id [8]byte
		k0 := distinct(0).Key
		copy(id[:], k0[:8])
		keys := func() (n int64) {
			for _, b := range s.Budgets() {
				if b.ID == id && !b.Markers {
					n = b.Keys
				}
			}
			return n
		}
		for range 5 {
			res := take(t, s, now, gate, distinct(1), distinct(2))
			if res[0].Allowed {
				t.Fatalf("sensitive %v: the spent gate allowed", sensitive)
			}
		}
		if n := keys(); n != 0 {
			t.Fatalf("sensitive %v: after 5 refused calls the budget counts %d keys, want 0", sensitive, n)
		}
		// A consuming call: one key, counted once in the budget and once in
		// its network's share (3: two more keys of network a still fit).
		if res := take(t, s, now, distinct(1), distinct(2)); !res[0].Allowed || !res[1].Allowed {
			t.Fatalf("sensitive %v: two new values on a fresh set: got %+v, want both allowed", sensitive, res)
		}
		if n := keys(); n != 1 {
			t.Fatalf("sensitive %v: after the consuming call the budget counts %d keys, want 1", sensitive, n)
		}
		for k := 2; k <= 3; k++ {
			op := distinct(1)
			op.Key = ruleOp('d', k, 10, sensitive, 5, time.Hour).Key
			if r := take(t, s, now, op)[0]; !r.Allowed || r.NetworkFull {
				t.Fatalf("sensitive %v: network a's key %d of 3: got %+v, want allowed", sensitive, k, r)
			}
		}
		op := distinct(1)
		op.Key = ruleOp('d', 4, 10, sensitive, 5, time.Hour).Key
		if r := take(t, s, now, op)[0]; !r.NetworkFull {
			t.Fatalf("sensitive %v: network a's fourth key: got %+v, want NetworkFull (its share is 3)", sensitive, r)
		}
	}
}
