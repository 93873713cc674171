package memstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// The key budgets of the package doc: per rule, decayed state first, a
// sensitive rule never evicting live state.

// ruleOp is a GCRA take of limit per period on key n of rule r, in r's
// budget of maxKeys.
func ruleOp(r byte, n int, maxKeys int32, sensitive bool, limit int64, period time.Duration) rules.Op {
	op := gcraOp(0, limit, period)
	op.Key = rules.Key{'r', r, 'u', 'l', 'e', 0, 0, 0, 'k', byte(n), byte(n >> 8), byte(n >> 16)}
	op.MaxKeys, op.Sensitive = maxKeys, sensitive
	if sensitive {
		op.OnError = rules.FailClosed
	}
	return op
}

func peekOf(op rules.Op) rules.Op {
	op.Kind = rules.OpPeek
	return op
}

// budgetStats returns the counters of rule r's budget.
func budgetStats(t *testing.T, s *Store, r byte) Budget {
	t.Helper()
	return ruleBudget(t, s, r, false)
}

// ruleBudget returns the counters of rule r's budget, or of its marker
// budget.
func ruleBudget(t *testing.T, s *Store, r byte, markers bool) Budget {
	t.Helper()
	id := [8]byte{'r', r, 'u', 'l', 'e'}
	for _, b := range s.Budgets() {
		if !b.Shared && b.ID == id && b.Markers == markers {
			return b
		}
	}
	t.Fatalf("no budget for rule %c (markers %v)", r, markers)
	return Budget{}
}

func TestBudgetsIsolateRules(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			t.Parallel()
			// A store whose shared bound is tiny: budgets are per rule.
			s := newStore(t, Options{Shards: shards, MaxKeys: 1, SweepInterval: -1})
			now := storetest.Base
			// Rule v: ten keys, each with its one take an hour spent.
			for n := range 10 {
				take(t, s, now, ruleOp('v', n, 10, false, 1, time.Hour))
			}
			// Rule f floods a thousand new keys into its budget of ten.
			for n := range 1000 {
				take(t, s, now, ruleOp('f', n, 10, false, 1, time.Hour))
			}
			for n := range 10 {
				if r := take(t, s, now, peekOf(ruleOp('v', n, 10, false, 1, time.Hour)))[0]; r.Allowed {
					t.Errorf("rule v key %d after rule f's flood: got %+v, want refused (its state kept)", n, r)
				}
			}
			v, f := budgetStats(t, s, 'v'), budgetStats(t, s, 'f')
			if v.Keys != 10 || v.Evictions != 0 {
				t.Errorf("rule v: got %+v, want 10 keys and no eviction", v)
			}
			if f.Keys != 10 || f.MaxKeys != 10 || f.Evictions != 990 {
				t.Errorf("rule f: got %+v, want 10 keys of 10 and 990 evictions", f)
			}
			if n := s.Len(); n != 20 {
				t.Errorf("got %d keys, want 20", n)
			}
		})
	}
}

func TestSensitiveBudgetNeverEvictsLiveState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		onError rules.StoreErrorMode
		want    rules.Result // a new key's answer once the budget is full
	}{
		{"deny", rules.FailClosed, rules.Result{StoreError: true}},
		{"allow", rules.FailOpen, rules.Result{Allowed: true, StoreError: true}},
		{"local", rules.FailLocal, rules.Result{StoreError: true}}, // the memory store is the local one
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, Options{Shards: 4, SweepInterval: -1})
			now := storetest.Base
			op := func(n int) rules.Op {
				o := ruleOp('s', n, 5, true, 1, time.Hour)
				o.OnError = tt.onError
				return o
			}
			for n := range 5 {
				if r := take(t, s, now, op(n))[0]; !r.Allowed || r.StoreError {
					t.Fatalf("key %d: got %+v, want allowed by the store", n, r)
				}
			}
			for n := 5; n < 8; n++ {
				if r := take(t, s, now, op(n))[0]; r != tt.want {
					t.Errorf("new key %d in a full budget: got %+v, want %+v", n, r, tt.want)
				}
				// A peek stores nothing: decided as the missing key it is.
				if r := take(t, s, now, peekOf(op(n)))[0]; !r.Allowed || r.StoreError {
					t.Errorf("peek of new key %d: got %+v, want allowed by the store", n, r)
				}
			}
			for n := range 5 {
				if r := take(t, s, now, op(n))[0]; r.Allowed || r.StoreError {
					t.Errorf("key %d: got %+v, want refused by its own state (kept)", n, r)
				}
			}
			if b := budgetStats(t, s, 's'); b.Keys != 5 || b.Full != 3 || b.Evictions != 0 {
				t.Errorf("got %+v, want 5 keys, 3 full answers, no eviction", b)
			}
			// Once the first key's state has decayed (an hour), its room
			// goes to a new key, with no sweeper: decayed state costs
			// nothing to forget.
			later := now.Add(time.Hour)
			if r := take(t, s, later, op(9))[0]; !r.Allowed || r.StoreError {
				t.Errorf("new key after the budget's state decayed: got %+v, want allowed by the store", r)
			}
		})
	}
}

