package counter

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// algBase is the tests' t=0 in µs since the epoch: 2023-11-14T00:00:00Z, a
// multiple of one day, so every window of a second, a minute or an hour
// starts on it.
const algBase = 1_699_920_000_000_000

var allAlgorithms = []Algorithm{GCRA, TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, SlidingLog}

// lessonOp is the lesson's Figure 1 setting: 5 per second, burst 5.
func lessonOp(alg Algorithm, kind OpKind, cost int64) Op {
	return Op{Kind: kind, Algorithm: alg, Limit: 5, Burst: 5, PeriodUS: 1_000_000, Cost: cost, Enforce: true}
}

// applyOne runs op as a call of its own, as a store would.
func applyOne(st *State, nowUS int64, op *Op) (Result, int64) {
	r := Check(st, nowUS, op)
	refused := Refused([]Op{*op}, []Result{r})
	ttl := Settle(st, nowUS, op, refused, &r)
	return r, ttl
}

func ms(v float64) time.Duration { return time.Duration(math.Round(v*1000)) * time.Microsecond }

func TestAlgorithmsSeedTrace(t *testing.T) {
	t.Parallel()
	var fx struct {
		Requests []float64         `json:"requests_at_seconds"`
		Allowed  map[string][]bool `json:"allowed"`
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = filepath.Dir(dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "testdata", "fixtures", "seed_trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	for _, alg := range allAlgorithms {
		want, ok := fx.Allowed[alg.String()]
		if !ok || len(want) != len(fx.Requests) {
			t.Fatalf("%s: fixture has %d decisions for %d requests", alg, len(want), len(fx.Requests))
		}
		t.Run(alg.String(), func(t *testing.T) {
			var st State
			op := lessonOp(alg, OpTake, 1)
			for i, sec := range fx.Requests {
				now := algBase + int64(math.Round(sec*1e6))
				r, _ := applyOne(&st, now, &op)
				if r.Allowed != want[i] {
					t.Errorf("request %d at %.2fs: got allowed=%v, want %v", i, sec, r.Allowed, want[i])
				}
			}
		})
	}
}

func TestGCRALessonNumbers(t *testing.T) {
	t.Parallel()
	// "Six requests at t = 0 push TAT to 200, 400, 600, 800 and 1,000 ms,
	// and the sixth would make it 1,200 ms, 200 ms over, so it is rejected.
	// That 200 ms is exactly its retry time."
	var st State
	op := lessonOp(GCRA, OpTake, 1)
	for i := range 5 {
		r, ttl := applyOne(&st, algBase, &op)
		// t: whatever is left, one more unit fits an interval after it is
		// spent. The TTL is the time back to full, TAT − now.
		want := Result{Allowed: true, Remaining: int64(4 - i), ResetAfter: ms(200)}
		if r != want {
			t.Fatalf("request %d: got %+v, want %+v", i+1, r, want)
		}
		if st.At != algBase+int64(200_000*(i+1)) {
			t.Errorf("request %d: got TAT %d, want %d", i+1, st.At-algBase, 200_000*(i+1))
		}
		if ttl != int64(200_000*(i+1)) {
			t.Errorf("request %d: got TTL %d, want %d", i+1, ttl, 200_000*(i+1))
		}
	}
	r, _ := applyOne(&st, algBase, &op)
	if want := (Result{ResetAfter: ms(200), RetryAfter: ms(200)}); r != want {
		t.Fatalf("sixth request: got %+v, want %+v", r, want)
	}
}

type algStep struct {
	at       float64 // ms after algBase
	kind     OpKind
	cost     int64
	attempts bool
	want     Result
}

func runAlgSteps(t *testing.T, alg Algorithm, steps []algStep) {
	t.Helper()
	var st State
	for i, s := range steps {
		op := lessonOp(alg, s.kind, s.cost)
		op.Attempts = s.attempts
		r, _ := applyOne(&st, algBase+int64(math.Round(s.at*1000)), &op)
		if r != s.want {
			t.Errorf("%s step %d (kind %d cost %d at %vms): got %+v, want %+v", alg, i, s.kind, s.cost, s.at, r, s.want)
		}
	}
}

func TestAlgorithmResults(t *testing.T) {
	t.Parallel()
	// gcra, token_bucket and leaky_bucket make identical decisions with an
	// exact emission interval (here 200ms), and report identical values.
	buckets := []algStep{
		// ResetAfter is the effective window: a fresh bucket's next unit
		// comes back one emission interval after it is spent.
		{at: 0, kind: OpPeek, cost: 1, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(200)}},
		{at: 0, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 4, ResetAfter: ms(200)}},
		{at: 0, kind: OpTake, cost: 3, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(200)}},
		// Refused: t is the wait.
		{at: 0, kind: OpTake, cost: 2, want: Result{ResetAfter: ms(200), RetryAfter: ms(200)}},
		{at: 0, kind: OpTake, cost: 6, want: Result{ResetAfter: ms(200), RetryAfter: RetryNever}},
		{at: 100, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(100)}},
		{at: 150, kind: OpPeek, cost: 1, want: Result{ResetAfter: ms(50), RetryAfter: ms(50)}},
		// An attempt over the limit leaves the counter full, no debt: the
		// wait is from the state it leaves (1000ms), not the one it found
		// (850ms), or a retry at RetryAfter would be refused.
		{at: 150, kind: OpTake, cost: 5, attempts: true, want: Result{ResetAfter: ms(1000), RetryAfter: ms(1000)}},
		// A refund gives back; never below empty.
		{at: 150, kind: OpRefund, cost: 2, want: Result{Allowed: true, Remaining: 2, ResetAfter: ms(200)}},
		{at: 150, kind: OpRefund, cost: 50, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(200)}},
		// Add counts after the fact, into at most one allowance of debt.
		{at: 200, kind: OpAdd, cost: 3, want: Result{Allowed: true, Remaining: 2, ResetAfter: ms(200)}},
		{at: 200, kind: OpAdd, cost: 4, want: Result{ResetAfter: ms(1200), RetryAfter: ms(1200)}},
		{at: 200, kind: OpTake, cost: 1, want: Result{ResetAfter: ms(600), RetryAfter: ms(600)}},
		{at: 200, kind: OpAdd, cost: 1 << 40, want: Result{ResetAfter: ms(1200), RetryAfter: RetryNever}},
		// Without the debt the counter would be empty by 1200.
		{at: 1400, kind: OpPeek, cost: 2, want: Result{ResetAfter: ms(200), RetryAfter: ms(200)}},
		{at: 1400, kind: OpPeek, cost: 1, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(200)}},
		{at: 1600, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(200)}},
		{at: 1600, kind: OpReset, cost: 1, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(200)}},
		{at: 1600, kind: OpTake, cost: 5, want: Result{Allowed: true, ResetAfter: ms(200)}},
		// Idle for its whole reset time: the full burst again.
		{at: 2600, kind: OpTake, cost: 5, want: Result{Allowed: true, ResetAfter: ms(200)}},
		{at: 3600, kind: OpTake, cost: 0, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(200)}},
	}
	for _, alg := range []Algorithm{GCRA, TokenBucket, LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) { runAlgSteps(t, alg, buckets) })
	}
	t.Run("fixed_window", func(t *testing.T) {
		runAlgSteps(t, FixedWindow, []algStep{
			// However many are left, none more before the window ends.
			{at: 300, kind: OpPeek, cost: 1, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(700)}},
			{at: 300, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 4, ResetAfter: ms(700)}},
			{at: 400, kind: OpTake, cost: 4, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(600)}},
			{at: 500, kind: OpTake, cost: 1, want: Result{ResetAfter: ms(500), RetryAfter: ms(500)}},
			{at: 500, kind: OpTake, cost: 6, want: Result{ResetAfter: ms(500), RetryAfter: RetryNever}},
			{at: 500, kind: OpRefund, cost: 2, want: Result{Allowed: true, Remaining: 2, ResetAfter: ms(500)}},
			{at: 500, kind: OpAdd, cost: 100, want: Result{ResetAfter: ms(500), RetryAfter: RetryNever}},
			{at: 999.999, kind: OpTake, cost: 1, want: Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
			// The window starts at 1000ms since the epoch, not 1000ms after
			// the first request.
			{at: 1000, kind: OpTake, cost: 5, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(1000)}},
			{at: 1000, kind: OpReset, cost: 1, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(1000)}},
		})
	})
	t.Run("sliding_window", func(t *testing.T) {
		runAlgSteps(t, SlidingWindow, []algStep{
			// Five spent at 300ms: the next unit fits at 1200ms, once
			// 5×(1−e) + 0 + 1 ≤ 5 in the next window (e = 200ms).
			{at: 300, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 4, ResetAfter: ms(900)}},
			{at: 300, kind: OpTake, cost: 4, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(900)}},
			{at: 300, kind: OpTake, cost: 1, want: Result{ResetAfter: ms(900), RetryAfter: ms(900)}},
			{at: 1199.999, kind: OpTake, cost: 1, want: Result{Remaining: 0, ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
			// The lesson's "5 × 0.8 + 0 = 4 and the request passes as the
			// fifth"; the next fits once 5×(1−e) + 1 + 1 ≤ 5, at e = 400ms.
			{at: 1200, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(200)}},
			// At 1500: 5×0.5 + 1 = 3.5, so one more unit fits (4.5 ≤ 5),
			// and a second once 5×(1−e) + 3 ≤ 5, at e = 600ms.
			{at: 1500, kind: OpPeek, cost: 1, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(100)}},
			{at: 1500, kind: OpTake, cost: 2, want: Result{ResetAfter: ms(100), RetryAfter: ms(100)}},
			// Within the window: 5×(1−e) + 1 + 2 ≤ 5 at e = 600ms.
			{at: 1600, kind: OpTake, cost: 2, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(200)}},
			// A refund larger than this window's count reaches into the
			// last: 4×(1−e) + 0 + 3 + 1 ≤ 5 at e = 750ms.
			{at: 1600, kind: OpRefund, cost: 4, want: Result{Allowed: true, Remaining: 3, ResetAfter: ms(150)}},
			{at: 2000, kind: OpTake, cost: 5, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(1200)}},
			{at: 4000, kind: OpPeek, cost: 5, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(1200)}},
		})
	})
	t.Run("sliding_log", func(t *testing.T) {
		runAlgSteps(t, SlidingLog, []algStep{
			// The next unit fits once the oldest timestamp has left.
			{at: 300, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 4, ResetAfter: ms(1000)}},
			{at: 400, kind: OpTake, cost: 2, want: Result{Allowed: true, Remaining: 2, ResetAfter: ms(900)}},
			{at: 700, kind: OpTake, cost: 2, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(600)}},
			// Two must leave: the 300 one at 1300, then the 400s at 1400.
			{at: 800, kind: OpTake, cost: 2, want: Result{ResetAfter: ms(600), RetryAfter: ms(600)}},
			{at: 800, kind: OpTake, cost: 6, want: Result{ResetAfter: ms(500), RetryAfter: RetryNever}},
			// Out of the window exactly when t ≤ now − period.
			{at: 1299.999, kind: OpTake, cost: 1, want: Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
			{at: 1300, kind: OpTake, cost: 1, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(100)}},
			// The refund gives back the newest unit.
			{at: 1300, kind: OpRefund, cost: 1, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(100)}},
			// An attempt over the limit keeps the newest Limit timestamps:
			// its own five, which leave a period later.
			{at: 1500, kind: OpTake, cost: 5, attempts: true, want: Result{ResetAfter: ms(1000), RetryAfter: ms(1000)}},
			{at: 2499.999, kind: OpPeek, cost: 1, want: Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
			{at: 2500, kind: OpPeek, cost: 5, want: Result{Allowed: true, Remaining: 5, ResetAfter: ms(1000)}},
		})
	})
}

