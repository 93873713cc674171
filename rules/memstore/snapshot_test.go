package memstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// snapOps is one op per algorithm and budget kind, on key n: the mix a
// node's store holds (every algorithm; sensitive and ordinary rules, each
// in its own small budget, some full).
func snapOps(n int) []rules.Op {
	period := time.Hour.Microseconds()
	mk := func(r byte, alg rules.Algorithm, limit int64, maxKeys int32, sensitive bool) rules.Op {
		op := rules.Op{
			Kind: rules.OpTake, Algorithm: alg, Key: rules.Key{'r', r, 's', 'n', 'p', 0, 0, 0, 'k', byte(n), byte(n >> 8)},
			Limit: limit, Burst: limit, PeriodUS: period, Cost: 1, Enforce: true, MaxKeys: maxKeys, Sensitive: sensitive,
		}
		if sensitive {
			op.OnError = rules.FailClosed
		}
		if alg == rules.Distinct {
			op.Member = uint64(n%7) * 0x9e3779b97f4a7c15
		}
		return op
	}
	return []rules.Op{
		mk('g', rules.GCRA, 3, 40, false),
		mk('t', rules.TokenBucket, 3, 40, false),
		mk('l', rules.LeakyBucket, 3, 40, false),
		mk('f', rules.FixedWindow, 3, 40, false),
		mk('w', rules.SlidingWindow, 3, 40, false),
		mk('s', rules.SlidingLog, 4, 40, false),
		mk('d', rules.Distinct, 3, 40, false),
		mk('S', rules.GCRA, 2, 8, true),  // a sensitive budget that fills
		mk('e', rules.GCRA, 2, 8, false), // an ordinary one that evicts
	}
}

// drive runs a seeded sequence of single-op calls on every store at once,
// from now, a second apart, and fails at the first result that differs.
// With evict false, it leaves out the budget that evicts: which key it
// evicts depends on the store's shards (recency is kept per shard), so
// two stores need not agree on it.
func drive(t *testing.T, seed uint64, now time.Time, calls int, evict bool, stores ...*Store) time.Time {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	for c := range calls {
		ops := snapOps(rng.IntN(24))
		if !evict {
			ops = ops[:len(ops)-1]
		}
		op := ops[rng.IntN(len(ops))]
		var first []rules.Result
		for i, s := range stores {
			got := take(t, s, now, op)
			if i == 0 {
				first = got
			} else if !reflect.DeepEqual(got, first) {
				t.Fatalf("call %d (key %x): store %d got %+v, store 0 got %+v", c, op.Key[:11], i, got, first)
			}
		}
		now = now.Add(time.Second)
	}
	return now
}

func snapshot(t *testing.T, s *Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := s.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// budgetBounds is Budgets without the since-New counters, by rule ID.
func budgetBounds(s *Store) map[[8]byte][2]int64 {
	out := map[[8]byte][2]int64{}
	for _, b := range s.Budgets() {
		if !b.Shared {
			out[b.ID] = [2]int64{b.Keys, b.MaxKeys}
		}
	}
	return out
}

// TestSnapshotRestoreDecidesAsBefore: a store restored from a snapshot
// decides every later call exactly as the store it was taken from, for
// every algorithm and a full sensitive budget (which keeps refusing new
// keys), whatever the shard counts of either; a full ordinary budget comes
// back as full.
func TestSnapshotRestoreDecidesAsBefore(t *testing.T) {
	t.Parallel()
	for _, shards := range [][2]int{{64, 64}, {1, 64}, {64, 1}, {8, 2}} {
		t.Run(fmt.Sprintf("%d to %d shards", shards[0], shards[1]), func(t *testing.T) {
			t.Parallel()
			now := storetest.Base
			clock := &stepClock{now: now}
			a := newStore(t, Options{Shards: shards[0], SweepInterval: -1, Clock: clock})
			now = drive(t, 1, now, 600, true, a)
			clock.now = now

			snap := snapshot(t, a)
			b := newStore(t, Options{Shards: shards[1], SweepInterval: -1, Clock: clock})
			n, err := b.Restore(bytes.NewReader(snap))
			if err != nil {
				t.Fatal(err)
			}
			if n != a.Len() || b.Len() != a.Len() {
				t.Fatalf("restored %d keys, the store holds %d, the original %d", n, b.Len(), a.Len())
			}
			if got, want := budgetBounds(b), budgetBounds(a); !reflect.DeepEqual(got, want) {
				t.Fatalf("budgets (keys, max):\n got %v\nwant %v", got, want)
			}
			full := snapOps(0)[7]
			full.Key[9] = 200 // a key the driver never uses
			if r := take(t, b, now, full)[0]; !r.StoreError {
				t.Fatalf("a new key of the full sensitive budget after the restore: got %+v, want its OnError answer", r)
			}
			// The same continuation on both.
			drive(t, 2, now.Add(time.Second), 600, false, a, b)
		})
	}
}

// stepClock is a clock the test moves.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

func TestRestoreLeavesOutExpiredKeys(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: storetest.Base}
	a := newStore(t, Options{SweepInterval: -1, Clock: clock})
	take(t, a, storetest.Base, gcraOp(1, 1, time.Second), gcraOp(2, 1, time.Hour))
	snap := snapshot(t, a)
	clock.now = storetest.Base.Add(time.Minute) // key 1 has decayed, key 2 not
	b := newStore(t, Options{SweepInterval: -1, Clock: clock})
	if n, err := b.Restore(bytes.NewReader(snap)); err != nil || n != 1 {
		t.Fatalf("got %d keys, %v; want 1 key", n, err)
	}
	if r := take(t, b, clock.now, peekOf(gcraOp(2, 1, time.Hour)))[0]; r.Allowed {
		t.Errorf("key 2 after the restore: got %+v, want refused", r)
	}
}