// TestDecayedStateGoesFirst: a full non-sensitive budget forgets decayed
// state before it evicts the least recently used live key.
func TestDecayedStateGoesFirst(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 1, SweepInterval: -1})
	now := storetest.Base
	long := func(n int) rules.Op { return ruleOp('d', n, 3, false, 1, time.Hour) }
	short := func(n int) rules.Op { return ruleOp('d', n, 3, false, 1, time.Second) }
	take(t, s, now, long(0))  // least recently used, live for an hour
	take(t, s, now, short(1)) // decays in a second
	take(t, s, now, long(2))
	take(t, s, now.Add(2*time.Second), long(3)) // evicts key 1, decayed
	for n, want := range []bool{false, true, false, false} {
		if r := take(t, s, now.Add(2*time.Second), peekOf(long(n)))[0]; r.Allowed != want {
			t.Errorf("key %d: got %+v, want allowed=%v", n, r, want)
		}
	}
	if b := budgetStats(t, s, 'd'); b.Evictions != 0 || b.Keys != 3 {
		t.Errorf("got %+v, want 3 keys and no live eviction", b)
	}
	take(t, s, now.Add(2*time.Second), long(4)) // full of live state: evicts key 0, the LRU
	if r := take(t, s, now.Add(2*time.Second), peekOf(long(0)))[0]; !r.Allowed {
		t.Errorf("key 0: got %+v, want evicted (fresh)", r)
	}
	if b := budgetStats(t, s, 'd'); b.Evictions != 1 {
		t.Errorf("got %+v, want one live eviction", b)
	}
}

// TestReclaimAcrossShards: a new key finds decayed state of its budget in
// any shard, not only its own (small budgets are spread thin), including
// after a search that found none set the budget's hint and a refund then
// made a key decay before it.
func TestReclaimAcrossShards(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 64, SweepInterval: -1})
	now := storetest.Base
	at := func(d time.Duration) time.Time { return now.Add(d) }
	// Key n < 4 takes n+3 units of 10 per 10s: it decays in n+3 seconds.
	// The new keys take 9: they decay after the test.
	op := func(n int) rules.Op {
		o := ruleOp('x', n, 4, true, 10, 10*time.Second)
		o.Cost = 9
		return o
	}
	used := map[uint16]bool{}
	for n := range 4 {
		o := op(n)
		o.Cost = int64(n + 3)
		take(t, s, now, o)
		used[s.shardOf(&o.Key)] = true
	}
	// New keys in shards none of the four is in.
	var fresh []int
	for n := 100; len(fresh) < 4; n++ {
		if o := op(n); !used[s.shardOf(&o.Key)] {
			fresh = append(fresh, n)
		}
	}
	steps := []struct {
		at   time.Duration
		key  int
		room bool
	}{
		{time.Second, fresh[0], false}, // nothing decays before 3s: the search says so
		{1500 * time.Millisecond, fresh[0], false},
		// (at 1.5s, key 3 is refunded to decay at 2s, before the hint)
		{2 * time.Second, fresh[0], true}, // key 3 decayed
		{2500 * time.Millisecond, fresh[1], false},
		{3 * time.Second, fresh[1], true}, // key 0 decayed
		{3 * time.Second, fresh[2], false},
	}
	for i, st := range steps {
		if st.at == 2*time.Second {
			refund := op(3)
			refund.Kind, refund.Cost = rules.OpRefund, 4 // 6s − 4s
			take(t, s, at(1500*time.Millisecond), refund)
		}
		r := take(t, s, at(st.at), op(st.key))[0]
		if r.StoreError == st.room {
			t.Fatalf("step %d at %v: got %+v, want room=%v", i, st.at, r, st.room)
		}
	}
	if b := budgetStats(t, s, 'x'); b.Keys != 4 || b.Full != 4 {
		t.Errorf("got %+v, want 4 keys and 4 full answers", b)
	}
}

