//go:build !race

package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestTakeAllocs guards the hot path: a Take on keys that exist allocates
// nothing, whatever the algorithm, the decision or the number of ops
// (distinct's sets included, once grown to their limit).
func TestTakeAllocs(t *testing.T) {
	s, err := New(Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mk := func(key byte, alg rules.Algorithm, limit, periodUS int64) rules.Op {
		return rules.Op{Kind: rules.OpTake, Algorithm: alg, Key: rules.Key{key}, Limit: limit, Burst: limit, PeriodUS: periodUS, Cost: 1, Enforce: true}
	}
	type test struct {
		name    string
		ops     []rules.Op
		allowed bool
	}
	var tests []test
	all := []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket, rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog, rules.Distinct}
	for i, alg := range all {
		// Calls 10µs apart. For sliding_log, 64 per 640µs is its steady
		// state on a busy key: every call trims one timestamp and appends
		// one in place; for distinct, whose every call counts a new value,
		// one member expires and a new one joins.
		allowed := mk(byte(i), alg, 1_000_000, 1_000_000)
		if alg == rules.SlidingLog || alg == rules.Distinct {
			allowed = mk(byte(i), alg, 64, 640)
		}
		tests = append(tests,
			test{alg.String() + "/allowed", []rules.Op{allowed}, true},
			test{alg.String() + "/refused", []rules.Op{mk(byte(16+i), alg, 3, 1_000_000)}, false},
		)
	}
	var many []rules.Op
	for i := range cachedOps + 4 {
		many = append(many, mk(byte(64+i), all[i%len(all)], 1000, 1000))
	}
	tests = append(tests, test{"past_the_stack_cache", many, true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			res := make([]rules.Result, len(tt.ops))
			now := storetest.Base
			take := func() {
				now = now.Add(10 * time.Microsecond)
				for j := range tt.ops {
					tt.ops[j].Member++ // a new value each call (distinct; the others ignore it)
				}
				if err := s.Take(ctx, now, tt.ops, res); err != nil {
					t.Fatal(err)
				}
			}
			for range 4000 { // create the keys, reach the steady state
				take()
			}
			if allocs := testing.AllocsPerRun(1000, take); allocs != 0 {
				t.Errorf("got %v allocs per Take, want 0", allocs)
			}
			for i, r := range res {
				if r.Allowed != tt.allowed {
					t.Errorf("op %d: got %+v, want allowed=%v", i, r, tt.allowed)
				}
			}
		})
	}
}

// TestBudgetAllocs guards the paths a flood of new keys takes once its
// budget is full: a sensitive rule's new keys answered by OnError, and a
// non-sensitive rule's evicting its least recently used key (the evicted
// entry holds the new key), allocate nothing; nor do takes on existing
// keys of rule budgets; nor new keys counted to their network's share
// (shared: three networks, each with room) or refused for it (one network
// at its share).
func TestBudgetAllocs(t *testing.T) {
	tests := []struct {
		name      string
		sensitive bool
		newKeys   bool
		shares    string // "room": three networks, each with room; "full": one at its share
	}{
		{"existing keys, sensitive", true, false, ""},
		{"existing keys", false, false, ""},
		{"new keys, sensitive budget full", true, true, ""},
		{"new keys, budget full, evicting", false, true, ""},
		{"new keys, budget full, evicting, network shares", false, true, "room"},
		{"new keys, network at its share", true, true, "full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Options{Shards: 4, SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ops := []rules.Op{{Kind: rules.OpTake, Algorithm: rules.GCRA, Limit: 1000, Burst: 1000, PeriodUS: 1_000_000_000, Cost: 1,
				Enforce: true, Sensitive: tt.sensitive, OnError: rules.FailClosed, MaxKeys: 256}}
			res := make([]rules.Result, 1)
			ctx := context.Background()
			n := 0
			take := func() {
				n++
				k := n % 256 // the existing keys
				if tt.newKeys {
					k = n
				}
				switch tt.shares {
				case "full":
					ops[0].Network, ops[0].NetworkKeys = 7, 64
				case "room":
					ops[0].Network, ops[0].NetworkKeys = uint32(1+n%3), 256
				}
				ops[0].Key = rules.Key{'a', 'l', 'l', 'o', 'c', 0, 0, 0, byte(k), byte(k >> 8), byte(k >> 16), byte(k >> 24)}
				if err := s.Take(ctx, storetest.Base, ops, res); err != nil {
					t.Fatal(err)
				}
			}
			for range 512 { // fill the budget, grow the maps
				take()
			}
			if allocs := testing.AllocsPerRun(2000, take); allocs != 0 {
				t.Errorf("got %v allocs per Take, want 0", allocs)
			}
			switch want := !tt.sensitive || !tt.newKeys; {
			case tt.shares == "full":
				if !res[0].NetworkFull || res[0].Allowed {
					t.Errorf("last take: got %+v, want refused for its network", res[0])
				}
			case res[0].Allowed != want || res[0].StoreError == want:
				t.Errorf("last take: got %+v, want allowed=%v by the store=%v", res[0], want, want)
			}
		})
	}
}

// TestEmptiedKeyComesBackWithoutAllocating: a concurrency rule's key (a
// Distinct set of leases) empties each time its last lease is refunded and
// is dropped; the shard keeps the dropped entry as a spare, so the key's
// next lease, or another key's in the shard, allocates nothing, and the
// reused arrays carry no member of the old set.
func TestEmptiedKeyComesBackWithoutAllocating(t *testing.T) {
	s, err := New(Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.Distinct, Key: rules.Key{7}, Limit: 10, PeriodUS: 30_000_000, Cost: 1, Enforce: true, Sensitive: true, MaxKeys: 100}
	res := make([]rules.Result, 1)
	now := storetest.Base
	lease := uint64(0)
	cycle := func() {
		now = now.Add(time.Microsecond)
		lease++
		take, refund := op, op
		take.Member, refund.Member, refund.Kind = lease, lease, rules.OpRefund
		if err := s.Take(ctx, now, []rules.Op{take}, res); err != nil || !res[0].Allowed || res[0].Remaining != 9 {
			t.Fatalf("take: %v %+v, want allowed with 9 remaining (one lease in the set)", err, res[0])
		}
		if err := s.Take(ctx, now, []rules.Op{refund}, res); err != nil {
			t.Fatal(err)
		}
		if s.Len() != 0 {
			t.Fatalf("%d keys after the refund, want 0: the emptied key is dropped", s.Len())
		}
	}
	cycle() // the first lease allocates the entry and its set
	if allocs := testing.AllocsPerRun(100, cycle); allocs != 0 {
		t.Errorf("%v allocations per lease taken and given back, want 0", allocs)
	}
}
