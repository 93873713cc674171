package memstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// The package doc's "Network shares": one network may hold at most
// NetworkKeys keys of a budget.

// netOp is ruleOp from network net, which may hold share keys of the
// budget.
func netOp(r byte, n int, maxKeys int32, sensitive bool, net uint32, share int32) rules.Op {
	op := ruleOp(r, n, maxKeys, sensitive, 1, time.Hour)
	op.Network, op.NetworkKeys = net, share
	return op
}

// TestNetworkShareRefusesThatNetworkOnly: a network holding its share of
// a budget is refused a new key (Allowed false, NetworkFull, the op's
// period as Retry-After, nothing stored, counted), sensitive rule or not,
// with room in the budget or without (the share comes first: 429, not a
// full budget's 503); its keys keep counting; other networks, and ops of
// no network, still make keys.
func TestNetworkShareRefusesThatNetworkOnly(t *testing.T) {
	t.Parallel()
	for _, sensitive := range []bool{false, true} {
		s := newStore(t, Options{Shards: 4, SweepInterval: -1})
		now := storetest.Base
		const a, b = 0xa, 0xb
		for n := range 2 {
			if r := take(t, s, now, netOp('n', n, 4, sensitive, a, 2))[0]; !r.Allowed || r.NetworkFull {
				t.Fatalf("sensitive %v: network a's key %d: got %+v, want allowed", sensitive, n, r)
			}
		}
		want := rules.Result{NetworkFull: true, RetryAfter: time.Hour, ResetAfter: time.Hour}
		if r := take(t, s, now, netOp('n', 2, 4, sensitive, a, 2))[0]; r != want {
			t.Errorf("sensitive %v: network a's third key: got %+v, want %+v", sensitive, r, want)
		}
		if r := take(t, s, now, peekOf(netOp('n', 2, 4, sensitive, a, 2)))[0]; !r.Allowed {
			t.Errorf("sensitive %v: network a's refused key: got %+v, want not stored", sensitive, r)
		}
		if r := take(t, s, now, netOp('n', 0, 4, sensitive, a, 2))[0]; r.Allowed || r.NetworkFull {
			t.Errorf("sensitive %v: network a's key 0 again: got %+v, want refused by its own counter", sensitive, r)
		}
		if r := take(t, s, now, netOp('n', 3, 4, sensitive, b, 2))[0]; !r.Allowed {
			t.Errorf("sensitive %v: network b's key: got %+v, want allowed", sensitive, r)
		}
		if r := take(t, s, now, netOp('n', 4, 4, sensitive, 0, 2))[0]; !r.Allowed {
			t.Errorf("sensitive %v: a key of no network: got %+v, want allowed", sensitive, r)
		}
		// The budget is full now: network a is still refused for its share.
		if r := take(t, s, now, netOp('n', 5, 4, sensitive, a, 2))[0]; r != want {
			t.Errorf("sensitive %v: network a's key in a full budget: got %+v, want %+v", sensitive, r, want)
		}
		if got := budgetStats(t, s, 'n'); got.NetworkFull != 2 || got.Keys != 4 {
			t.Errorf("sensitive %v: got %+v, want 4 keys and 2 refused for their network", sensitive, got)
		}
		checkEntries(t, s)
	}
}

// TestNetworkShareIsAllOrNothing: a new key refused for its network
// refuses the request: the call's other takes consume nothing, and the
// network's count does not move.
func TestNetworkShareIsAllOrNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	now := storetest.Base
	take(t, s, now, netOp('n', 0, 10, true, 7, 1))
	other := ruleOp('o', 0, 10, false, 5, time.Hour)
	res := take(t, s, now, netOp('n', 1, 10, true, 7, 1), other)
	if !res[0].NetworkFull || res[0].Allowed || !res[1].Allowed {
		t.Fatalf("got %+v, want the new key refused for its network, the other op allowed", res)
	}
	if r := take(t, s, now, peekOf(other))[0]; r.Remaining != 5 {
		t.Errorf("the other op after the refused call: %d left, want 5 (nothing consumed)", r.Remaining)
	}
	b := s.budgetOf(&rules.Op{Key: netOp('n', 0, 10, true, 7, 1).Key, MaxKeys: 10})
	if n := b.nets.Load()[netSlot(7)].Load(); n != 1 {
		t.Errorf("network 7 counts %d keys, want 1", n)
	}
}