// TestBucketsAgree checks that gcra, token_bucket and leaky_bucket, three
// code paths, agree on every kind of op when the emission interval is exact.
func TestBucketsAgree(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		limit := rng.Int64N(10) + 1
		op := Op{Limit: limit, Burst: rng.Int64N(10) + 1, PeriodUS: limit * (rng.Int64N(1000) + 1), Enforce: true}
		var states [3]State
		algs := [3]Algorithm{GCRA, TokenBucket, LeakyBucket}
		now := int64(algBase)
		for range 100 {
			now += rng.Int64N(op.PeriodUS/2 + 1)
			op.Kind = []OpKind{OpTake, OpTake, OpTake, OpPeek, OpAdd, OpRefund, OpReset}[rng.IntN(7)]
			op.Cost = rng.Int64N(op.Burst + 2)
			op.Attempts = rng.IntN(4) == 0
			var got [3]Result
			var ttl [3]int64
			for i, alg := range algs {
				o := op
				o.Algorithm = alg
				got[i], ttl[i] = applyOne(&states[i], now, &o)
			}
			if got[0] != got[1] || got[0] != got[2] || ttl[0] != ttl[1] || ttl[0] != ttl[2] {
				t.Fatalf("%+v at %d: got gcra %+v ttl %d, token_bucket %+v ttl %d, leaky_bucket %+v ttl %d",
					op, now-algBase, got[0], ttl[0], got[1], ttl[1], got[2], ttl[2])
			}
		}
	}
}

