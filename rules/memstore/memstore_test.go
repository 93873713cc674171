package memstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	// The tables' clock is Base (2023); a sweeper on the system clock would
	// see every key long expired. Sweeping variants get a clock frozen a
	// day before Base: their sweeps drop nothing the tables still hold and
	// run concurrently with every case, for -race.
	frozen := frozenClock(storetest.Base.Add(-24 * time.Hour))
	tests := []struct {
		name string
		opts Options
	}{
		{"defaults", Options{Clock: frozen}},
		{"sweeping", Options{Clock: frozen, SweepInterval: time.Millisecond}},
		// One shard: every op of a call shares one lock and one LRU.
		{"one_shard", Options{Shards: 1, SweepInterval: -1}},
		{"many_shards", Options{Shards: MaxShards, SweepInterval: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) rules.Store {
				s, err := New(tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

type frozenClock time.Time

func (c frozenClock) Now() time.Time { return time.Time(c) }

func gcraOp(key byte, limit int64, period time.Duration) rules.Op {
	return rules.Op{
		Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{key},
		Limit: limit, Burst: limit, PeriodUS: period.Microseconds(), Cost: 1, Enforce: true,
	}
}

func take(t *testing.T, s *Store, now time.Time, ops ...rules.Op) []rules.Result {
	t.Helper()
	res := make([]rules.Result, len(ops))
	if err := s.Take(context.Background(), now, ops, res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       Options
		wantShards int
		wantKeys   int // the shared budget's bound
		wantErr    bool
	}{
		{"zero value", Options{}, DefaultShards, DefaultMaxKeys, false},
		{"rounded up to a power of two", Options{Shards: 3, MaxKeys: 10}, 4, 10, false},
		{"fewer keys than shards", Options{Shards: 8, MaxKeys: 1}, 8, 1, false},
		{"negative keys", Options{MaxKeys: -1}, 0, 0, true},
		{"too many shards", Options{Shards: MaxShards + 1}, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.SweepInterval = -1
			s, err := New(tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer s.Close()
			if len(s.shards) != tt.wantShards {
				t.Errorf("got %d shards, want %d", len(s.shards), tt.wantShards)
			}
			// Take more keys than the bound, one call each, to read it:
			// the shared budget holds that many across all shards.
			for i := range tt.wantKeys + 5 {
				op := gcraOp(0, 1, time.Hour)
				op.Key[1], op.Key[2], op.Key[3] = byte(i), byte(i>>8), byte(i>>16)
				take(t, s, storetest.Base, op)
			}
			if got := s.Len(); got != tt.wantKeys {
				t.Errorf("got %d keys, want %d", got, tt.wantKeys)
			}
		})
	}
}

func TestEmptyStatesAreNotStored(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	now := storetest.Base
	peek := gcraOp('p', 5, time.Second)
	peek.Kind = rules.OpPeek
	refund := gcraOp('r', 5, time.Second)
	refund.Kind = rules.OpRefund
	reset := gcraOp('x', 5, time.Second)
	reset.Kind = rules.OpReset
	refused := gcraOp('b', 5, time.Second)
	refused.Cost = 6 // more than the burst: refused, consumes nothing
	take(t, s, now, peek, refund, reset, refused)
	if n := s.Len(); n != 0 {
		t.Fatalf("got %d keys after ops that leave empty states, want 0", n)
	}
	// A take stores the key; refunding it back to empty drops it.
	take(t, s, now, gcraOp('k', 5, time.Second))
	if n := s.Len(); n != 1 {
		t.Fatalf("got %d keys, want 1", n)
	}
	refund.Key = rules.Key{'k'}
	take(t, s, now, refund)
	if n := s.Len(); n != 0 {
		t.Fatalf("got %d keys after refunding to empty, want 0", n)
	}
}

func TestExpiredEntryIsReusedFresh(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	op := gcraOp('a', 5, time.Second)
	op.Algorithm, op.Cost = rules.SlidingLog, 5
	now := storetest.Base
	take(t, s, now, op)
	e := s.shards[s.shardOf(&op.Key)].m[op.Key]
	arr := &e.arr.log[:1][0]
	// Long after expiry, without a sweep: the same entry, read as fresh,
	// its log's array reused.
	res := take(t, s, now.Add(time.Hour), op)
	if !res[0].Allowed {
		t.Fatalf("got %+v, want allowed: an expired key is fresh", res[0])
	}
	e2 := s.shards[s.shardOf(&op.Key)].m[op.Key]
	if e2 != e || &e2.arr.log[:1][0] != arr {
		t.Error("expired entry not reused in place")
	}
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 1, MaxKeys: 3, SweepInterval: -1})
	now := storetest.Base
	for _, k := range []byte("abc") {
		take(t, s, now, gcraOp(k, 1, time.Hour))
	}
	take(t, s, now, gcraOp('a', 1, time.Hour)) // refused, but touches a
	take(t, s, now, gcraOp('d', 1, time.Hour)) // evicts b
	if n := s.Len(); n != 3 {
		t.Fatalf("got %d keys, want 3", n)
	}
	for k, want := range map[byte]bool{'a': false, 'b': true, 'c': false, 'd': false} {
		peek := gcraOp(k, 1, time.Hour)
		peek.Kind = rules.OpPeek // stores nothing for b, so evicts nothing
		if res := take(t, s, now, peek); res[0].Allowed != want {
			t.Errorf("key %c: got allowed=%v, want %v (b was least recently used)", k, res[0].Allowed, want)
		}
	}
}

// TestSweeper runs the background sweeper on synctest's fake clock: the
// sleeps below advance that clock instantly once every goroutine of the
// bubble is blocked, so the test waits for nothing real.
func TestSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{SweepInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now() // the bubble's fake clock, also the sweeper's
		take(t, s, now, gcraOp('s', 5, time.Second), gcraOp('l', 1, time.Hour))
		if n := s.Len(); n != 2 {
			t.Fatalf("got %d keys, want 2", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait() // the sweep at 1m has finished
		if n := s.Len(); n != 1 {
			t.Fatalf("after one sweep: got %d keys, want 1 (the 1h key)", n)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := s.Len(); n != 0 {
			t.Fatalf("after an hour: got %d keys, want 0", n)
		}
		// Close stops the sweeper: synctest.Test fails if it still runs.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestSweepUsesClock(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	now := storetest.Base
	for i := range 1000 {
		op := gcraOp(0, 5, time.Second)
		op.Key[1], op.Key[2] = byte(i), byte(i>>8)
		if i%2 == 0 {
			op.PeriodUS = time.Hour.Microseconds()
		}
		take(t, s, now, op)
	}
	// One take of 5 per second decays in 200ms; of 5 per hour, in 12m.
	if got := s.sweep(now.Add(200*time.Millisecond).UnixMicro() - 1); got != 0 {
		t.Errorf("sweep before any expiry dropped %d", got)
	}
	if got := s.sweep(now.Add(200 * time.Millisecond).UnixMicro()); got != 500 {
		t.Errorf("sweep dropped %d, want the 500 one-second keys", got)
	}
	if n := s.Len(); n != 500 {
		t.Errorf("got %d keys, want 500", n)
	}
}

// TestNoDeadlock crosses calls that lock the same shards in opposite op
// order, many at once; under -race it also checks the locking.
func TestNoDeadlock(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{Shards: 4, SweepInterval: -1})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			ops := make([]rules.Op, 4)
			res := make([]rules.Result, 4)
			now := storetest.Base
			for i := range 2000 {
				for j := range ops {
					k := byte((g + i + j*5) % 23)
					if g%2 == 1 {
						k = byte((g + i - j*5 + 230) % 23)
					}
					ops[j] = gcraOp(k, 100, time.Second)
				}
				if ops[0].Key == ops[1].Key || ops[1].Key == ops[2].Key || ops[0].Key == ops[2].Key ||
					ops[0].Key == ops[3].Key || ops[1].Key == ops[3].Key || ops[2].Key == ops[3].Key {
					continue
				}
				now = now.Add(time.Millisecond)
				if err := s.Take(context.Background(), now, ops, res); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestManyOpsPastTheStackCache(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{SweepInterval: -1})
	ops := make([]rules.Op, cachedOps+8)
	for i := range ops {
		ops[i] = gcraOp(byte(i), 2, time.Second)
	}
	ops[len(ops)-1].Cost = 2
	for round, want := range []bool{true, false} {
		res := take(t, s, storetest.Base, ops...)
		for i, r := range res {
			if i < len(ops)-1 && r.Allowed != true {
				t.Errorf("round %d op %d: got %+v, want allowed", round, i, r)
			}
		}
		if res[len(ops)-1].Allowed != want {
			t.Errorf("round %d last op: got %+v, want allowed=%v", round, res[len(ops)-1], want)
		}
	}
	// The second round was refused by the last op: nothing else consumed.
	for i := range ops[:len(ops)-1] {
		ops[i].Kind = rules.OpPeek
	}
	for i, r := range take(t, s, storetest.Base, ops[:len(ops)-1]...) {
		if r.Remaining != 1 {
			t.Errorf("op %d: got %d left, want 1", i, r.Remaining)
		}
	}
}

// TestOneCallKeepsEveryWrite is issue 9's write loss: a call whose ops
// fall in one shard holding fewer entries than the call has ops must keep
// every op's write (a call never evicts a key it touches), however the
// call mixes new and existing keys.
func TestOneCallKeepsEveryWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		maxKeys  int
		existing string // keys taken, one call each, before the call
		call     string // the call's keys, in op order
	}{
		{"two new keys, room for one", 1, "", "ab"},
		{"new key after an existing one", 1, "a", "ab"},
		{"new key before an existing one", 1, "a", "ba"},
		{"three new keys, room for two", 2, "", "abc"},
		{"two new keys, two existing, room for two", 2, "ab", "cadb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, Options{Shards: 1, MaxKeys: tt.maxKeys, SweepInterval: -1})
			now := storetest.Base
			// Two takes per hour each: the existing keys have one left,
			// the new ones two.
			op := func(k byte) rules.Op { return gcraOp(k, 2, time.Hour) }
			for _, k := range []byte(tt.existing) {
				take(t, s, now, op(k))
			}
			var ops []rules.Op
			for _, k := range []byte(tt.call) {
				ops = append(ops, op(k))
			}
			for i, r := range take(t, s, now, ops...) {
				if !r.Allowed {
					t.Fatalf("op %d (%c): got %+v, want allowed", i, tt.call[i], r)
				}
			}
			// Each key of the call, alone: exactly what the call left.
			for _, k := range []byte(tt.call) {
				peek := op(k)
				peek.Kind = rules.OpPeek
				want := int64(1)
				if strings.IndexByte(tt.existing, k) >= 0 {
					want = 0
				}
				r := take(t, s, now, peek)[0]
				if got := r.Remaining; got != want || r.Allowed != (want > 0) {
					t.Errorf("key %c after the call: got %+v, want %d left (the call's write kept)", k, r, want)
				}
			}
		})
	}
}

// TestEntryFitsItsSizeClass holds an entry within the 96-byte size class
// that docs/memory-store.md's bytes per key rest on: a field added beyond it
// puts every key in the 112-byte class or above (a pointer-word platform's
// figure; 32-bit platforms are smaller).
func TestEntryFitsItsSizeClass(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the figure is for 64-bit platforms")
	}
	if got := unsafe.Sizeof(entry{}); got > 96 {
		t.Fatalf("an entry is %d bytes, over the 96-byte size class docs/memory-store.md counts", got)
	}
}