// TestNetworkShareGivesRoomBack: a network's key that decays, is evicted
// or is emptied gives its room in the share back; a decayed key read
// again counts to the network that reads it.
func TestNetworkShareGivesRoomBack(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 1, SweepInterval: -1})
	now := storetest.Base
	short := func(n int, net uint32) rules.Op {
		op := netOp('g', n, 3, false, net, 1)
		op.PeriodUS = time.Second.Microseconds()
		return op
	}
	take(t, s, now, short(0, 1))
	if r := take(t, s, now, short(1, 1))[0]; !r.NetworkFull {
		t.Fatalf("network 1's second key: got %+v, want refused for its share", r)
	}
	// Decayed, key 0 is read by network 2: it is network 2's now.
	now = now.Add(2 * time.Second)
	take(t, s, now, short(0, 2))
	if r := take(t, s, now, short(1, 1))[0]; !r.Allowed {
		t.Errorf("network 1 once its key is network 2's: got %+v, want allowed", r)
	}
	if r := take(t, s, now, short(2, 2))[0]; !r.NetworkFull {
		t.Errorf("network 2's second key: got %+v, want refused for its share", r)
	}
	// A flood of ordinary keys of no network evicts network 1's and 2's.
	for n := 10; n < 13; n++ {
		take(t, s, now, netOp('g', n, 3, false, 0, 1))
	}
	if r := take(t, s, now, short(2, 2))[0]; !r.Allowed {
		t.Errorf("network 2 once its key was evicted: got %+v, want allowed", r)
	}
	// An emptied key (a refund) gives it back at once.
	take(t, s, now, netOp('r', 0, 3, true, 3, 1))
	refund := netOp('r', 0, 3, true, 3, 1)
	refund.Kind = rules.OpRefund
	take(t, s, now, refund)
	if r := take(t, s, now, netOp('r', 1, 3, true, 3, 1))[0]; !r.Allowed {
		t.Errorf("network 3 once its key was refunded to empty: got %+v, want allowed", r)
	}
	checkEntries(t, s)
}

// TestNetworkSharesSurviveASnapshot: the restored store counts each key
// to the network that made it.
func TestNetworkSharesSurviveASnapshot(t *testing.T) {
	t.Parallel()
	now := storetest.Base
	b := restoredAfter(t, now, netOp('n', 0, 10, true, 5, 2), netOp('n', 1, 10, true, 5, 2))
	if r := take(t, b, now, netOp('n', 2, 10, true, 5, 2))[0]; !r.NetworkFull {
		t.Errorf("network 5's third key after the restore: got %+v, want refused for its share", r)
	}
	if r := take(t, b, now, netOp('n', 2, 10, true, 6, 2))[0]; !r.Allowed {
		t.Errorf("network 6's key after the restore: got %+v, want allowed", r)
	}
}

// TestMarkersHaveNetworkSharesToo: a network may hold its share of a
// rule's marker budget, not all of it.
func TestMarkersHaveNetworkSharesToo(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	now := storetest.Base
	mk := func(n int, net uint32) rules.Op {
		op := markerOp('m', n, 4, time.Hour)
		op.Network, op.NetworkKeys = net, 1
		return op
	}
	take(t, s, now, mk(0, 1))
	if r := take(t, s, now, mk(1, 1))[0]; !r.NetworkFull {
		t.Errorf("network 1's second marker: got %+v, want refused for its share", r)
	}
	if r := take(t, s, now, mk(1, 2))[0]; !r.Allowed || r.NetworkFull {
		t.Errorf("network 2's marker: got %+v, want written", r)
	}
	if m := ruleBudget(t, s, 'm', true); m.Keys != 2 || m.NetworkFull != 1 {
		t.Errorf("the marker budget: got %+v, want 2 markers and 1 refused", m)
	}
}