// randomOp returns an op of alg with small random parameters.
func randomOp(rng *rand.Rand, alg Algorithm) Op {
	limit := rng.Int64N(6) + 1
	return Op{
		Algorithm: alg, Limit: limit, Burst: rng.Int64N(6) + 1,
		PeriodUS: limit * (rng.Int64N(2000) + 1), Enforce: true,
	}
}

func randomize(rng *rand.Rand, op *Op) {
	op.Kind = []OpKind{OpTake, OpTake, OpTake, OpPeek, OpAdd, OpRefund, OpReset}[rng.IntN(7)]
	op.Cost = rng.Int64N(op.Limit + op.Burst + 1)
	op.Attempts = rng.IntN(4) == 0
}

// sameAsFresh reports whether st at nowUS decides and reports exactly as a
// fresh state for every cost and checking kind.
func sameAsFresh(st *State, nowUS int64, op Op) bool {
	var fresh State
	return sameState(st, &fresh, nowUS, op)
}

// sameState reports whether a and b at nowUS decide and report alike for
// every cost and checking kind.
func sameState(a, b *State, nowUS int64, op Op) bool {
	for cost := range op.Limit + op.Burst + 2 {
		for _, kind := range []OpKind{OpTake, OpPeek, OpAdd} {
			op.Kind, op.Cost = kind, cost
			if Check(a, nowUS, &op) != Check(b, nowUS, &op) {
				return false
			}
		}
	}
	r1, t1 := reportState(a, nowUS, &op)
	r2, t2 := reportState(b, nowUS, &op)
	return r1 == r2 && t1 == t2
}

// TestTTLMeansFresh checks the TTL every store keys by: at now+TTL a state
// decides exactly as a missing key, one µs earlier it does not, and after
// its expiry keeping it or dropping it cannot be told apart.
func TestTTLMeansFresh(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, alg := range allAlgorithms {
		for range 100 {
			op := randomOp(rng, alg)
			var st State
			now := int64(algBase)
			for range 30 {
				now += rng.Int64N(op.PeriodUS)
				randomize(rng, &op)
				_, ttl := applyOne(&st, now, &op)
				if got := TTL(&st, now, &op); got != ttl {
					t.Fatalf("%s %+v: TTL got %d, Settle returned %d", alg, op, got, ttl)
				}
				if ttl < 0 {
					t.Fatalf("%s %+v: got TTL %d, want ≥ 0", alg, op, ttl)
				}
				if !sameAsFresh(&st, now+ttl, op) {
					t.Fatalf("%s %+v: at now+TTL (%d) the state %+v is not fresh", alg, op, ttl, st)
				}
				if ttl > 0 && sameAsFresh(&st, now+ttl-1, op) {
					t.Fatalf("%s %+v: TTL %d is not the shortest: %+v is fresh a µs earlier", alg, op, ttl, st)
				}
				// Once expired, the state also settles as a fresh one: after
				// one more op on each (a state whose TTL is 0 dropped, as
				// stores do), the two read alike at any time, earlier ones
				// included. So a store may drop a key at its expiry or keep
				// it: nobody can tell.
				later := now + ttl + rng.Int64N(op.PeriodUS)
				kept := State{Alg: st.Alg, At: st.At, N: st.N, Prev: st.Prev, Log: slices.Clone(st.Log)}
				var dropped State
				next := op
				randomize(rng, &next)
				if _, ttl := applyOne(&kept, later, &next); ttl == 0 {
					kept = State{}
				}
				if _, ttl := applyOne(&dropped, later, &next); ttl == 0 {
					dropped = State{}
				}
				for _, at := range []int64{later, later - rng.Int64N(op.PeriodUS), later + rng.Int64N(op.PeriodUS)} {
					if !sameState(&kept, &dropped, at, op) {
						t.Fatalf("%s %+v: expired state %+v settled into %+v, a fresh one into %+v: they differ at %d",
							alg, next, st, kept, dropped, at-later)
					}
				}
			}
		}
	}
}

// TestClockBackwards checks that a state read before the time it was last
// written never reads as a fresh allowance, and that nothing panics.
func TestClockBackwards(t *testing.T) {
	t.Parallel()
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			var st State
			take := lessonOp(alg, OpTake, 5)
			if r, _ := applyOne(&st, algBase+10_500_000, &take); !r.Allowed {
				t.Fatalf("first take refused: %+v", r)
			}
			take.Cost = 1
			for _, back := range []int64{10_499_999, 10_200_000, 9_000_000, 0, -algBase} {
				for _, kind := range []OpKind{OpPeek, OpTake, OpAdd} {
					op := take
					op.Kind = kind
					op.Attempts = true
					r, ttl := applyOne(&st, algBase+back, &op)
					if r.Allowed || r.RetryAfter <= 0 {
						t.Fatalf("kind %d at %dµs: got %+v, want refused with a wait", kind, back, r)
					}
					if ttl <= 0 {
						t.Fatalf("kind %d at %dµs: got TTL %d, want > 0", kind, back, ttl)
					}
				}
			}
			peek := lessonOp(alg, OpPeek, 1)
			if r, _ := applyOne(&st, algBase+10_500_000, &peek); r.Allowed {
				t.Fatalf("back at the first take's time: got %+v, want refused", r)
			}
		})
	}
}

