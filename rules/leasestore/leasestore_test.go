package leasestore

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// counting is the shared store of a test: a memory store (the same
// decisions as Redis's, rules/storetest) that counts the calls reaching it
// and can be made to fail.
type counting struct {
	rules.Store
	calls atomic.Int64
	fail  atomic.Bool
}

var errDown = errors.New("store down")

func (c *counting) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	c.calls.Add(1)
	if c.fail.Load() {
		return errDown
	}
	return c.Store.Take(ctx, now, ops, res)
}

func shared(t *testing.T) *counting {
	t.Helper()
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return &counting{Store: ms}
}

// key returns a counter key of rule n.
func key(n byte) rules.Key { return rules.Key{n, 1, 2, 3, 4, 5, 6, 7, 'g'} }

// hourly is an op on key n of a fixed window of limit units an hour,
// leased by units: time never moves the window in these tests.
func hourly(n byte, limit int64, units uint16) rules.Op {
	return rules.Op{Kind: rules.OpTake, Algorithm: rules.FixedWindow, Key: key(n), Limit: limit, PeriodUS: time.Hour.Microseconds(), Cost: 1, Enforce: true, LeaseUnits: units}
}

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// take sends ops to st at now and returns whether the request they make
// is admitted (every enforcing take allowed).
func take(t *testing.T, st rules.Store, now time.Time, ops ...rules.Op) (bool, []rules.Result) {
	t.Helper()
	res := make([]rules.Result, len(ops))
	if err := st.Take(context.Background(), now, ops, res); err != nil {
		t.Fatal(err)
	}
	return !refused(ops, res), res
}

// TestOneCallPerLease: a hot key far from its limit costs the shared
// store one call per lease of units requests, and every request is
// admitted.
func TestOneCallPerLease(t *testing.T) {
	sh := shared(t)
	st := New(sh, Options{})
	const n = 1000
	for i := range n {
		if ok, _ := take(t, st, t0, hourly(1, 1_000_000, 20)); !ok {
			t.Fatalf("request %d refused", i+1)
		}
	}
	// A lease is topped up when it falls under half its size: a call
	// per 10 requests at most.
	if calls := sh.calls.Load(); calls > n/10+1 {
		t.Errorf("%d calls for %d requests, want at most %d", calls, n, n/10+1)
	}
	if s := st.Stats(); s.Local+s.Batches != n || s.Passed != 0 {
		t.Errorf("stats %+v, want local + batches = %d and none passed", s, n)
	}
}

// TestNodesNeverAdmitMoreThanTheRule: 1, 2 and 4 nodes sharing one store
// admit exactly the rule's limit over a window, however their requests
// interleave: every unit a node spends was taken from the shared store
// first, and a node's held units are spent before it asks again.
func TestNodesNeverAdmitMoreThanTheRule(t *testing.T) {
	for _, nodes := range []int{1, 2, 4} {
		t.Run(string(rune('0'+nodes))+" nodes", func(t *testing.T) {
			sh := shared(t)
			st := make([]*Store, nodes)
			for i := range st {
				st[i] = New(sh, Options{})
			}
			const limit, requests = 100, 400
			admitted := 0
			for i := range requests {
				if ok, _ := take(t, st[i%nodes], t0, hourly(1, limit, 20)); ok {
					admitted++
				}
			}
			if admitted != limit {
				t.Errorf("%d nodes admitted %d of %d requests, want the limit %d", nodes, admitted, requests, limit)
			}
			if calls := sh.calls.Load(); calls >= requests {
				t.Errorf("%d calls for %d requests: leases saved nothing", calls, requests)
			}
		})
	}
}

// TestHeldUnitsExpire: units a node does not spend within Hold are not
// spent after it, and what the fleet loses so is within nodes × units.
func TestHeldUnitsExpire(t *testing.T) {
	sh := shared(t)
	a, b := New(sh, Options{Hold: time.Second}), New(sh, Options{Hold: time.Second})
	const limit = 100
	admitted := 0
	if ok, _ := take(t, a, t0, hourly(1, limit, 20)); ok { // a holds 19
		admitted++
	}
	late := t0.Add(time.Second) // a's units have expired
	for range 2 * limit {
		for _, st := range []*Store{a, b} {
			if ok, _ := take(t, st, late, hourly(1, limit, 20)); ok {
				admitted++
			}
		}
	}
	if admitted > limit || admitted < limit-19 {
		t.Errorf("admitted %d, want between %d and %d (a's 19 expired units lost at most)", admitted, limit-19, limit)
	}
	if admitted == limit {
		t.Errorf("admitted the whole limit: a spent units after their hold")
	}
}

