package memstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// checkEntries fails t unless every shard of s is consistent between
// calls: no entry flagged as touched (unlock cleared them all), every
// entry of a shard's map in exactly one part's recency list and at its
// place in that part's expiry heap, the part its entry.part names, of the
// budget its key's rule ID says, and every heap ordered.
func checkEntries(t testing.TB, s *Store) {
	t.Helper()
	for x := range s.shards {
		sh := &s.shards[x]
		sh.mu.Lock()
		if len(sh.touched) != 0 {
			t.Errorf("shard %d: %d entries listed as touched between calls, want 0", x, len(sh.touched))
		}
		listed := 0
		for _, p := range append([]*part{sh.shared}, sh.parts...) {
			if p == nil {
				continue
			}
			n := 0
			for e := p.head; e != nil; e = e.next {
				n++
				switch {
				case sh.m[e.key] != e:
					t.Errorf("shard %d: key %x is in a recency list, not in the map", x, e.key[:12])
				case e.touched():
					t.Errorf("shard %d: key %x is flagged as touched between calls", x, e.key[:12])
				case sh.partAt(e) != p:
					t.Errorf("shard %d: key %x names part %d, not the part whose list holds it", x, e.key[:12], e.part)
				case e.idx < 0 || int(e.idx) >= len(p.heap) || p.heap[e.idx] != e:
					t.Errorf("shard %d: key %x is not at its place %d in its part's heap", x, e.key[:12], e.idx)
				case (e.part == 0) != p.b.shared, !p.b.shared && [8]byte(e.key[:8]) != p.b.id:
					t.Errorf("shard %d: key %x is in the part of budget %x (shared %v), entry.part %d", x, e.key[:12], p.b.id, p.b.shared, e.part)
				}
				if n > len(sh.m) {
					t.Fatalf("shard %d: a recency list loops", x)
				}
			}
			if n != len(p.heap) {
				t.Errorf("shard %d: a part lists %d entries and heaps %d", x, n, len(p.heap))
			}
			for i := 1; i < len(p.heap); i++ {
				if p.heap[(i-1)/2].heapAt > p.heap[i].heapAt {
					t.Errorf("shard %d: heap out of order at %d", x, i)
				}
			}
			listed += n
		}
		if listed != len(sh.m) {
			t.Errorf("shard %d: the parts list %d entries, the map holds %d", x, listed, len(sh.m))
		}
		sh.mu.Unlock()
	}
}

// fillParts gives shard 0 of s n empty parts, of rule budgets nothing
// else uses, as n rules' keys gone by would have left them (partOf's
// making of them, without its scan of the parts before each).
func fillParts(s *Store, n int) {
	sh := &s.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for i := range n {
		op := rules.Op{Key: rules.Key{'f', 'i', 'l', 'l'}, MaxKeys: 1}
		binary.BigEndian.PutUint32(op.Key[4:8], uint32(i))
		sh.partIDs = append(sh.partIDs, budgetID{rule: ruleID(&op.Key)})
		sh.parts = append(sh.parts, newPart(s.budgetOf(&op)))
	}
}