func TestWindowsAlignedToEpoch(t *testing.T) {
	t.Parallel()
	// A 7s period: windows start at multiples of 7s since the epoch, so
	// the boundary is at a multiple of 7s, whatever the first request.
	const period = 7_000_000
	boundary := int64(algBase/period+1) * period
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		var st State
		op := Op{Kind: OpTake, Algorithm: alg, Limit: 2, PeriodUS: period, Cost: 2, Enforce: true}
		if r, _ := applyOne(&st, boundary-1, &op); !r.Allowed || r.ResetAfter != time.Microsecond*time.Duration(map[Algorithm]int64{FixedWindow: 1, SlidingWindow: period/2 + 1}[alg]) {
			t.Fatalf("%s: take just before the boundary: got %+v", alg, r)
		}
		op.Cost = 1
		r, _ := applyOne(&st, boundary, &op)
		if want := alg == FixedWindow; r.Allowed != want {
			t.Errorf("%s: take at the boundary: got %+v, want allowed=%v", alg, r, want)
		}
	}
	// A window holding 0 (the epoch) also works, and before it.
	for _, now := range []int64{0, 1, -1, -period} {
		var st State
		op := Op{Kind: OpTake, Algorithm: FixedWindow, Limit: 1, PeriodUS: period, Cost: 1, Enforce: true}
		if r, _ := applyOne(&st, now, &op); !r.Allowed || r.ResetAfter != time.Duration(windowStart(now, period)+period-now)*time.Microsecond {
			t.Errorf("at %d: got %+v", now, r)
		}
		if ws := windowStart(now, period); ws > now || now-ws >= period || ws%period != 0 {
			t.Errorf("windowStart(%d) = %d", now, ws)
		}
	}
}

// TestSlidingLogExact checks sliding_log against a naive log of every
// consumed unit: the same decisions, never more than Limit units in any
// rolling period, never more than Limit timestamps stored.
func TestSlidingLogExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		op := Op{Kind: OpTake, Algorithm: SlidingLog, Limit: rng.Int64N(8) + 1, PeriodUS: 1_000_000, Enforce: true}
		var st State
		var all []int64 // every consumed unit
		now := int64(algBase)
		for range 200 {
			now += rng.Int64N(300_000)
			op.Cost = rng.Int64N(op.Limit) + 1
			n := int64(0)
			for _, ts := range all {
				if ts > now-op.PeriodUS {
					n++
				}
			}
			want := n+op.Cost <= op.Limit
			r, _ := applyOne(&st, now, &op)
			if r.Allowed != want {
				t.Fatalf("%+v at %d: got allowed=%v, want %v", op, now, r.Allowed, want)
			}
			if want {
				for range op.Cost {
					all = append(all, now)
				}
			}
			if int64(len(st.Log)) > op.Limit {
				t.Fatalf("log holds %d timestamps, limit %d", len(st.Log), op.Limit)
			}
		}
		for i, ti := range all {
			n := int64(0)
			for _, tj := range all[:i+1] {
				if tj > ti-op.PeriodUS {
					n++
				}
			}
			if n > op.Limit {
				t.Fatalf("%d units in the period ending %d, limit %d", n, ti, op.Limit)
			}
		}
	}
}

func TestSlidingLogReusesLog(t *testing.T) {
	var st State
	op := Op{Kind: OpTake, Algorithm: SlidingLog, Limit: 4, PeriodUS: 1_000_000, Cost: 1, Attempts: true, Enforce: true}
	for i := range 20 {
		applyOne(&st, algBase+int64(i)*100_000, &op)
	}
	base := &st.Log[:1][0]
	allocs := testing.AllocsPerRun(100, func() {
		applyOne(&st, algBase+3_000_000, &op)
	})
	if allocs != 0 || &st.Log[:1][0] != base || len(st.Log) != 4 {
		t.Errorf("got %v allocs, len %d, same array %v; want 0, 4, true", allocs, len(st.Log), &st.Log[:1][0] == base)
	}
	// A limit lowered by a reload trims to the newest.
	op.Limit = 2
	applyOne(&st, algBase+3_000_001, &op)
	if len(st.Log) != 2 || st.Log[1] != algBase+3_000_001 {
		t.Errorf("after lowering the limit: got log %v", st.Log)
	}
}

func TestAlgorithmChangeIsFresh(t *testing.T) {
	t.Parallel()
	algs := append(slices.Clone(allAlgorithms), Distinct)
	for _, from := range algs {
		for _, to := range algs {
			if from == to {
				continue
			}
			var st State
			op := lessonOp(from, OpTake, 5)
			applyOne(&st, algBase+500_000, &op)
			peek := lessonOp(to, OpPeek, 5)
			if r, ttl := applyOne(&st, algBase+500_000, &peek); !r.Allowed || r.Remaining != 5 || ttl != 0 {
				t.Errorf("%s then %s: got %+v ttl %d, want a fresh counter", from, to, r, ttl)
			}
		}
	}
}

