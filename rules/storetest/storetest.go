package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/queue"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/counter"
)

// Base is every case's t=0: 2023-11-14T00:00:00Z, a multiple of one day
// since the Unix epoch.
var Base = time.Unix(1_699_920_000, 0).UTC()

// Case is one time-scripted table, replayed against a fresh store.
type Case struct {
	Name  string
	Steps []Step
}

// Step is one Take call at Base+At.
type Step struct {
	At  time.Duration
	Ops []rules.Op
	// Want holds the expected result of each op; Ignore lists the fields
	// not compared. Allowed is always compared.
	Want   []rules.Result
	Ignore Fields
	// Err means Take must return an error (Want is then not compared).
	Err bool
	// Delay, when not nil, holds the queue.Delay each op's result must
	// give (queue = true, behaviour/queue), compared whatever Ignore says.
	Delay []time.Duration
}

// Fields selects Result fields.
type Fields uint8

// The Result fields a Step may leave uncompared.
const (
	IgnoreRemaining Fields = 1 << iota
	IgnoreResetAfter
	IgnoreRetryAfter
	IgnoreValues = IgnoreRemaining | IgnoreResetAfter | IgnoreRetryAfter
)

// Key returns the table key named label (at most 14 bytes). Run makes it
// unique to the case and the Run call before the store sees it.
func Key(label string) rules.Key {
	var k rules.Key
	if len(label) > 14 {
		panic("storetest: key label longer than 14 bytes: " + label)
	}
	copy(k[:], label)
	return k
}

// keyspace makes table keys unique to one case of one Run call.
type keyspace struct {
	run    uint64
	caseID uint16
}

func (ks keyspace) key(k rules.Key) rules.Key {
	binary.BigEndian.PutUint16(k[14:16], ks.caseID)
	binary.BigEndian.PutUint64(k[16:24], ks.run)
	return k
}

// Run replays every case of Cases and SeedTraceCases, then the generated
// checks, each against a store of its own from newStore.
func Run(t *testing.T, newStore func(t *testing.T) rules.Store) {
	RunWith(t, newStore, Options{})
}

// Options adjust RunWith to what a store documents about itself.
type Options struct {
	// PerShard says that one call is atomic per shard of the store only,
	// a refusal in one shard being undone in the others afterwards
	// (redisstore on a Redis Cluster: per hash slot). Every table must
	// still pass unchanged (one call at a time decides as one atomic
	// call); the concurrency check then asserts the bound such a store
	// documents instead of atomicity: never more requests admitted than
	// the tight key's limit, and, once every call has returned, both keys
	// charged for the admitted requests exactly.
	PerShard bool
}

// RunWith is Run with options.
func RunWith(t *testing.T, newStore func(t *testing.T) rules.Store, opts Options) {
	run := rand.Uint64()
	cases := append(Cases(), SeedTraceCases(t)...)
	checkCovered(t, cases) // every algorithm of counter's table runs on the store
	seen := make(map[string]bool, len(cases))
	for i, c := range cases {
		if seen[c.Name] {
			t.Fatalf("storetest: two cases named %q", c.Name)
		}
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			replay(t, open(t, newStore), c, keyspace{run: run, caseID: uint16(i)})
		})
	}
	generated := []struct {
		name string
		fn   func(*testing.T, rules.Store, keyspace)
	}{
		{"generated/sliding_log_never_over", slidingLogProperty},
		{"generated/reference", reference},
		{"generated/concurrent", func(t *testing.T, s rules.Store, ks keyspace) { concurrent(t, s, ks, opts) }},
		{"generated/len_mismatch", lenMismatch},
	}
	for i, g := range generated {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.fn(t, open(t, newStore), keyspace{run: run, caseID: uint16(len(cases) + i)})
		})
	}
}