// TestPartsPastEightBits: the parts a shard makes after the first 254
// rule budgets are named by their keys' rule ID (partByKey), not by their
// place, and keep every promise of a budget: recency order, a call's own
// keys never evicted, decayed state reclaimed before a sensitive rule's
// new key is refused, sweeping, a snapshot's round trip, and a rule's
// marker budget told apart from its counters' (both named by one rule
// ID).
func TestPartsPastEightBits(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: storetest.Base}
	newFilled := func() *Store {
		s := newStore(t, Options{Shards: 1, SweepInterval: -1, Clock: clock})
		fillParts(s, partByKey-1)
		return s
	}
	s := newFilled()
	now := storetest.Base
	a := func(n int) rules.Op { return ruleOp('A', n, 2, false, 1, time.Hour) }
	sens := func(n int) rules.Op { return ruleOp('S', n, 1, true, 1, time.Second) }
	expect := func(what string, got rules.Result, allowed, storeError bool) {
		t.Helper()
		if got.Allowed != allowed || got.StoreError != storeError {
			t.Errorf("%s: got %+v, want allowed %v, answered by OnError %v", what, got, allowed, storeError)
		}
		checkEntries(t, s)
	}

	expect("A1", take(t, s, now, a(1))[0], true, false)
	expect("A2", take(t, s, now, a(2))[0], true, false)
	expect("A1 again", take(t, s, now, a(1))[0], false, false) // and A1 is now the most recently used
	for _, e := range s.shards[0].m {
		if e.part != partByKey {
			t.Fatalf("key %x: entry.part %d, want partByKey: the test does not reach past 8 bits", e.key[:12], e.part)
		}
	}
	expect("A3", take(t, s, now, a(3))[0], true, false) // evicts A2, the least recently used
	expect("A1 kept", take(t, s, now, peekOf(a(1)))[0], false, false)
	expect("A2 evicted", take(t, s, now, peekOf(a(2)))[0], true, false)
	// Two new keys in one call: each evicts one of the two before, never
	// the other new one.
	res := take(t, s, now, a(4), a(5))
	expect("A4", res[0], true, false)
	expect("A5", res[1], true, false)
	expect("A4 kept", take(t, s, now, peekOf(a(4)))[0], false, false)
	expect("A5 kept", take(t, s, now, peekOf(a(5)))[0], false, false)
	expect("A3 evicted", take(t, s, now, peekOf(a(3)))[0], true, false)
	if b := budgetStats(t, s, 'A'); b.Keys != 2 || b.Evictions != 3 {
		t.Errorf("rule A's budget: got %+v, want 2 keys and 3 evictions", b)
	}

	// The snapshot's round trip, while the store has seen more budgets
	// than 8 bits name (the shared one, the fillers' and A's).
	clock.now = now
	snap := snapshot(t, s)
	r := newFilled()
	if n, err := r.Restore(bytes.NewReader(snap)); err != nil || n != 2 {
		t.Fatalf("restore: got %d keys, %v; want 2", n, err)
	}
	checkEntries(t, r)
	for _, op := range []rules.Op{a(4), a(5)} {
		if got := take(t, r, now, peekOf(op))[0]; got.Allowed {
			t.Errorf("key %x after the restore: got %+v, want refused", op.Key[:12], got)
		}
	}
	for _, e := range r.shards[0].m {
		if e.part != partByKey {
			t.Errorf("restored key %x: entry.part %d, want partByKey", e.key[:12], e.part)
		}
	}

	expect("S1", take(t, s, now, sens(1))[0], true, false)
	expect("S2, budget full", take(t, s, now, sens(2))[0], false, true)
	now = now.Add(2 * time.Second) // S1 has decayed
	expect("S2 after S1 decayed", take(t, s, now, sens(2))[0], true, false)
	if b := budgetStats(t, s, 'S'); b.Keys != 1 || b.Full != 1 {
		t.Errorf("rule S's budget: got %+v, want 1 key and 1 full answer", b)
	}

	// Rule A's marker budget: a part of its own, past 8 bits too, found
	// by the same rule ID as A's counters'.
	ban := markerOp('A', 0, 1, time.Hour)
	expect("A's ban", take(t, s, now, ban)[0], true, false)
	expect("A6", take(t, s, now, a(6))[0], true, false) // evicts A4: never the ban
	expect("A's ban kept", take(t, s, now, peekOf(ban))[0], false, false)
	if m := ruleBudget(t, s, 'A', true); m.Keys != 1 || m.Evictions != 0 {
		t.Errorf("rule A's markers: got %+v, want 1 key", m)
	}

	if n := s.sweep(now.Add(2 * time.Hour).UnixMicro()); n != 4 || s.Len() != 0 { // A5, A6, S2, the ban
		t.Errorf("sweep: dropped %d, %d keys left; want 4 dropped, none left", n, s.Len())
	}
	checkEntries(t, s)
}