// TestSensitiveReservationIsAllOrNothing: two new keys of one sensitive
// budget in one call with room for one: the second is answered by its
// OnError (deny: refused), so the request is refused and the first, which
// had room, stores nothing and gives its room back.
func TestSensitiveReservationIsAllOrNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 1, SweepInterval: -1})
	now := storetest.Base
	take(t, s, now, ruleOp('a', 0, 2, true, 5, time.Hour))
	res := take(t, s, now, ruleOp('a', 1, 2, true, 5, time.Hour), ruleOp('a', 2, 2, true, 5, time.Hour))
	if !res[0].Allowed || res[0].StoreError || res[1].Allowed || !res[1].StoreError {
		t.Fatalf("got %+v, want the first allowed by the store and the second a full answer", res)
	}
	if b := budgetStats(t, s, 'a'); b.Keys != 1 || b.Full != 1 {
		t.Errorf("got %+v, want 1 key (the refused call stored nothing) and 1 full answer", b)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("got %d keys, want 1", n)
	}
}

// TestBudgetFollowsTheNewestMaxKeys: a reload that lowers a rule's
// max_keys applies from its next new key; a non-sensitive budget above it
// evicts two keys per new one until it is back within it.
func TestBudgetFollowsTheNewestMaxKeys(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 1, SweepInterval: -1})
	now := storetest.Base
	for n := range 10 {
		take(t, s, now, ruleOp('m', n, 10, false, 1, time.Hour))
	}
	for n, want := range []int64{9, 8, 7, 6, 5, 5} {
		take(t, s, now, ruleOp('m', 100+n, 5, false, 1, time.Hour))
		if b := budgetStats(t, s, 'm'); b.Keys != want || b.MaxKeys != 5 {
			t.Errorf("new key %d at max_keys 5: got %+v, want %d keys", n, b, want)
		}
	}
}

// TestConcurrentBudgetsKeepLiveSensitiveState runs many callers at once,
// each with keys of its own in one full sensitive budget and a flood of
// new keys into a small ordinary one in the same calls, across shards, in
// phases: within a phase every call has the same now, and each phase is
// later than the last (a caller's own check must not race a call whose
// clock is ahead of it). Every sensitive key a caller stored must still be
// held (refusing) for as long as its state is live, whatever the others'
// evictions, reclaims and searches; no budget runs over its bound by more
// than the callers at work. Under -race it also checks the cross-shard
// locking.
func TestConcurrentBudgetsKeepLiveSensitiveState(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 8, SweepInterval: -1})
	const (
		callers, ownKeys = 8, 12
		phases, perPhase = 300, 6
		period           = 20 // µs: a key lives 20µs (phases) after its take
	)
	sensitive := func(g, k int) rules.Op {
		op := ruleOp('s', g*100+k, 40, true, 1, period*time.Microsecond)
		op.Algorithm = rules.SlidingLog // expires exactly period after its take
		return op
	}
	expires := make([][]int64, callers) // µs; 0: not stored
	for g := range expires {
		expires[g] = make([]int64, ownKeys)
	}
	ctx := context.Background()
	base := storetest.Base.UnixMicro()
	var flood atomic.Int64
	for ph := range phases {
		now := base + int64(ph)
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				res := make([]rules.Result, 2)
				for i := range perPhase {
					k := (ph*perPhase + i) % ownKeys
					ops := []rules.Op{sensitive(g, k), ruleOp('o', int(flood.Add(1)), 16, false, 1, time.Hour)}
					if err := s.Take(ctx, time.UnixMicro(now), ops, res); err != nil {
						t.Error(err)
						return
					}
					if res[0].Allowed && !res[0].StoreError {
						expires[g][k] = now + period
					}
					// Every own key still live must be held: a peek refuses.
					for j, exp := range expires[g] {
						if exp <= now {
							continue
						}
						if err := s.Take(ctx, time.UnixMicro(now), []rules.Op{peekOf(sensitive(g, j))}, res[:1]); err != nil {
							t.Error(err)
							return
						}
						if res[0].Allowed {
							t.Errorf("phase %d: caller %d key %d, live for %dµs more: evicted (a peek allowed it)", ph, g, j, exp-now)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	for _, b := range s.Budgets() {
		if !b.Shared && b.Keys > b.MaxKeys+callers {
			t.Errorf("budget %q: %d keys, bound %d", b.ID[:2], b.Keys, b.MaxKeys)
		}
	}
	if o := budgetStats(t, s, 'o'); o.Evictions == 0 {
		t.Errorf("the ordinary budget: got %+v, want evictions", o)
	}
	if st := budgetStats(t, s, 's'); st.Full == 0 || st.Evictions != 0 {
		t.Errorf("the sensitive budget: got %+v, want full answers and no eviction", st)
	}
}