func open(t *testing.T, newStore func(t *testing.T) rules.Store) rules.Store {
	s := newStore(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return s
}

// replay runs c's steps in order against s.
func replay(t *testing.T, s rules.Store, c Case, ks keyspace) {
	t.Helper()
	ctx := context.Background()
	for i, st := range c.Steps {
		ops := make([]rules.Op, len(st.Ops))
		for j, op := range st.Ops {
			op.Key = ks.key(op.Key)
			ops[j] = op
		}
		res := make([]rules.Result, len(ops))
		err := s.Take(ctx, Base.Add(st.At), ops, res)
		if st.Err {
			if err == nil {
				t.Errorf("step %d at %v: got no error, want one", i, st.At)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d at %v: Take: %v", i, st.At, err)
		}
		if len(st.Want) != len(ops) {
			t.Fatalf("step %d: table has %d results for %d ops", i, len(st.Want), len(ops))
		}
		for j, got := range res {
			want := st.Want[j]
			if st.Ignore&IgnoreRemaining != 0 {
				got.Remaining, want.Remaining = 0, 0
			}
			if st.Ignore&IgnoreResetAfter != 0 {
				got.ResetAfter, want.ResetAfter = 0, 0
			}
			if st.Ignore&IgnoreRetryAfter != 0 {
				got.RetryAfter, want.RetryAfter = 0, 0
			}
			if got != want {
				t.Errorf("step %d at %v, op %d (%s): got %s, want %s", i, st.At, j, describe(&st.Ops[j]), fmtResult(got), fmtResult(want))
			}
			if st.Delay != nil {
				if d := queue.Delay(&ops[j], &res[j]); d != st.Delay[j] {
					t.Errorf("step %d at %v, op %d (%s): queue.Delay %v, want %v", i, st.At, j, describe(&st.Ops[j]), d, st.Delay[j])
				}
			}
		}
	}
}

func describe(op *rules.Op) string {
	kind := [...]string{"take", "peek", "add", "refund", "reset"}
	k := fmt.Sprint(op.Kind)
	if int(op.Kind) < len(kind) {
		k = kind[op.Kind]
	}
	label := op.Key[:14]
	for i, b := range label {
		if b == 0 {
			label = label[:i]
			break
		}
	}
	s := fmt.Sprintf("%s %s %q %d/%dµs burst %d cost %d", k, op.Algorithm, label, op.Limit, op.PeriodUS, op.Burst, op.Cost)
	if !op.Enforce {
		s += " dry-run"
	}
	if op.Attempts {
		s += " attempts"
	}
	return s
}

func fmtResult(r rules.Result) string {
	return fmt.Sprintf("{allowed %v, remaining %d, reset %v, retry %v}", r.Allowed, r.Remaining, r.ResetAfter, r.RetryAfter)
}

// slidingLogProperty checks over a generated schedule that sliding_log
// decides exactly as a log of every consumed unit, so that no rolling
// period ever holds more than Limit.
func slidingLogProperty(t *testing.T, s rules.Store, ks keyspace) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	const period = 10_000_000 // 10s
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.SlidingLog, Key: ks.key(Key("log")), Limit: 7, PeriodUS: period, Enforce: true}
	var units []int64 // µs after Base of every consumed unit
	var now int64
	res := make([]rules.Result, 1)
	for i := range 500 {
		now += rng.Int64N(2_000_000)
		op.Cost = rng.Int64N(3) + 1
		var inWindow int64
		for _, u := range units {
			if u > now-period {
				inWindow++
			}
		}
		if err := s.Take(ctx, Base.Add(time.Duration(now)*time.Microsecond), []rules.Op{op}, res); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if want := inWindow+op.Cost <= op.Limit; res[0].Allowed != want {
			t.Fatalf("request %d at %dµs, cost %d, %d in the window: got allowed=%v, want %v", i, now, op.Cost, inWindow, res[0].Allowed, want)
		}
		if res[0].Allowed {
			for range op.Cost {
				units = append(units, now)
			}
		}
	}
	for i, end := range units {
		var n int64
		for _, u := range units[:i+1] {
			if u > end-period {
				n++
			}
		}
		if n > op.Limit {
			t.Fatalf("%d units in the period ending at %dµs, limit %d", n, end, op.Limit)
		}
	}
}