// TestRestoreRefusesAKeyOfAnotherRule: a snapshot whose key names the
// budget of a rule other than its own (which Snapshot never writes) is
// refused, though its checksum holds.
func TestRestoreRefusesAKeyOfAnotherRule(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: storetest.Base}
	s := newStore(t, Options{SweepInterval: -1, Clock: clock})
	build := func(keyRule byte) []byte {
		snap := append([]byte(snapshotMagic), snapshotVersion)
		snap = append(snap, 'B', 'r', 'A', 0, 0, 0, 0, 0, 0, 0, 10) // rule rA's budget of 10
		snap = append(snap, 'E', 0, 'r', keyRule)
		snap = append(snap, make([]byte, 22)...)
		snap = binary.AppendVarint(snap, storetest.Base.Add(time.Hour).UnixMicro())
		snap = append(snap, 0)                               // no network
		snap = append(snap, byte(rules.GCRA), 2, 0, 0, 0, 0) // At 1, N 0, Prev 0, no log, no set
		snap = append(snap, 'Z', 1, 1)
		return binary.LittleEndian.AppendUint32(snap, crc32.Checksum(snap, crcTable))
	}
	_, err := s.Restore(bytes.NewReader(build('B')))
	if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "names the budget of rule") || s.Len() != 0 {
		t.Fatalf("a key of rule rB in rule rA's budget: got %v, %d keys; want ErrBadSnapshot, none", err, s.Len())
	}
	if n, err := s.Restore(bytes.NewReader(build('A'))); err != nil || n != 1 {
		t.Fatalf("the same snapshot with a key of rule rA: got %d keys, %v; want 1", n, err)
	}
	checkEntries(t, s)
}

// TestSnapshotWritesTheBudgetsHoldingKeys: a process that has seen more
// rule budgets than Restore reads (rules renamed and removed by reloads
// leave theirs behind, empty) still hands its keys over in a binary
// upgrade, since Snapshot writes only the budgets holding a key. Before,
// it wrote every budget it had seen, and the new process refused the
// whole snapshot: every counter forgotten, lockouts included.
func TestSnapshotWritesTheBudgetsHoldingKeys(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: storetest.Base}
	s := newStore(t, Options{Shards: 1, SweepInterval: -1, Clock: clock})
	fillParts(s, maxSnapshotBudgets+10) // budgets gone by: none holds a key
	now := storetest.Base
	ban := ruleOp('A', 1, 10, true, 1, time.Hour)
	if res := take(t, s, now, ban); !res[0].Allowed {
		t.Fatalf("the key's first take: got %+v, want allowed", res[0])
	}
	if res := take(t, s, now, ban); res[0].Allowed {
		t.Fatalf("the key's second take: got %+v, want refused (limit 1)", res[0])
	}
	if got := len(s.Budgets()); got != maxSnapshotBudgets+12 {
		t.Fatalf("the store has seen %d budgets, want %d: the test does not pass Restore's bound", got, maxSnapshotBudgets+12)
	}

	snap := snapshot(t, s)
	r := newStore(t, Options{Shards: 1, SweepInterval: -1, Clock: clock})
	if n, err := r.Restore(bytes.NewReader(snap)); err != nil || n != 1 {
		t.Fatalf("restore: got %d keys, %v; want 1", n, err)
	}
	if got := take(t, r, now.Add(time.Minute), peekOf(ban))[0]; got.Allowed {
		t.Errorf("the refusing key after the restore: got %+v, want still refused", got)
	}
	if got := len(r.Budgets()); got != 2 {
		t.Errorf("the restored store has %d budgets, want 2 (the shared one and the key's)", got)
	}
	checkEntries(t, r)
}
