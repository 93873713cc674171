package failclosed

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// cachedStore is a Store with the deny cache in front of a counting fake
// backed by a memstore.
func cachedStore(t *testing.T) (*Store, *fakeStore) {
	t.Helper()
	f := &fakeStore{backing: newMemstore(t)}
	return newStore(t, f, Options{NoBackgroundProbe: true, Clock: newFakeClock()}), f
}

// TestDenyCache: a refused key is answered locally until its RetryAfter;
// the inner call count proves it.
func TestDenyCache(t *testing.T) {
	t.Parallel()
	s, f := cachedStore(t)
	o := op(1, rules.FailOpen, 2, time.Second) // one unit every 500ms, burst 2
	other := op(2, rules.FailOpen, 100, time.Second)
	t0 := storetest.Base
	take(t, s, t0, o)
	take(t, s, t0, o)
	res := take(t, s, t0, o, other)
	if res[0].Allowed || res[0].RetryAfter != 500*time.Millisecond || res[1].Remaining != 100 {
		t.Fatalf("third take: got %+v, want refused with RetryAfter 500ms, other untouched", res)
	}
	calls := f.calls.Load()
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 499 * time.Millisecond} {
		res := take(t, s, t0.Add(at), o, other)
		// t is the wait on a refusal (counter.Settle), here as the store left it.
		want := rules.Result{RetryAfter: 500*time.Millisecond - at, ResetAfter: 500*time.Millisecond - at}
		if res[0] != want || !res[1].Allowed || res[1].StoreError {
			t.Errorf("at %v: got %+v, want %+v and the other op allowed", at, res, want)
		}
	}
	if got := f.calls.Load(); got != calls {
		t.Errorf("got %d inner calls while cached, want none", got-calls)
	}
	if st := s.Stats(); st.DenyCacheHits != 3 {
		t.Errorf("got %d deny cache hits, want 3", st.DenyCacheHits)
	}
	// The other key consumed nothing while the cache refused: this is
	// its first unit taken.
	if res := take(t, s, t0.Add(500*time.Millisecond), o, other); !res[0].Allowed || res[1].Remaining != 99 {
		t.Errorf("at 500ms: got %+v, want both allowed by the store", res)
	}
	if got := f.calls.Load(); got != calls+1 {
		t.Errorf("at 500ms: got %d inner calls, want 1", got-calls)
	}
}

// TestDenyCacheBypass: calls that must reach the store do, and dry-run
// refusals are not cached.
func TestDenyCacheBypass(t *testing.T) {
	t.Parallel()
	refuse := func(t *testing.T, s *Store, o rules.Op) {
		t.Helper()
		o.Limit, o.Burst = 1, 1
		take(t, s, storetest.Base, o)
		if res := take(t, s, storetest.Base, o); res[0].Allowed {
			t.Fatalf("got %+v, want refused", res[0])
		}
	}
	key := op(1, rules.FailOpen, 1, time.Minute)
	attempts := op(2, rules.FailOpen, 1, time.Minute)
	attempts.Attempts = true
	dry := op(3, rules.FailOpen, 1, time.Minute)
	dry.Enforce = false
	kindOp := func(kind rules.OpKind) rules.Op { o := op(4, rules.FailOpen, 10, time.Minute); o.Kind = kind; return o }
	tests := []struct {
		name      string
		cache     rules.Op // refused twice first
		call      []rules.Op
		wantCalls int64 // inner calls made by call
	}{
		{"cached", key, []rules.Op{key}, 0},
		{"peek_beside", key, []rules.Op{key, kindOp(rules.OpPeek)}, 0},
		{"attempts_beside", key, []rules.Op{key, attempts}, 1},
		{"attempts_key", attempts, []rules.Op{attempts}, 1},
		{"add_beside", key, []rules.Op{key, kindOp(rules.OpAdd)}, 1},
		{"refund_beside", key, []rules.Op{key, kindOp(rules.OpRefund)}, 1},
		{"reset_beside", key, []rules.Op{key, kindOp(rules.OpReset)}, 1},
		{"dry_run_not_cached", dry, []rules.Op{dry}, 1},
		{"dry_run_looks_nothing_up", key, []rules.Op{func() rules.Op { o := key; o.Enforce = false; return o }()}, 1},
		{"other_cost", key, []rules.Op{func() rules.Op { o := key; o.Cost = 2; return o }()}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, f := cachedStore(t)
			refuse(t, s, tt.cache)
			call := make([]rules.Op, len(tt.call))
			copy(call, tt.call)
			for i := range call {
				if call[i].Key == tt.cache.Key {
					call[i].Limit, call[i].Burst = 1, 1
				}
			}
			calls := f.calls.Load()
			res := take(t, s, storetest.Base, call...)
			if got := f.calls.Load() - calls; got != tt.wantCalls {
				t.Errorf("got %d inner calls, want %d", got, tt.wantCalls)
			}
			if call[0].Enforce && call[0].Cost == 1 && res[0].Allowed {
				t.Errorf("got %+v, want the key refused", res[0])
			}
		})
	}
}