// TestRestoreRefusesCorruptSnapshots: every single-byte corruption and
// every truncation of a snapshot is refused with ErrBadSnapshot, leaving
// the store empty; nothing panics.
func TestRestoreRefusesCorruptSnapshots(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: storetest.Base}
	a := newStore(t, Options{Shards: 4, SweepInterval: -1, Clock: clock})
	clock.now = drive(t, 3, storetest.Base, 30, true, a)
	snap := snapshot(t, a)
	b := newStore(t, Options{Shards: 4, SweepInterval: -1, Clock: clock})
	check := func(what string, bad []byte) {
		t.Helper()
		n, err := b.Restore(bytes.NewReader(bad))
		if !errors.Is(err, ErrBadSnapshot) || n != 0 || b.Len() != 0 {
			t.Fatalf("%s: got %d keys (store holds %d), %v; want ErrBadSnapshot and nothing restored", what, n, b.Len(), err)
		}
	}
	for i := range snap {
		for _, x := range []byte{0x01, 0xff} {
			bad := bytes.Clone(snap)
			bad[i] ^= x
			check(fmt.Sprintf("byte %d of %d ^ %#x", i, len(snap), x), bad)
		}
	}
	for n := range len(snap) {
		check(fmt.Sprintf("truncated to %d of %d bytes", n, len(snap)), snap[:n])
	}
	check("trailing garbage", append(bytes.Clone(snap), 'E'))
	// And the intact one still restores.
	if _, err := b.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreRefusesAnotherVersionAndHugeRecords(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	v2 := append([]byte(snapshotMagic), snapshotVersion+1)
	if _, err := s.Restore(bytes.NewReader(v2)); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "version") {
		t.Errorf("version %d: got %v", snapshotVersion+1, err)
	}
	// A log claiming more timestamps than any rule keeps is refused before
	// anything is allocated for it.
	huge := append([]byte(snapshotMagic), snapshotVersion)
	huge = append(huge, 'B', 0, 0, 0, 0, 0, 0, 0, 1, 0, 10) // rule 00..01's budget
	huge = append(huge, 'E', 0)
	huge = append(huge, 0, 0, 0, 0, 0, 0, 0, 1) // a key of that rule
	huge = append(huge, make([]byte, 16)...)
	huge = binary.AppendVarint(huge, 1<<60)
	huge = append(huge, 0) // no network
	huge = append(huge, byte(rules.SlidingLog), 0, 0, 0)
	huge = binary.AppendUvarint(huge, 1<<40)
	if _, err := s.Restore(bytes.NewReader(huge)); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "log") {
		t.Errorf("a log of 2^40 timestamps: got %v", err)
	}
	if s.Len() != 0 {
		t.Errorf("the store holds %d keys", s.Len())
	}
}

func TestRestoreRefusesAStoreInUse(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	snap := snapshot(t, s) // an empty store's snapshot is valid
	if n, err := s.Restore(bytes.NewReader(snap)); err != nil || n != 0 {
		t.Fatalf("empty snapshot: got %d, %v", n, err)
	}
	take(t, s, time.Now(), gcraOp(1, 1, time.Hour))
	if _, err := s.Restore(bytes.NewReader(snap)); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("got %v, want ErrNotEmpty", err)
	}
}

// FuzzRestore: Restore never panics and restores nothing from a snapshot
// it refuses.
func FuzzRestore(f *testing.F) {
	clock := &stepClock{now: storetest.Base}
	a, err := New(Options{Shards: 2, SweepInterval: -1, Clock: clock})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 30 {
		for _, op := range snapOps(i) {
			res := make([]rules.Result, 1)
			if err := a.Take(f.Context(), storetest.Base, []rules.Op{op}, res); err != nil {
				f.Fatal(err)
			}
		}
	}
	var b bytes.Buffer
	if _, err := a.Snapshot(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(Options{Shards: 2, SweepInterval: -1, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Restore(bytes.NewReader(data))
		if err != nil && (n != 0 || s.Len() != 0) {
			t.Fatalf("refused (%v) but restored %d keys", err, s.Len())
		}
	})
}

// BenchmarkSnapshotRestore: the part of a binary upgrade's accept gap that
// grows with the store: a snapshot of n GCRA keys (every rule's state
// takes a few bytes more), written to memory and restored into an empty
// store. It reports the snapshot's bytes per key.
func BenchmarkSnapshotRestore(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%d_keys", n), func(b *testing.B) {
			clock := &stepClock{now: storetest.Base}
			a, err := New(Options{SweepInterval: -1, Clock: clock, MaxKeys: n})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			res := make([]rules.Result, 1)
			for i := range n {
				op := gcraOp(0, 5, time.Hour)
				binary.LittleEndian.PutUint64(op.Key[8:], uint64(i))
				op.MaxKeys = int32(n)
				if err := a.Take(b.Context(), storetest.Base, []rules.Op{op}, res); err != nil {
					b.Fatal(err)
				}
			}
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if _, err := a.Snapshot(&buf); err != nil {
					b.Fatal(err)
				}
				s, err := New(Options{SweepInterval: -1, Clock: clock, MaxKeys: n})
				if err != nil {
					b.Fatal(err)
				}
				if k, err := s.Restore(bytes.NewReader(buf.Bytes())); err != nil || k != n {
					b.Fatalf("restored %d of %d: %v", k, n, err)
				}
				s.Close()
			}
			b.ReportMetric(float64(buf.Len())/float64(n), "bytes/key")
		})
	}
}