// TestOverAdmissionInTimeIsBounded: on a GCRA of rate r and burst B, over
// any interval of length w the nodes admit at most B + r×w (what the rule
// alone admits) plus nodes × units (units leased before the interval,
// spent in it).
func TestOverAdmissionInTimeIsBounded(t *testing.T) {
	const (
		nodes = 4
		units = 5
		rate  = 100 // a second
		burst = 20
		step  = time.Millisecond
		steps = 3000
	)
	sh := shared(t)
	st := make([]*Store, nodes)
	for i := range st {
		st[i] = New(sh, Options{})
	}
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: key(2), Limit: rate, Burst: burst, PeriodUS: time.Second.Microseconds(), Cost: 1, Enforce: true, LeaseUnits: units}
	var at []time.Duration // when each admitted request was
	for i := range steps {
		now := t0.Add(time.Duration(i) * step)
		for j := range nodes { // every node asks every step: 4,000 a second
			if ok, _ := take(t, st[(i+j)%nodes], now, op); ok {
				at = append(at, time.Duration(i)*step)
			}
		}
	}
	for _, w := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
		bound := burst + int(rate*w/time.Second) + nodes*units
		most, lo := 0, 0
		for hi := range at {
			for at[hi]-at[lo] >= w {
				lo++
			}
			most = max(most, hi-lo+1)
		}
		if most > bound {
			t.Errorf("%d admitted within %v, want at most %d (B + r×w + nodes × units)", most, w, bound)
		}
	}
	// Over the whole run the nodes admit no more than the rule would.
	if total, rule := len(at), burst+rate*steps*int(step)/int(time.Second); total > rule {
		t.Errorf("%d admitted in all, the rule alone admits %d", total, rule)
	}
}

// TestRefusedLeaseIsSentAgain: a batch the shared store refuses while
// fewer units than its size are left is sent again at its own cost, so a
// lease refuses no request the shared store alone would admit.
func TestRefusedLeaseIsSentAgain(t *testing.T) {
	sh := shared(t)
	a, b := New(sh, Options{}), New(sh, Options{})
	take(t, a, t0, hourly(1, 25, 20)) // a takes 20: 5 are left
	if ok, _ := take(t, b, t0, hourly(1, 25, 20)); !ok {
		t.Fatal("b's request refused with 5 units left")
	}
	if s := b.Stats(); s.Retries != 1 {
		t.Errorf("b's stats %+v, want one retry", s)
	}
	admitted := 2
	for range 100 {
		for _, st := range []*Store{a, b} {
			if ok, _ := take(t, st, t0, hourly(1, 25, 20)); ok {
				admitted++
			}
		}
	}
	if admitted != 25 {
		t.Errorf("admitted %d, want the limit 25", admitted)
	}
}

// TestNoRetryWhenAnOpConsumesAnyway: a call with a count = "attempts" op
// is never sent twice (its attempt would be charged twice): a refused
// batch then refuses the request, and the attempt is charged once.
func TestNoRetryWhenAnOpConsumesAnyway(t *testing.T) {
	sh := shared(t)
	a, b := New(sh, Options{}), New(sh, Options{})
	take(t, a, t0, hourly(1, 25, 20))
	attempts := hourly(3, 10, 0)
	attempts.Attempts = true
	take(t, sh, t0, attempts) // its key exists: 9 left
	if ok, _ := take(t, b, t0, hourly(1, 25, 20), attempts); ok {
		t.Fatal("admitted: the batch of 20 was refused with 5 left and the call was not to be sent again")
	}
	if s := b.Stats(); s.Retries != 0 {
		t.Errorf("stats %+v, want no retry", s)
	}
	peek := attempts
	peek.Kind, peek.Attempts = rules.OpPeek, false
	if _, res := take(t, sh, t0, peek); res[0].Remaining != 8 {
		t.Errorf("the attempts rule has %d left, want 8: charged once", res[0].Remaining)
	}
}

// TestRefusedRequestSpendsNothingHeld: a request another rule refuses
// spends none of the units its leased op reserved, and a request in
// dry-run (Enforce false) is never leased.
func TestRefusedRequestSpendsNothingHeld(t *testing.T) {
	sh := shared(t)
	st := New(sh, Options{})
	take(t, st, t0, hourly(1, 100, 20)) // 19 held
	strict := hourly(4, 1, 0)
	take(t, st, t0, strict) // strict's one unit is gone
	for range 50 {
		if ok, _ := take(t, st, t0, hourly(1, 100, 20), strict); ok {
			t.Fatal("admitted past the strict rule")
		}
	}
	admitted := 1
	for range 200 {
		if ok, _ := take(t, st, t0, hourly(1, 100, 20)); ok {
			admitted++
		}
	}
	if admitted != 100 {
		t.Errorf("admitted %d, want 100: the refused requests spent held units", admitted)
	}

	dry := hourly(5, 1_000_000, 20)
	dry.Enforce = false
	before := sh.calls.Load()
	for range 10 {
		take(t, st, t0, dry)
	}
	if calls := sh.calls.Load() - before; calls != 10 {
		t.Errorf("%d calls for 10 dry-run requests, want 10: a dry-run op is not leased", calls)
	}
}