func TestValidateLimits(t *testing.T) {
	t.Parallel()
	const day = 86_400_000_000
	tests := []struct {
		name                   string
		alg                    Algorithm
		limit, burst, periodUS int64
		want                   error
	}{
		{"lesson gcra", GCRA, 5, 5, 1_000_000, nil},
		{"windows ignore burst", FixedWindow, 5, 0, 1_000_000, nil},
		{"interval of 1µs", GCRA, 1_000_000, 1, 1_000_000, nil},
		{"interval under 1µs", GCRA, 1_000_001, 1, 1_000_000, ErrInvalidLimits},
		{"zero limit", SlidingWindow, 0, 1, 1_000_000, ErrInvalidLimits},
		{"zero period", GCRA, 1, 1, 0, ErrInvalidLimits},
		{"period too long", FixedWindow, 1, 1, MaxPeriodUS + 1, ErrInvalidLimits},
		{"zero burst", TokenBucket, 5, 0, 1_000_000, ErrInvalidLimits},
		{"gcra span at the bound", GCRA, 1, MaxSpanUS / day, day, nil},
		{"gcra span over", GCRA, 1, MaxSpanUS/day + 1, day, ErrInvalidLimits},
		{"bucket at the bound", LeakyBucket, 10, MaxScaled / day, day, nil},
		{"bucket over", TokenBucket, 10, MaxScaled/day + 1, day, ErrInvalidLimits},
		{"sliding window at the bound", SlidingWindow, MaxScaled / day, 0, day, nil},
		{"sliding window over", SlidingWindow, MaxScaled/day + 1, 0, day, ErrInvalidLimits},
		{"sliding log at the bound", SlidingLog, MaxLogLimit, 0, day, nil},
		{"sliding log over", SlidingLog, MaxLogLimit + 1, 0, day, ErrInvalidLimits},
		{"distinct ignores burst", Distinct, 5, 0, day, nil},
		{"distinct at the bound", Distinct, MaxDistinctLimit, 0, day, nil},
		{"distinct over", Distinct, MaxDistinctLimit + 1, 0, day, ErrInvalidLimits},
		{"distinct zero limit", Distinct, 0, 0, day, ErrInvalidLimits},
		{"unknown", NumAlgorithms, 5, 5, day, ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateLimits(tt.alg, tt.limit, tt.burst, tt.periodUS)
			if (err == nil) != (tt.want == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
	op := lessonOp(GCRA, OpTake, -1)
	if err := ValidateOp(&op); !errors.Is(err, ErrInvalidLimits) {
		t.Errorf("negative cost: got %v, want ErrInvalidLimits", err)
	}
	op = lessonOp(GCRA, OpReset+1, 1)
	if err := ValidateOp(&op); !errors.Is(err, ErrInvalidLimits) {
		t.Errorf("unknown kind: got %v, want ErrInvalidLimits", err)
	}
}

// TestExtremes drives every algorithm at the largest parameters validation
// accepts, with a clock near 2^52µs and costs up to MaxInt64, and checks
// that every value stays sane and every intermediate under MaxExact (an
// overflow would show as a negative or absurd value).
func TestExtremes(t *testing.T) {
	t.Parallel()
	const day = 86_400_000_000
	params := []Op{
		{Algorithm: GCRA, Limit: 1, Burst: MaxSpanUS / MaxPeriodUS, PeriodUS: MaxPeriodUS},
		{Algorithm: GCRA, Limit: 1 << 20, Burst: MaxSpanUS, PeriodUS: 1 << 20},
		{Algorithm: TokenBucket, Limit: 1, Burst: MaxScaled / day, PeriodUS: day},
		{Algorithm: TokenBucket, Limit: MaxPeriodUS, Burst: MaxScaled / MaxPeriodUS, PeriodUS: MaxPeriodUS},
		{Algorithm: LeakyBucket, Limit: day, Burst: MaxScaled / day, PeriodUS: day},
		{Algorithm: FixedWindow, Limit: MaxPeriodUS, PeriodUS: MaxPeriodUS},
		{Algorithm: SlidingWindow, Limit: MaxScaled / day, PeriodUS: day},
		{Algorithm: SlidingWindow, Limit: 1, PeriodUS: MaxPeriodUS},
		{Algorithm: SlidingLog, Limit: MaxLogLimit, PeriodUS: MaxPeriodUS},
		{Algorithm: Distinct, Limit: MaxDistinctLimit, PeriodUS: MaxPeriodUS},
	}
	for _, p := range params {
		now := int64(1<<52) - 3*p.PeriodUS // the calls below stay under 2^52
		if err := ValidateLimits(p.Algorithm, p.Limit, p.Burst, p.PeriodUS); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		full := p.Limit
		if p.Burst > 0 {
			full = p.Burst
		}
		var st State
		for i, kind := range []OpKind{OpTake, OpAdd, OpAdd, OpPeek, OpTake, OpRefund, OpTake, OpAdd, OpRefund} {
			for _, cost := range []int64{0, 1, full, 2 * full, math.MaxInt64} {
				op := p
				op.Kind, op.Cost, op.Attempts, op.Enforce = kind, cost, i%2 == 0, true
				at := now + int64(i)*p.PeriodUS/3
				r, ttl := applyOne(&st, at, &op)
				if r.Remaining < 0 || r.Remaining > full ||
					(r.RetryAfter < 0 && r.RetryAfter != RetryNever) ||
					ttl < 0 || ttl > 3*p.PeriodUS/p.Limit*max(p.Burst, 1)+2*p.PeriodUS ||
					st.At < 0 || st.At > MaxExact || st.N > MaxExact || st.N < -MaxExact {
					t.Fatalf("%+v: got %+v ttl %d state {At %d N %d Prev %d}", op, r, ttl, st.At, st.N, st.Prev)
				}
			}
		}
	}
}

// TestRetryAfterAndWindowAreExact is the property behind the RateLimit and
// Retry-After headers (docs/headers.md), over generated schedules of every
// algorithm with small random parameters:
//
//   - refused (RetryAfter w ≠ RetryNever): ResetAfter equals w; the same
//     request sent again at now+w is admitted, at now+w−1µs it is not, and
//     it stays admitted from w on (at w rounded up to whole seconds, as
//     Retry-After says, or later);
//   - allowed (ResetAfter t, Remaining r): whatever times in [now, now+t)
//     the client sends at, no more than r of its one-unit requests are
//     admitted; spending r at now, one more is admitted at now+t and not at
//     now+t−1µs;
//   - without debt (no OpAdd) or a clock step back, t and a one-unit
//     request's w are at most the emission interval for gcra and the
//     buckets, the period for the fixed window and the log, and
//     period + ⌈period ÷ limit⌉ for the sliding window counter.
func TestRetryAfterAndWindowAreExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	clone := func(st *State) State {
		c := *st
		c.Log = slices.Clone(st.Log)
		return c
	}
	take1 := func(op Op) Op { op.Kind, op.Cost, op.Attempts = OpTake, 1, false; return op }
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for run := range 300 {
				withDebt := run%3 == 0 // OpAdd can run the counter into debt
				op := randomOp(rng, alg)
				if rng.IntN(2) == 0 {
					op.PeriodUS = op.Limit * (rng.Int64N(3_000_000) + 1) // up to seconds per unit
				}
				var st State
				now := int64(algBase)
				for step := range 40 {
					now += rng.Int64N(op.PeriodUS/2 + 1)
					kinds := []OpKind{OpTake, OpTake, OpTake, OpTake, OpPeek, OpRefund, OpReset}
					if withDebt {
						kinds = append(kinds, OpAdd, OpAdd)
					}
					op.Kind = kinds[rng.IntN(len(kinds))]
					op.Cost = 1
					if rng.IntN(4) == 0 {
						op.Cost = rng.Int64N(op.Limit+op.Burst+1) + 1
					}
					op.Attempts = rng.IntN(4) == 0
					r, _ := applyOne(&st, now, &op)
					where := func() string {
						return fmt.Sprintf("run %d step %d: %s %+v at %dµs: %+v, state %+v", run, step, alg, op, now-algBase, r, st)
					}
					bound := op.PeriodUS
					switch alg {
					case GCRA, TokenBucket, LeakyBucket:
						bound = ceilDiv(op.PeriodUS, op.Limit)
					case SlidingWindow:
						bound = op.PeriodUS + ceilDiv(op.PeriodUS, op.Limit)
					}
					check := op
					check.Kind, check.Attempts = OpPeek, false
					if !r.Allowed {
						if r.RetryAfter == RetryNever {
							continue
						}
						w := r.RetryAfter.Microseconds()
						if w <= 0 || r.ResetAfter != r.RetryAfter {
							t.Fatalf("%s: want RetryAfter > 0 and ResetAfter = RetryAfter", where())
						}
						if !withDebt && op.Cost == 1 && op.Kind != OpAdd && w > bound {
							t.Fatalf("%s: RetryAfter %dµs over the bound %dµs", where(), w, bound)
						}
						if op.Kind == OpRefund || op.Kind == OpReset {
							continue
						}
						seconds := ceilDiv(w, 1_000_000) * 1_000_000
						for _, at := range []int64{w - 1, w, seconds, w + rng.Int64N(op.PeriodUS+1)} {
							c := clone(&st)
							if got := Check(&c, now+at, &check).Allowed; got != (at >= w) {
								t.Fatalf("%s: the same request %dµs later: allowed=%v, want %v", where(), at, got, at >= w)
							}
						}
						continue
					}
					win, left := r.ResetAfter.Microseconds(), r.Remaining
					if win <= 0 {
						t.Fatalf("%s: want ResetAfter > 0", where())
					}
					if !withDebt && win > bound {
						t.Fatalf("%s: ResetAfter %dµs over the bound %dµs", where(), win, bound)
					}
					// A client sending at random times within the window.
					c := clone(&st)
					times := make([]int64, rng.IntN(int(left)+4)+1)
					for i := range times {
						times[i] = now + rng.Int64N(win)
					}
					slices.Sort(times)
					times[0] = now
					admitted := int64(0)
					one := take1(op)
					for _, at := range times {
						if res, _ := applyOne(&c, at, &one); res.Allowed {
							admitted++
						}
					}
					if admitted > left {
						t.Fatalf("%s: %d one-unit requests admitted within the window %dµs, %d left", where(), admitted, win, left)
					}
					// Spending the r left at now: one more fits at now+t exactly.
					c = clone(&st)
					spend := one
					spend.Cost = left
					if left > 0 {
						if res, _ := applyOne(&c, now, &spend); !res.Allowed {
							t.Fatalf("%s: spending the %d left was refused: %+v", where(), left, res)
						}
					}
					peek1 := one
					peek1.Kind = OpPeek
					for _, at := range []int64{win - 1, win} {
						c2 := clone(&c)
						if got := Check(&c2, now+at, &peek1).Allowed; got != (at >= win) {
							t.Fatalf("%s: r spent, one more %dµs later: allowed=%v, want %v", where(), at, got, at >= win)
						}
					}
				}
			}
		})
	}
}

