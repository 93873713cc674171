package memstore

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// The package doc's "Markers": a rule's bans, known visitors and
// exemptions in a budget of their own, never evicted while they last.

// markerOp is the add of marker n of rule r (a ban's or a known
// visitor's: a sliding_log of limit 1 present for period), in r's marker
// budget of maxKeys; its peek (peekOf) is the marker's check.
func markerOp(r byte, n int, maxKeys int32, period time.Duration) rules.Op {
	return rules.Op{
		Kind: rules.OpAdd, Algorithm: rules.SlidingLog, Key: rules.Key{'r', r, 'u', 'l', 'e', 0, 0, 0, 'm', byte(n), byte(n >> 8)},
		Limit: 1, PeriodUS: period.Microseconds(), Cost: 1, Enforce: true, OnError: rules.FailOpen,
		MaxKeys: maxKeys, Marker: true,
	}
}

// present reports whether marker op is present: its peek is refused.
func present(t *testing.T, s *Store, now time.Time, op rules.Op) bool {
	t.Helper()
	return !take(t, s, now, peekOf(op))[0].Allowed
}

// TestMarkersOutliveAFlood: an ordinary rule's flood of new keys, many
// times its budget, evicts its counters but neither its markers nor the
// room they hold; a sensitive rule's markers likewise.
func TestMarkersOutliveAFlood(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 8} {
		for _, sensitive := range []bool{false, true} {
			s := newStore(t, Options{Shards: shards, SweepInterval: -1})
			now := storetest.Base
			ban := markerOp('o', 0, 3, 10*time.Minute)
			ban.Sensitive = sensitive // a ban's op is; a known visitor's is not
			take(t, s, now, ruleOp('o', 0, 3, sensitive, 1, time.Hour))
			if r := take(t, s, now, ban)[0]; !r.Allowed || r.StoreError {
				t.Fatalf("the ban's write: got %+v, want stored", r)
			}
			for n := 1; n <= 100; n++ {
				take(t, s, now.Add(time.Second), ruleOp('o', n, 3, false, 1, time.Hour))
			}
			if !present(t, s, now.Add(9*time.Minute), ban) {
				t.Errorf("%d shards, sensitive %v: the ban after 100 new keys in a budget of 3: gone, want present", shards, sensitive)
			}
			c, m := budgetStats(t, s, 'o'), ruleBudget(t, s, 'o', true)
			if c.Keys != 3 || c.Evictions != 98 || m.Keys != 1 || m.MaxKeys != 3 || m.Evictions != 0 {
				t.Errorf("%d shards, sensitive %v: counters %+v, markers %+v; want 3 counters after 98 evictions, 1 marker of 3", shards, sensitive, c, m)
			}
			if present(t, s, now.Add(10*time.Minute), ban) {
				t.Errorf("%d shards, sensitive %v: the ban at its end: present, want gone", shards, sensitive)
			}
			checkEntries(t, s)
		}
	}
}

// TestMarkerBudgetNeverEvicts: a marker budget full of live markers takes
// no new one (answered by its OnError, not stored, counted as Full) and
// keeps those it holds; its markers never take a counter's room; once a
// marker decays, its room goes to the next.
func TestMarkerBudgetNeverEvicts(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 4, SweepInterval: -1})
	now := storetest.Base
	for n := range 2 {
		take(t, s, now, ruleOp('k', n, 2, true, 1, time.Hour)) // the rule's counters, full
	}
	long := func(n int) rules.Op { return markerOp('k', n, 2, time.Hour) }
	take(t, s, now, long(0))
	take(t, s, now, markerOp('k', 1, 2, time.Minute)) // decays first
	for n := 2; n < 5; n++ {
		if r := take(t, s, now, long(n))[0]; r != (rules.Result{Allowed: true, StoreError: true}) {
			t.Errorf("marker %d in a full marker budget: got %+v, want FailOpen's answer, not stored", n, r)
		}
		if present(t, s, now, long(n)) {
			t.Errorf("marker %d: present, want not stored", n)
		}
	}
	if !present(t, s, now, long(0)) || !present(t, s, now, markerOp('k', 1, 2, time.Minute)) {
		t.Error("the markers held: gone, want kept")
	}
	if c, m := budgetStats(t, s, 'k'), ruleBudget(t, s, 'k', true); c.Keys != 2 || c.Evictions != 0 || m.Keys != 2 || m.Full != 3 || m.Evictions != 0 {
		t.Errorf("counters %+v, markers %+v; want 2 counters, 2 markers and 3 refused", c, m)
	}
	for n := range 2 {
		if r := take(t, s, now, ruleOp('k', n, 2, true, 1, time.Hour))[0]; r.Allowed || r.StoreError {
			t.Errorf("counter %d: got %+v, want refused by its own state (kept)", n, r)
		}
	}
	later := now.Add(2 * time.Minute) // marker 1 has decayed
	if r := take(t, s, later, long(2))[0]; !r.Allowed || r.StoreError {
		t.Errorf("a new marker once one has decayed: got %+v, want stored", r)
	}
	if !present(t, s, later, long(2)) || !present(t, s, later, long(0)) {
		t.Error("after the decay: want markers 0 and 2 present")
	}
	checkEntries(t, s)
}