// TestStoreDown: the shared store failing is Take's error, and the units
// a failed call reserved are still held for the next requests.
func TestStoreDown(t *testing.T) {
	sh := shared(t)
	st := New(sh, Options{})
	take(t, st, t0, hourly(1, 100, 20)) // 19 held
	sh.fail.Store(true)
	other := hourly(6, 100, 0)
	res := make([]rules.Result, 2)
	if err := st.Take(context.Background(), t0, []rules.Op{hourly(1, 100, 20), other}, res); !errors.Is(err, errDown) {
		t.Fatalf("Take: %v, want the shared store's error", err)
	}
	for i := range 9 { // what is held still answers, with no call
		if ok, _ := take(t, st, t0, hourly(1, 100, 20)); !ok {
			t.Fatalf("request %d refused with units held", i+1)
		}
	}
}

// TestMaxLeasesBoundsTheTable: past MaxLeases live leases, a new key's
// ops go to the shared store as they are, and the table does not grow.
func TestMaxLeasesBoundsTheTable(t *testing.T) {
	sh := shared(t)
	st := New(sh, Options{MaxLeases: shards})
	for n := range 1000 {
		op := hourly(1, 100, 20)
		op.Key[10], op.Key[11] = byte(n), byte(n>>8)
		if ok, _ := take(t, st, t0, op); !ok {
			t.Fatalf("key %d refused", n)
		}
	}
	leases := 0
	for i := range st.tables {
		leases += len(st.tables[i].m)
	}
	if leases > shards {
		t.Errorf("%d leases held, want at most %d", leases, shards)
	}
	if s := st.Stats(); s.Passed == 0 {
		t.Errorf("stats %+v: no op passed past the bound", s)
	}
}

// TestConcurrentNodesAdmitTheLimit: goroutines on two nodes racing on one
// hot key admit exactly its limit (run with -race).
func TestConcurrentNodesAdmitTheLimit(t *testing.T) {
	sh := shared(t)
	nodes := []*Store{New(sh, Options{}), New(sh, Options{})}
	const limit = 500
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 200 {
				ops := []rules.Op{hourly(1, limit, 16)}
				res := make([]rules.Result, 1)
				if err := nodes[g%2].Take(context.Background(), t0, ops, res); err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("admitted %d of 1600, want the limit %d", got, limit)
	}
}

// TestStoreErrorIsNotSentAgain: a batch that failclosed answers by its
// on_store_error (deny) refuses the request in one call: a second would
// wait out the store's budget again for the same answer.
func TestStoreErrorIsNotSentAgain(t *testing.T) {
	sh := shared(t)
	fc, err := failclosed.New(sh, failclosed.Options{FailureThreshold: 1 << 30, NoBackgroundProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	st := New(fc, Options{})
	sh.fail.Store(true)
	op := hourly(1, 100, 20)
	op.OnError = rules.FailClosed
	if ok, res := take(t, st, t0, op); ok || !res[0].StoreError {
		t.Fatalf("admitted %v, result %+v: want refused by on_store_error", ok, res[0])
	}
	if calls, s := sh.calls.Load(), st.Stats(); calls != 1 || s.Retries != 0 {
		t.Errorf("%d calls, stats %+v: want one call and no retry", calls, s)
	}
}

// TestFewerUnitsAfterAReload: a reload that lowers a rule's units caps
// what the node holds and its next lease at the new units, so the bound
// (nodes × units) holds from the next request.
func TestFewerUnitsAfterAReload(t *testing.T) {
	sh := shared(t)
	st := New(sh, Options{})
	take(t, st, t0, hourly(1, 1_000_000, 100)) // 99 held
	take(t, st, t0, hourly(1, 1_000_000, 10))
	op := hourly(1, 1_000_000, 10)
	l := st.tables[maphash.Comparable(st.seed, op.Key)&(shards-1)].m[op.Key]
	if l.left > 10 || l.size > 10 {
		t.Errorf("after the reload the node holds %d units, its lease is %d: want both at most 10", l.left, l.size)
	}
}