// TestIssueSlidingWindowExample is the report that opened the fix: a
// sliding_window of 3 per 20s answered t=40 and Retry-After: 22. Three at
// the start of a window plus 4⅔s: the next request fits in the next
// window once 3×(1−e/20) + 0 + 1 ≤ 3, at e = 6⅔s, so both are 22s.
func TestIssueSlidingWindowExample(t *testing.T) {
	t.Parallel()
	const period = 20_000_000
	start := int64(algBase/period+1) * period
	op := Op{Kind: OpTake, Algorithm: SlidingWindow, Limit: 3, PeriodUS: period, Cost: 1, Enforce: true}
	var st State
	for range 3 {
		if r, _ := applyOne(&st, start, &op); !r.Allowed {
			t.Fatalf("refused early: %+v", r)
		}
	}
	now := start + 4_666_667
	r, _ := applyOne(&st, now, &op)
	wait := int64(period - 4_666_667 + (period - 2*period/3)) // rest of the window, then e = ⌈20s/3⌉
	if r.Allowed || r.RetryAfter != DurationUS(wait) || r.ResetAfter != r.RetryAfter {
		t.Fatalf("got %+v, want refused with RetryAfter = ResetAfter = %v", r, DurationUS(wait))
	}
	if s := ceilDiv(wait, 1_000_000); s != 22 {
		t.Fatalf("Retry-After: got %d s, want 22", s)
	}
	// The worst case: the limit spent at a window's very start waits
	// 20s + ⌈20s/3⌉ = 26⅔s, under w + ⌈w÷limit⌉ = 27s.
	var worst State
	for range 3 {
		applyOne(&worst, start, &op)
	}
	r, _ = applyOne(&worst, start, &op)
	if got, want := r.RetryAfter, DurationUS(period+period-2*period/3); got != want {
		t.Fatalf("worst case: got RetryAfter %v, want %v", got, want)
	}
}

// distinctOp is a Distinct op: 3 distinct values per second.
func distinctOp(kind OpKind, member uint64) Op {
	return Op{Kind: kind, Algorithm: Distinct, Limit: 3, PeriodUS: 1_000_000, Cost: 1, Member: member, Enforce: true}
}

