package memstore

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

func BenchmarkTake(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) rules.Store {
		s, err := New(Options{SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// BenchmarkTakeNewKeys measures a flood of new keys into a full store:
// every call a key never seen, from parallel callers, each evicting one
// (the shared budget of 10000 keys, ops without MaxKeys, so that the same
// benchmark runs on the store before key budgets). The keys are live (a
// minute's GCRA), so each eviction is of live state.
func BenchmarkTakeNewKeys(b *testing.B) {
	s, err := New(Options{MaxKeys: 10_000, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	floodNewKeys(b, s, rules.Op{}, nil)
}

// floodNewKeys takes a new key on s in every call, from parallel callers:
// a minute's GCRA of 5 with op's budget, each op passed to prepare (when
// not nil) with the call's number first.
func floodNewKeys(b *testing.B, s *Store, op rules.Op, prepare func(op *rules.Op, i uint64)) {
	var next atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		op.Kind, op.Algorithm, op.Limit, op.Burst, op.PeriodUS, op.Cost, op.Enforce = rules.OpTake, rules.GCRA, 5, 5, 60_000_000, 1, true
		ops := []rules.Op{op}
		res := make([]rules.Result, 1)
		for pb.Next() {
			i := next.Add(1)
			ops[0].Key = rules.Key{'n', 'e', 'w', 0, 0, 0, 0, 0, byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24), byte(i >> 32)}
			if prepare != nil {
				prepare(&ops[0], i)
			}
			if err := s.Take(ctx, storetest.Base, ops, res); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTakeNewKeysNetworkShare is BenchmarkTakeNewKeys in a rule's
// budget with network shares (rules.Op.NetworkKeys): "none", the same
// flood without shares, to compare with; "room", new keys from 64 networks
// each under its share (one claim and, as each evicts, one release a
// key); "at_share", every new key from one network that holds its share
// (refused, nothing stored).
func BenchmarkTakeNewKeysNetworkShare(b *testing.B) {
	for _, bb := range []struct {
		name     string
		networks uint64
		share    int32
	}{{"none", 64, 0}, {"room", 64, 10_000}, {"at_share", 1, 500}} {
		b.Run(bb.name, func(b *testing.B) {
			s, err := New(Options{SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			floodNewKeys(b, s, rules.Op{MaxKeys: 10_000, NetworkKeys: bb.share}, func(op *rules.Op, i uint64) {
				op.Network = uint32(1 + i%bb.networks)
			})
		})
	}
}

// BenchmarkTakeBudgeted is BenchmarkTake's gcra and mixed_3ops with the
// ops a policy's rules send: each in its rule's key budget (MaxKeys), the
// first sensitive. Existing keys: the budget costs nothing on this path.
func BenchmarkTakeBudgeted(b *testing.B) {
	const keysPerCaller, callers = 64, 256
	mk := func(rule byte, alg rules.Algorithm, sensitive bool) rules.Op {
		return rules.Op{Kind: rules.OpTake, Algorithm: alg, Key: rules.Key{'r', rule}, Limit: 1_000_000, Burst: 1_000_000,
			PeriodUS: 1_000_000, Cost: 1, Enforce: true, Sensitive: sensitive, OnError: rules.FailClosed, MaxKeys: 1 << 20}
	}
	for _, bb := range []struct {
		name string
		ops  []rules.Op
	}{
		{"gcra", []rules.Op{mk(0, rules.GCRA, true)}},
		{"mixed_3ops", []rules.Op{mk(0, rules.GCRA, true), mk(1, rules.SlidingWindow, false), mk(2, rules.FixedWindow, false)}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			s, err := New(Options{SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			setKeys := func(ops []rules.Op, i int) {
				for j := range ops {
					ops[j].Key[8], ops[j].Key[9] = byte(i>>8), byte(i)
				}
			}
			ops := append([]rules.Op(nil), bb.ops...)
			res := make([]rules.Result, len(ops))
			for i := range keysPerCaller * callers {
				setKeys(ops, i)
				if err := s.Take(ctx, storetest.Base, ops, res); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				first := int(next.Add(1)-1) % callers * keysPerCaller
				ops := append([]rules.Op(nil), bb.ops...)
				res := make([]rules.Result, len(ops))
				now := storetest.Base
				for n := 0; pb.Next(); n++ {
					now = now.Add(10 * time.Microsecond)
					setKeys(ops, first+n%keysPerCaller)
					if err := s.Take(ctx, now, ops, res); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMemoryPerKey reports the heap a tracked key costs, at one
// million keys of one rule's budget, per algorithm: the entry (with its
// place in the recency list and the expiry heap), the map slot and the
// heap slot, and for sliding_log the timestamps (a full log: every key
// took its limit), and a marker's (a ban's or a known visitor's: a
// sliding_log of limit 1 in a marker budget), and a gcra key counted to
// one of a thousand networks (rules.Op.NetworkKeys: its budget's network
// counts, 256 KiB, spread over the million). docs/memory-store.md quotes
// it.
func BenchmarkMemoryPerKey(b *testing.B) {
	const keys = 1_000_000
	type bench struct {
		name   string
		alg    rules.Algorithm
		limit  int64
		marker bool
		shares bool
	}
	benches := []bench{
		{"gcra", rules.GCRA, 5, false, false}, {"token_bucket", rules.TokenBucket, 5, false, false}, {"leaky_bucket", rules.LeakyBucket, 5, false, false},
		{"fixed_window", rules.FixedWindow, 5, false, false}, {"sliding_window", rules.SlidingWindow, 5, false, false},
		{"sliding_log_3", rules.SlidingLog, 3, false, false}, {"sliding_log_5", rules.SlidingLog, 5, false, false}, {"sliding_log_15", rules.SlidingLog, 15, false, false},
		{"marker", rules.SlidingLog, 1, true, false},
		{"gcra_network_shares", rules.GCRA, 5, false, true},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			ctx := context.Background()
			cost := int64(1)
			if bb.alg == rules.SlidingLog {
				cost = bb.limit
			}
			op := []rules.Op{{Kind: rules.OpTake, Algorithm: bb.alg, Limit: bb.limit, Burst: bb.limit, PeriodUS: 60_000_000, Cost: cost, Enforce: true, MaxKeys: keys, Marker: bb.marker}}
			res := make([]rules.Result, 1)
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, err := New(Options{SweepInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				for i := range keys {
					op[0].Key = rules.Key{'m', 'e', 'm', 0, 0, 0, 0, 0, byte(i), byte(i >> 8), byte(i >> 16)}
					if bb.shares {
						op[0].Network, op[0].NetworkKeys = uint32(1+i%1000), keys
					}
					if err := s.Take(ctx, storetest.Base, op, res); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if n := s.Len(); n != keys {
					b.Fatalf("got %d keys, want %d", n, keys)
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "bytes/key")
				runtime.KeepAlive(s)
				s.Close()
			}
		})
	}
}