// TestConcurrentNetworkShareHolds: callers of one network racing for new
// keys never make more than its share between them.
func TestConcurrentNetworkShareHolds(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 16, SweepInterval: -1})
	now := storetest.Base
	const callers, perCaller, share = 8, 200, 50
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := make([]rules.Result, 1)
			for i := range perCaller {
				op := []rules.Op{netOp('c', c*perCaller+i, 1_000_000, c%2 == 0, 9, share)}
				if err := s.Take(context.Background(), now, op, res); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := budgetStats(t, s, 'c'); got.Keys != share || got.NetworkFull != callers*perCaller-share {
		t.Errorf("got %+v, want %d keys and the other %d refused", got, share, callers*perCaller-share)
	}
	checkEntries(t, s)
}

// TestNetworkShareReclaimsDecayedKeys (a tester's finding F4 on issue
// 24): a network at its share has its keys whose state has decayed
// reclaimed before a new key of it is refused (each equals a missing key:
// forgetting it loses nothing), without waiting for the sweeper; a key
// still live, refusing or not, is never reclaimed; and a refusal's
// Retry-After is the time until the earliest of the network's keys
// decays, not the op's period. Before, the store refused until the
// sweeper ran (off here), with the op's period as Retry-After: a made-up
// wait.
func TestNetworkShareReclaimsDecayedKeys(t *testing.T) {
	t.Parallel()
	for _, sensitive := range []bool{false, true} {
		s := newStore(t, Options{Shards: 4, SweepInterval: -1})
		t0 := storetest.Base
		key := func(n int, period time.Duration) rules.Op {
			op := netOp('d', n, 100, sensitive, 0xa, 2)
			op.PeriodUS = period.Microseconds()
			return op
		}
		take(t, s, t0, key(0, 10*time.Second))               // decays at t0+10s
		take(t, s, t0.Add(2*time.Second), key(1, time.Hour)) // at t0+2s+1h
		want := rules.Result{NetworkFull: true, RetryAfter: 5 * time.Second, ResetAfter: 5 * time.Second}
		if r := take(t, s, t0.Add(5*time.Second), key(2, time.Minute))[0]; r != want {
			t.Errorf("sensitive %v: a third key at t0+5s: got %+v, want %+v (until key 0 decays)", sensitive, r, want)
		}
		at := t0.Add(10 * time.Second)
		if r := take(t, s, at, key(2, time.Minute))[0]; !r.Allowed || r.NetworkFull {
			t.Errorf("sensitive %v: the third key once key 0 has decayed: got %+v, want allowed (key 0 reclaimed)", sensitive, r)
		}
		// Keys 1 (refusing: its one unit is spent) and 2 are live: the
		// next frees when key 2 decays, a minute on.
		want.RetryAfter, want.ResetAfter = time.Minute, time.Minute
		if r := take(t, s, at, key(3, time.Minute))[0]; r != want {
			t.Errorf("sensitive %v: a fourth key: got %+v, want %+v", sensitive, r, want)
		}
		want.RetryAfter, want.ResetAfter = 30*time.Second, 30*time.Second
		if r := take(t, s, at.Add(30*time.Second), key(3, time.Minute))[0]; r != want {
			t.Errorf("sensitive %v: a fourth key 30 s later: got %+v, want %+v", sensitive, r, want)
		}
		if r := take(t, s, at, key(1, time.Hour))[0]; r.Allowed || r.NetworkFull {
			t.Errorf("sensitive %v: key 1 again: got %+v, want refused by its own counter (not reclaimed)", sensitive, r)
		}
		if got := budgetStats(t, s, 'd'); got.Keys != 2 || got.NetworkFull != 3 {
			t.Errorf("sensitive %v: got %+v, want 2 keys and 3 refused for their network", sensitive, got)
		}
		checkEntries(t, s)
	}
}