// reference replays generated multi-op calls (every algorithm of counter's
// table, every kind and flag, key budgets with room among them, a few keys,
// the clock mostly forward with steps back and long idle gaps) against s
// and against counter.Check and counter.Settle: the results must be
// identical. The model keeps keys as the package doc says every store
// must: not at all when Settle's TTL is 0, and as fresh from their expiry
// on; an attempts take in a refused call charges a key it holds and makes
// none it does not (rules.Store).
func reference(t *testing.T, s rules.Store, ks keyspace) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	algs := counter.Algorithms() // every one of counter's table
	// Distinct's values: a few, so that sets fill and values recur, with
	// the hex encoding's corners (0, the top bit, all ones).
	members := []uint64{0, 1, 2, 3, 0xdeadbeef, 1 << 63, math.MaxUint64}
	type tracked struct {
		op        rules.Op
		st        rules.State
		stored    bool
		expiresAt int64
	}
	var counters []*tracked
	for i, alg := range algs {
		for j := range 3 {
			limit := rng.Int64N(5) + 1
			counters = append(counters, &tracked{op: rules.Op{
				Algorithm: alg,
				Key:       ks.key(Key(fmt.Sprintf("ref%d-%d", i, j))),
				Limit:     limit,
				Burst:     rng.Int64N(5) + 1,
				PeriodUS:  limit * (rng.Int64N(500_000) + 1),
			}})
		}
	}
	kinds := []rules.OpKind{rules.OpTake, rules.OpTake, rules.OpTake, rules.OpTake, rules.OpPeek, rules.OpAdd, rules.OpRefund, rules.OpReset}
	now := int64(0)
	ops := make([]rules.Op, 0, 4)
	var picked []*tracked
	for call := range 3000 {
		switch r := rng.IntN(100); {
		case r < 3:
			now -= rng.Int64N(2_000_000) // a step back
		case r < 6:
			now += 10_000_000 + rng.Int64N(10_000_000) // idle
		default:
			now += rng.Int64N(200_000)
		}
		ops, picked = ops[:0], picked[:0]
		for _, i := range rng.Perm(len(counters))[:rng.IntN(4)+1] {
			c := counters[i]
			op := c.op
			op.Kind = kinds[rng.IntN(len(kinds))]
			op.Cost = rng.Int64N(op.Limit+1) + rng.Int64N(2)
			op.Enforce = rng.IntN(5) != 0
			op.Attempts = rng.IntN(5) == 0
			// A key budget with room (or none) changes no decision.
			op.Sensitive = rng.IntN(2) == 0
			op.MaxKeys = []int32{0, 64}[rng.IntN(2)]
			// So does a marker budget: a key read as a marker one call and
			// a counter the next moves between the two (memstore).
			op.Marker = rng.IntN(4) == 0
			// And a network's share with room (21 keys, a share of 64).
			op.Network, op.NetworkKeys = uint32(rng.IntN(3)), []int32{0, 64}[rng.IntN(2)]
			op.Member = members[rng.IntN(len(members))] // the others ignore it
			ops = append(ops, op)
			picked = append(picked, c)
		}
		got := make([]rules.Result, len(ops))
		if err := s.Take(ctx, Base.Add(time.Duration(now)*time.Microsecond), ops, got); err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		want := make([]rules.Result, len(ops))
		nowUS := Base.UnixMicro() + now
		for i, c := range picked {
			if !c.stored || nowUS >= c.expiresAt {
				c.st, c.stored = rules.State{}, false
			}
			want[i] = counter.Check(&c.st, nowUS, &ops[i])
		}
		refused := counter.Refused(ops, want)
		for i, c := range picked {
			op := ops[i]
			if refused && !c.stored && op.Kind == rules.OpTake && op.Attempts {
				op.Attempts = false // an attempt in a refused call makes no new key
			}
			ttl := counter.Settle(&c.st, nowUS, &op, refused, &want[i])
			c.stored, c.expiresAt = ttl > 0, nowUS+ttl
		}
		for i := range ops {
			if got[i] != want[i] {
				t.Fatalf("call %d at %dµs, op %d (%s): got %s, want %s", call, now, i, describe(&ops[i]), fmtResult(got[i]), fmtResult(want[i]))
			}
		}
	}
}