func TestDistinctResults(t *testing.T) {
	t.Parallel()
	steps := []struct {
		at       float64 // ms after algBase
		kind     OpKind
		member   uint64
		cost     int64
		attempts bool
		want     Result
	}{
		{at: 0, kind: OpPeek, member: 1, cost: 1, want: Result{Allowed: true, Remaining: 3, ResetAfter: ms(1000)}},
		// Below the limit a new value is allowed while Cost places are
		// free (a Cost of 0 needs one): the values of one request on one
		// key (values.go).
		{at: 100, kind: OpTake, member: 1, cost: 1, want: Result{Allowed: true, Remaining: 2, ResetAfter: ms(1000)}},
		{at: 200, kind: OpTake, member: 2, cost: 2, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(900)}},
		// A known value counts nothing new (it is seen again now).
		{at: 300, kind: OpTake, member: 1, cost: 1, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(900)}},
		{at: 400, kind: OpTake, member: 3, cost: 0, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(800)}},
		// Full: a known value is allowed, a new one refused until the
		// oldest (2, at 200) expires.
		{at: 500, kind: OpTake, member: 3, cost: 1, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(700)}},
		{at: 500, kind: OpTake, member: 4, cost: 1, want: Result{ResetAfter: ms(700), RetryAfter: ms(700)}},
		// An attempt or an add of a new value cannot grow a full set.
		{at: 600, kind: OpTake, member: 4, cost: 1, attempts: true, want: Result{ResetAfter: ms(600), RetryAfter: ms(600)}},
		{at: 600, kind: OpAdd, member: 5, cost: 1, want: Result{ResetAfter: ms(600), RetryAfter: ms(600)}},
		{at: 600, kind: OpPeek, member: 4, cost: 1, want: Result{ResetAfter: ms(600), RetryAfter: ms(600)}},
		// Expired exactly a period after it was last seen.
		{at: 1199.999, kind: OpTake, member: 4, cost: 1, want: Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
		{at: 1200, kind: OpTake, member: 4, cost: 1, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(100)}},
		// A refund forgets the value; a refund of an unknown one changes
		// nothing.
		{at: 1200, kind: OpRefund, member: 3, cost: 1, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(100)}},
		{at: 1200, kind: OpRefund, member: 9, cost: 1, want: Result{Allowed: true, Remaining: 1, ResetAfter: ms(100)}},
		// An add counts a value whatever the decision, up to the limit.
		{at: 1250, kind: OpAdd, member: 5, cost: 1, want: Result{Allowed: true, Remaining: 0, ResetAfter: ms(50)}},
		{at: 1250, kind: OpReset, member: 0, cost: 1, want: Result{Allowed: true, Remaining: 3, ResetAfter: ms(1000)}},
		{at: 1250, kind: OpTake, member: 5, cost: 1, want: Result{Allowed: true, Remaining: 2, ResetAfter: ms(1000)}},
	}
	var st State
	for i, s := range steps {
		op := distinctOp(s.kind, s.member)
		op.Cost, op.Attempts = s.cost, s.attempts
		r, _ := applyOne(&st, algBase+int64(s.at*1000+0.5), &op)
		if r != s.want {
			t.Errorf("step %d (kind %d member %d at %vms): got %+v, want %+v", i, s.kind, s.member, s.at, r, s.want)
		}
	}
}

// TestDistinctExact checks Distinct against a naive model, a map of every
// counted value to the time it was last counted, over generated schedules
// of every kind: the same decisions, Remaining, RetryAfter (the oldest
// live value's expiry) and TTL (the newest's), and never more than Limit
// live values. The state it keeps is Limit members at most.
func TestDistinctExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 22))
	for run := range 200 {
		op := distinctOp(OpTake, 0)
		op.Limit = rng.Int64N(6) + 1
		op.PeriodUS = rng.Int64N(2_000_000) + op.Limit
		var st State
		model := map[uint64]int64{}
		now := int64(algBase)
		for step := range 100 {
			switch rng.IntN(20) {
			case 0:
				now -= rng.Int64N(op.PeriodUS) // a step back
			default:
				now += rng.Int64N(op.PeriodUS / 3)
			}
			op.Kind = []OpKind{OpTake, OpTake, OpTake, OpTake, OpPeek, OpAdd, OpRefund, OpReset}[rng.IntN(8)]
			op.Member = rng.Uint64N(10)
			op.Attempts = rng.IntN(4) == 0
			op.Cost = rng.Int64N(3)
			// The model: live values, their oldest and newest times.
			live := map[uint64]int64{}
			var newest int64
			for m, at := range model {
				if at > now-op.PeriodUS {
					live[m] = at
					newest = max(newest, at)
				}
			}
			times := slices.Sorted(maps.Values(live))
			_, known := live[op.Member]
			places := max(op.Cost, 1) // a new value needs Cost places
			allowed := known || int64(len(live))+places <= op.Limit
			wantWait := int64(0)
			switch {
			case allowed:
			case places > op.Limit:
				wantWait = -1 // never
			default:
				wantWait = times[int64(len(live))+places-op.Limit-1] + op.PeriodUS - now
			}
			if wantWait > 0 && (op.Kind == OpAdd || op.Kind == OpTake && op.Attempts) && int64(len(live)) < op.Limit {
				wantWait = 1 // counted all the same, so known: a retry fits
			}
			r, ttl := applyOne(&st, now, &op)
			if op.Kind == OpRefund || op.Kind == OpReset {
				allowed, wantWait = true, 0
			}
			where := func() string {
				return fmt.Sprintf("run %d step %d", run, step)
			}
			if r.Allowed != allowed || (!allowed && wantWait >= 0 && r.RetryAfter != DurationUS(wantWait)) || (wantWait < 0 && r.RetryAfter != RetryNever) {
				t.Fatalf("%s: %+v at %d with %v live: got %+v, want allowed=%v wait %dµs", where(), op, now-algBase, live, r, allowed, wantWait)
			}
			// A call that consumes drops the expired values; one that does
			// not leaves the state as it was (a step back may revive them).
			switch op.Kind {
			case OpTake, OpAdd:
				if op.Kind == OpAdd || op.Attempts || allowed {
					if known || int64(len(live)) < op.Limit {
						live[op.Member] = max(now, newest)
					}
					model = live
				}
			case OpRefund:
				delete(live, op.Member)
				model = live
			case OpReset:
				clear(model)
			}
			if int64(len(model)) > op.Limit || len(st.Seen) > int(op.Limit) {
				t.Fatalf("%s: %d values counted, %d kept, limit %d", where(), len(model), len(st.Seen), op.Limit)
			}
			wantTTL, n := int64(0), int64(0)
			for _, at := range model {
				if at > now-op.PeriodUS {
					wantTTL = max(wantTTL, at+op.PeriodUS-now)
					n++
				}
			}
			wantLeft := op.Limit - n
			if !r.Allowed {
				wantLeft = 0
			}
			if ttl != wantTTL || r.Remaining != wantLeft {
				t.Fatalf("%s: %+v: got remaining %d TTL %d, want %d and %d (model %v)", where(), op, r.Remaining, ttl, wantLeft, wantTTL, model)
			}
			if !sameAsFresh(&st, now+ttl, op) || (ttl > 0 && sameAsFresh(&st, now+ttl-1, op)) {
				t.Fatalf("%s: TTL %d is not when the state becomes fresh", where(), ttl)
			}
			// The effective window: spent on Remaining new values now, one
			// more new value fits at now+ResetAfter and not a µs earlier.
			if r.Allowed {
				c := State{Alg: st.Alg, Seen: slices.Clone(st.Seen)}
				spend := op
				spend.Kind, spend.Attempts, spend.Cost = OpTake, false, 1
				for i := range r.Remaining {
					spend.Member = 1000 + uint64(i)
					if got, _ := applyOne(&c, now, &spend); !got.Allowed {
						t.Fatalf("%s: new value %d of the %d left refused: %+v", where(), i, r.Remaining, got)
					}
				}
				spend.Member = 2000
				win := r.ResetAfter.Microseconds()
				if Check(&c, now+win-1, &spend).Allowed || !Check(&c, now+win, &spend).Allowed {
					t.Fatalf("%s: ResetAfter %dµs is not when one more new value fits", where(), win)
				}
			}
		}
	}
}