// restoredAfter returns a store (2 shards) restored from the snapshot of
// one whose only call was ops at now, on a clock at now.
func restoredAfter(t *testing.T, now time.Time, ops ...rules.Op) *Store {
	t.Helper()
	clock := &stepClock{now: now}
	a := newStore(t, Options{SweepInterval: -1, Clock: clock})
	take(t, a, now, ops...)
	b := newStore(t, Options{Shards: 2, SweepInterval: -1, Clock: clock})
	if n, err := b.Restore(bytes.NewReader(snapshot(t, a))); err != nil || n != a.Len() {
		t.Fatalf("restore: got %d keys, %v; want %d", n, err, a.Len())
	}
	return b
}

// TestMarkersSurviveASnapshot: a snapshot carries the marker budgets, so
// that the restored store's markers are still never evicted.
func TestMarkersSurviveASnapshot(t *testing.T) {
	t.Parallel()
	now := storetest.Base
	ban := markerOp('o', 0, 3, 10*time.Minute)
	b := restoredAfter(t, now, ruleOp('o', 0, 3, false, 1, time.Hour), ban)
	if m := ruleBudget(t, b, 'o', true); m.Keys != 1 || m.MaxKeys != 3 {
		t.Errorf("the restored marker budget: got %+v, want 1 key of 3", m)
	}
	for n := 1; n <= 20; n++ {
		take(t, b, now, ruleOp('o', n, 3, false, 1, time.Hour))
	}
	if !present(t, b, now, ban) {
		t.Error("the restored ban after a flood: gone, want present")
	}
	checkEntries(t, b)
}

// TestVersion1MarkersMoveToTheirBudget: a version 1 snapshot (a build
// before marker budgets) has its markers among their rules' counters; the
// first op of a marker moves it to its rule's marker budget, where a
// flood no longer evicts it. One that no op read meanwhile is still a
// counter: a flood can evict it, as before the upgrade.
func TestVersion1MarkersMoveToTheirBudget(t *testing.T) {
	t.Parallel()
	now := storetest.Base
	ban := func(n int) rules.Op { return markerOp('o', n, 3, 10*time.Minute) }
	snap := append([]byte(snapshotMagic), snapshotV1)
	snap = append(snap, 'B', 'r', 'o', 'u', 'l', 'e', 0, 0, 0, kindRule, 3)
	for n := range 2 {
		k := ban(n).Key
		snap = append(snap, 'E', 0)
		snap = append(snap, k[:]...)
		snap = binary.AppendVarint(snap, now.Add(10*time.Minute).UnixMicro())
		snap = append(snap, byte(rules.SlidingLog), 0, 0, 0, 1) // At, N, Prev 0; a log of one
		snap = binary.AppendVarint(snap, now.UnixMicro())
		snap = append(snap, 0) // no distinct set
	}
	snap = append(snap, 'Z', 1, 2)
	snap = binary.LittleEndian.AppendUint32(snap, crc32.Checksum(snap, crcTable))

	clock := &stepClock{now: now}
	s := newStore(t, Options{Shards: 1, SweepInterval: -1, Clock: clock})
	if n, err := s.Restore(bytes.NewReader(snap)); err != nil || n != 2 {
		t.Fatalf("restore: got %d keys, %v; want 2", n, err)
	}
	if c := budgetStats(t, s, 'o'); c.Keys != 2 {
		t.Fatalf("the rule's counters after the restore: got %+v, want the 2 markers among them", c)
	}
	if !present(t, s, now, ban(0)) { // moves it
		t.Fatal("ban 0 after the restore: gone, want present")
	}
	if c, m := budgetStats(t, s, 'o'), ruleBudget(t, s, 'o', true); c.Keys != 1 || m.Keys != 1 {
		t.Errorf("after ban 0's check: counters %+v, markers %+v; want one each", c, m)
	}
	checkEntries(t, s)
	for n := 1; n <= 10; n++ {
		take(t, s, now, ruleOp('o', n, 3, false, 1, time.Hour))
	}
	if !present(t, s, now, ban(0)) {
		t.Error("ban 0, moved, after a flood: gone, want present")
	}
	if present(t, s, now, ban(1)) {
		t.Error("ban 1, still among the counters, after a flood: present, want evicted as before the upgrade")
	}
	checkEntries(t, s)
}