// TestDenyCacheForget: a reset sent through this node drops the key.
func TestDenyCacheForget(t *testing.T) {
	t.Parallel()
	s, f := cachedStore(t)
	o := op(1, rules.FailOpen, 1, time.Minute)
	take(t, s, storetest.Base, o)
	take(t, s, storetest.Base, o) // refused, cached
	reset := o
	reset.Kind = rules.OpReset
	take(t, s, storetest.Base, reset)
	calls := f.calls.Load()
	if res := take(t, s, storetest.Base, o); !res[0].Allowed || f.calls.Load() != calls+1 {
		t.Errorf("after a reset: got %+v and %d inner calls, want allowed by the store", res[0], f.calls.Load()-calls)
	}
}

// TestDenyCacheAnswersWhileOpen: a cached refusal is answered even when the
// store is down, before the breaker is consulted.
func TestDenyCacheAnswersWhileOpen(t *testing.T) {
	t.Parallel()
	s, f := cachedStore(t)
	o := op(1, rules.FailOpen, 1, time.Minute)
	take(t, s, storetest.Base, o)
	take(t, s, storetest.Base, o)
	f.setErr(errDown)
	for range 5 {
		take(t, s, storetest.Base, op(2, rules.FailOpen, 1, time.Minute))
	}
	if s.State() != BreakerOpen {
		t.Fatalf("got %v, want open", s.State())
	}
	if res := take(t, s, storetest.Base, o); res[0].Allowed || res[0].StoreError || res[0].RetryAfter != time.Minute {
		t.Errorf("got %+v, want the cached refusal", res[0])
	}
}

// TestDenyCacheEviction: the cache is bounded; a full set evicts the entry
// that expires first.
func TestDenyCacheEviction(t *testing.T) {
	t.Parallel()
	c := newDenyCache(1) // one set of four ways
	if len(c.sets) != 1 {
		t.Fatalf("got %d sets, want 1", len(c.sets))
	}
	for i := range 4 {
		c.insert(&rules.Key{byte(i)}, 0, 1, int64(100+i), int64(200+i))
	}
	c.insert(&rules.Key{9}, 0, 1, 1000, 1000) // evicts key 0, expiring first
	for i, want := range map[byte]bool{0: false, 1: true, 2: true, 3: true, 9: true} {
		if _, _, ok := c.lookup(&rules.Key{i}, 50, 1); ok != want {
			t.Errorf("key %d: got cached %v, want %v", i, ok, want)
		}
	}
	// An expired slot is reused before any live one.
	c.insert(&rules.Key{10}, 102, 1, 2000, 2000) // keys 1 (101) and 2 (102) expired
	if _, _, ok := c.lookup(&rules.Key{3}, 102, 1); !ok {
		t.Error("key 3 evicted, want an expired slot reused")
	}
	if got, want := len(newDenyCache(100_000).sets), 32768; got != want {
		t.Errorf("100k keys: got %d sets, want %d", got, want)
	}
}