// concurrent checks that one call is atomic across its ops: many callers
// at one instant take from a roomy key A and a tight key B together; B
// admits exactly its limit, and A is charged only for admitted requests.
// With opts.PerShard, A and B may sit in different shards: a request B
// allows may be refused by A while A holds units of requests B refused and
// their undo has not reached A yet, so fewer may be admitted, never more,
// and both keys end charged for exactly the admitted ones.
func concurrent(t *testing.T, s rules.Store, ks keyspace, opts Options) {
	ctx := context.Background()
	now := Base.Add(100 * time.Millisecond)
	for _, alg := range []rules.Algorithm{rules.GCRA, rules.FixedWindow, rules.SlidingLog, rules.Distinct} {
		a := rules.Op{Kind: rules.OpTake, Algorithm: alg, Key: ks.key(Key("conc-a-" + alg.String()[:3])), Limit: 20, Burst: 20, PeriodUS: 1_000_000, Cost: 1, Enforce: true}
		b := a
		b.Key, b.Limit, b.Burst = ks.key(Key("conc-b-"+alg.String()[:3])), 5, 5
		var wg sync.WaitGroup
		var mu sync.Mutex
		allowed := 0
		for i := range 64 {
			wg.Go(func() {
				ops := []rules.Op{a, b}
				// A new value each (Distinct; the others ignore it).
				ops[0].Member, ops[1].Member = uint64(i), uint64(i)
				res := make([]rules.Result, 2)
				if err := s.Take(ctx, now, ops, res); err != nil {
					t.Error(err)
					return
				}
				admitted := res[1].Allowed
				if opts.PerShard {
					admitted = !counter.Refused(ops, res)
				}
				if admitted {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		peek := func(op rules.Op) int64 {
			op.Kind = rules.OpPeek
			res := make([]rules.Result, 1)
			if err := s.Take(ctx, now, []rules.Op{op}, res); err != nil {
				t.Fatal(err)
			}
			return res[0].Remaining
		}
		if opts.PerShard {
			if allowed > 5 {
				t.Errorf("%s: got %d requests admitted, want at most 5", alg, allowed)
			}
			if got, want := peek(a), int64(20-allowed); got != want {
				t.Errorf("%s: got %d left on the roomy key, want %d (charged only for the %d admitted)", alg, got, want, allowed)
			}
			if got, want := peek(b), int64(5-allowed); got != want {
				t.Errorf("%s: got %d left on the tight key, want %d (charged only for the %d admitted)", alg, got, want, allowed)
			}
			continue
		}
		if allowed != 5 {
			t.Errorf("%s: got %d requests admitted, want 5", alg, allowed)
		}
		if got := peek(a); got != 15 {
			t.Errorf("%s: got %d left on the roomy key, want 15 (charged only for the 5 admitted)", alg, got)
		}
	}
}

// lenMismatch: a call with fewer results than ops is the caller's bug,
// answered with rules.ErrLenMismatch (rules.CheckTake).
func lenMismatch(t *testing.T, s rules.Store, ks keyspace) {
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: ks.key(Key("len")), Limit: 5, Burst: 5, PeriodUS: 1_000_000, Cost: 1, Enforce: true}
	if err := s.Take(context.Background(), Base, []rules.Op{op, op}, make([]rules.Result, 1)); !errors.Is(err, rules.ErrLenMismatch) {
		t.Errorf("Take with fewer results than ops: got %v, want rules.ErrLenMismatch (rules.CheckTake)", err)
	}
}