// TestDistinctReusesSet: once grown to Limit members, counting allocates
// nothing, and a limit lowered by a reload keeps the newest members.
func TestDistinctReusesSet(t *testing.T) {
	var st State
	op := distinctOp(OpTake, 0)
	op.Limit = 4
	for i := range 20 {
		op.Member = uint64(i % 6)
		applyOne(&st, algBase+int64(i)*100_000, &op)
	}
	base := &st.Seen[:1][0]
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		i++
		op.Member = uint64(i % 4)
		applyOne(&st, algBase+3_000_000+int64(i), &op)
	})
	if allocs != 0 || &st.Seen[:1][0] != base || len(st.Seen) != 4 {
		t.Errorf("got %v allocs, len %d, same array %v; want 0, 4, true", allocs, len(st.Seen), &st.Seen[:1][0] == base)
	}
	// An add of a new value over a lowered limit trims and adds nothing.
	newest := slices.Clone(st.Seen[2:])
	op.Kind, op.Limit, op.Member = OpAdd, 2, 99
	if r, _ := applyOne(&st, algBase+3_001_000, &op); r.Allowed {
		t.Errorf("a new value over a lowered limit: got %+v, want refused", r)
	}
	if !slices.Equal(st.Seen, newest) {
		t.Errorf("after lowering the limit: got %+v, want the newest 2, %+v", st.Seen, newest)
	}
}

// TestDistinctOrder: members are kept ascending by (At, Member), a Redis
// sorted set's order, so a trim drops the same members in every store.
func TestDistinctOrder(t *testing.T) {
	var st State
	op := distinctOp(OpAdd, 0)
	op.Limit = 5
	for _, m := range []uint64{7, 3, 9, 1, 5} {
		op.Member = m
		applyOne(&st, algBase, &op)
	}
	op.Member = 3
	applyOne(&st, algBase-500, &op) // a step back: seen again at the newest time
	want := []Seen{{1, algBase}, {3, algBase}, {5, algBase}, {7, algBase}, {9, algBase}}
	if !slices.Equal(st.Seen, want) {
		t.Errorf("got %v, want %v", st.Seen, want)
	}
	// A limit lowered to 2: a new value trims to the newest two and is
	// not counted; a known one keeps its place and is seen again.
	op.Limit, op.Member = 2, 4
	applyOne(&st, algBase+1, &op)
	if want := []Seen{{7, algBase}, {9, algBase}}; !slices.Equal(st.Seen, want) {
		t.Errorf("limit lowered to 2, new value: got %v, want %v", st.Seen, want)
	}
	op.Limit, op.Member = 5, 7
	applyOne(&st, algBase+2, &op)
	if want := []Seen{{9, algBase}, {7, algBase + 2}}; !slices.Equal(st.Seen, want) {
		t.Errorf("a known value: got %v, want %v", st.Seen, want)
	}
}

// TestDistinctClockBackwards: a full set read before its members were
// seen still refuses a new value, with a wait, and stays stored.
func TestDistinctClockBackwards(t *testing.T) {
	t.Parallel()
	var st State
	for m := range uint64(3) {
		op := distinctOp(OpTake, m)
		applyOne(&st, algBase+10_500_000, &op)
	}
	for _, back := range []int64{10_499_999, 10_200_000, 9_000_000, 0, -algBase} {
		for _, kind := range []OpKind{OpPeek, OpTake, OpAdd} {
			op := distinctOp(kind, 42)
			op.Attempts = true
			r, ttl := applyOne(&st, algBase+back, &op)
			if r.Allowed || r.RetryAfter <= 0 || ttl <= 0 {
				t.Fatalf("kind %d at %dµs: got %+v TTL %d, want refused with a wait, stored", kind, back, r, ttl)
			}
			known := distinctOp(kind, 1)
			if r, _ := applyOne(&st, algBase+back, &known); !r.Allowed {
				t.Fatalf("kind %d at %dµs: a known value got %+v, want allowed", kind, back, r)
			}
		}
	}
}