// TestDenyCacheConcurrent: readers racing writers never see a torn entry
// (every entry's times are derived from its key), for -race.
func TestDenyCacheConcurrent(t *testing.T) {
	t.Parallel()
	c := newDenyCache(8) // two sets: heavy contention
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20000 {
				k := rules.Key{byte(rng.IntN(16)), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(rng.IntN(2))}
				want := int64(k[0])*1000 + int64(k[23]) + 1
				switch rng.IntN(4) {
				case 0:
					c.insert(&k, 0, 1, want, 2*want)
				case 1:
					c.forget(&k)
				default:
					if retry, reset, ok := c.lookup(&k, 0, 1); ok && (retry != want || reset != 2*want) {
						t.Errorf("key %v: got %d/%d, want %d/%d", k, retry, reset, want, 2*want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestDenyCacheDifferential: over random calls, the deny cache never
// changes a request's decision, nor the answer for a key it refuses, from
// what a plain store decides.
func TestDenyCacheDifferential(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		ref := newMemstore(t)
		defer ref.Close()
		f := &fakeStore{backing: newMemstore(t)}
		s := newStore(t, f, Options{NoBackgroundProbe: true, LocalMaxKeys: 8})
		rng := rand.New(rand.NewPCG(seed, 2))
		algs := []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket, rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog}
		// Keys 0-5 are plain takes, 6-7 attempts rules; each key keeps its
		// algorithm and limits, as a rule does.
		mk := func(k int) rules.Op {
			o := op(byte(k), rules.FailOpen, int64(k%3+1), time.Duration(k%2+1)*time.Second)
			o.Algorithm = algs[k%len(algs)]
			o.Attempts = k >= 6
			return o
		}
		now := storetest.Base
		calls := 0
		for i := range 3000 {
			now = now.Add(time.Duration(rng.IntN(300_000)) * time.Microsecond)
			n := rng.IntN(3) + 1
			ops := make([]rules.Op, 0, n)
			used := map[int]bool{}
			for range n {
				k := rng.IntN(8)
				if used[k] {
					continue
				}
				used[k] = true
				o := mk(k)
				switch r := rng.IntN(20); {
				case r == 0:
					o.Kind = rules.OpPeek
				case r == 1:
					o.Kind = rules.OpRefund
				case r == 2:
					o.Kind = rules.OpAdd
				case r < 5:
					o.Enforce = false
				}
				ops = append(ops, o)
			}
			got, want := take(t, s, now, ops...), take(t, ref, now, ops...)
			if g, w := rules.Refused(ops, got), rules.Refused(ops, want); g != w {
				t.Fatalf("seed %d call %d %+v: got refused %v, want %v (%+v vs %+v)", seed, i, ops, g, w, got, want)
			}
			for j := range ops {
				if ops[j].Kind == rules.OpTake && ops[j].Enforce && !got[j].Allowed && got[j] != want[j] {
					t.Fatalf("seed %d call %d op %d: got %+v, want %+v", seed, i, j, got[j], want[j])
				}
			}
			calls++
		}
		if hits := s.Stats().DenyCacheHits; hits == 0 || int(f.calls.Load())+int(hits) != calls {
			t.Errorf("seed %d: %d hits + %d inner calls, want some hits, summing to %d", seed, hits, f.calls.Load(), calls)
		}
	}
}

// TestDenyCacheOff: NoDenyCache sends every call to the store.
func TestDenyCacheOff(t *testing.T) {
	t.Parallel()
	f := &fakeStore{backing: newMemstore(t)}
	s := newStore(t, f, Options{NoDenyCache: true, NoBackgroundProbe: true})
	o := op(1, rules.FailOpen, 1, time.Minute)
	for range 10 {
		take(t, s, storetest.Base, o)
	}
	if f.calls.Load() != 10 || s.Stats().DenyCacheHits != 0 {
		t.Errorf("got %d inner calls and %d hits, want 10 and 0", f.calls.Load(), s.Stats().DenyCacheHits)
	}
}
