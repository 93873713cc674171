// Package leasestore is a rules.Store in front of a shared one (Redis)
// that answers a hot key's ops on this node from units it leased ahead
// (docs/policy.md, "Budget leases"; behaviour/budgetlease compiles the
// rule's budget_lease { } into Op.LeaseUnits). Without it, a global or
// route limit sends every request of the fleet to one Redis key, one slot
// of one master, one call a request. With it, a node takes up to Units of
// the rule's budget in one call and spends them on its own requests, so a
// hot key costs the shared store about one call per Units requests.
//
// How a leased op is answered, per key on this node:
//   - the node holds units (taken less than Options.Hold ago) of at least
//     the op's cost: the op is answered here, Allowed, and the units are
//     reserved; they are spent if the call's request is not refused (all
//     or nothing, as any store's ops) and given back to the lease if it is;
//   - else, or when what is held has fallen under half the lease's size
//     and no lease call is in flight for the key, the op goes to the
//     shared store with a cost of the lease's size (a batch): allowed, the
//     units beyond the op's own cost are held for Hold;
//   - the lease's size is Units, and shrinks to half the shared store's
//     Remaining when that is less (at least 1), so that near the limit the
//     node takes single units, one call a request, and decides exactly.
//
// A batch the shared store refuses while the request could have had its
// own cost is sent again, in a second call, at the op's own cost, when
// that call's other ops allow it (no op that consumes whatever the
// outcome: Attempts, OpAdd, OpRefund, OpReset): so a lease never refuses
// a request the shared store alone would have admitted. A dry-run op
// (Enforce false) is never leased, so that its would-refuse stays exact;
// nor is an op with a key-rotation twin (Op.Twin).
//
// The error bound (docs/policy.md, "Budget leases"): every unit a node
// admits was taken from the shared store first, so over the life of a
// counter the fleet never admits more than the rule does. In time, units
// taken before an interval may be spent in it: over any interval the
// fleet admits at most the rule's own admissions plus nodes × Units. Units
// a node does not spend within Hold are lost to its requests: at most
// nodes × Units per Hold, on nodes whose traffic on the key stops.
package leasestore

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// DefaultHold is how long a node spends units it leased when
// Options.Hold is 0: one second, long enough for a hot key's leases to be
// spent many times over, short enough that a reload's new limit, or the
// units of a node whose traffic moved, apply within a second.
const DefaultHold = time.Second

// DefaultMaxLeases is the number of keys a Store leases on at once when
// Options.MaxLeases is 0. A route-keyed rule has a key per path: past the
// bound, a new key's ops go to the shared store as they are.
const DefaultMaxLeases = 4096

// shards is the number of lease tables, each with its own lock.
const shards = 64

// Options configures a Store. The zero value works.
type Options struct {
	// Hold is how long leased units may be spent after the call that took
	// them; 0 is DefaultHold.
	Hold time.Duration
	// MaxLeases bounds the keys leased on at once; 0 is DefaultMaxLeases.
	MaxLeases int
}

// Stats counts what a Store did with leased ops (Op.LeaseUnits > 0)
// since it was made.
type Stats struct {
	// Local is the ops answered from held units, with no call.
	Local uint64
	// Batches is the ops sent with a lease's size as their cost.
	Batches uint64
	// Retries is the calls sent again at the ops' own cost after a batch
	// was refused.
	Retries uint64
	// Passed is the leased ops sent as they were: near the limit, while
	// another lease call was in flight, or past MaxLeases.
	Passed uint64
}

// Store answers leased ops (Op.LeaseUnits) from units held on this node
// and sends the rest to its inner store. It is safe for concurrent use.
type Store struct {
	inner    rules.Store
	holdUS   int64
	perShard int
	seed     maphash.Seed
	tables   [shards]table
	calls    sync.Pool // *call
	local    atomic.Uint64
	batches  atomic.Uint64
	retries  atomic.Uint64
	passed   atomic.Uint64
}

// table is one shard of the leases, by counter key.
type table struct {
	mu sync.Mutex
	m  map[rules.Key]*lease
}

// lease is what a node holds of one key's budget. Its fields are guarded
// by its table's mutex.
type lease struct {
	left      int64         // units held, not reserved
	untilUS   int64         // held units expire at this instant (µs)
	size      int64         // the lease's size: Units, or less near the limit
	remaining int64         // the shared store's Remaining at its last answer
	reset     time.Duration // and its ResetAfter
	inFlight  bool          // a batch for the key is in a call
}

// New returns a Store in front of inner.
func New(inner rules.Store, o Options) *Store {
	hold := o.Hold
	if hold <= 0 {
		hold = DefaultHold
	}
	maxLeases := o.MaxLeases
	if maxLeases <= 0 {
		maxLeases = DefaultMaxLeases
	}
	s := &Store{inner: inner, holdUS: hold.Microseconds(), perShard: max(maxLeases/shards, 1), seed: maphash.MakeSeed()}
	for i := range s.tables {
		s.tables[i].m = make(map[rules.Key]*lease)
	}
	s.calls.New = func() any { return new(call) }
	return s
}

// Stats returns the Store's counts so far.
func (s *Store) Stats() Stats {
	return Stats{Local: s.local.Load(), Batches: s.batches.Load(), Retries: s.retries.Load(), Passed: s.passed.Load()}
}

// Close closes the inner store.
func (s *Store) Close() error { return s.inner.Close() }

// Take decides ops at now, as the inner store would (rules.Store's
// contract), answering leased ops from held units where it can and
// sending the others in one call, or two when a refused batch is sent
// again at its own cost (the package doc). A call with no leased op goes
// to the inner store untouched. Its error is the inner store's (nothing
// held is spent then) or rules.CheckTake's.
func (s *Store) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	if !anyLeased(ops) {
		return s.inner.Take(ctx, now, ops, res)
	}
	if err := rules.CheckTake(ops, res); err != nil {
		return err
	}
	c := s.calls.Get().(*call)
	defer s.calls.Put(c)
	nowUS := now.UnixMicro()
	if err := s.takeOnce(ctx, now, nowUS, c, ops, res, true); err != nil {
		return err
	}
	if !c.retry {
		return nil
	}
	s.retries.Add(1)
	return s.takeOnce(ctx, now, nowUS, c, ops, res, false)
}

// anyLeased reports whether an op of ops may be leased.
func anyLeased(ops []rules.Op) bool {
	for i := range ops {
		if ops[i].LeaseUnits > 0 {
			return true
		}
	}
	return false
}

// call is one Take's working state, pooled.
type call struct {
	plan  []step
	ops   []rules.Op     // what goes to the inner store
	res   []rules.Result // and its answers
	retry bool           // a refused batch is to be sent again at its own cost
}

// step is what takeOnce does with ops[i].
type step struct {
	l     *lease // nil: not leased
	how   uint8
	sent  int   // the op's index in call.ops, -1 when answered here
	units int64 // a batch's cost, a local answer's reservation
}

// The ways an op is answered.
const (
	pass  uint8 = iota // sent as it is
	local              // answered from held units
	batch              // sent with the lease's size as its cost
)

// takeOnce answers ops into res: it plans each op (plan), sends what is not
// answered here in one inner call, and settles the leases by the call's
// outcome. batching false sends no batch (the retry). It sets c.retry when
// a refused batch should be sent again at its own cost.
func (s *Store) takeOnce(ctx context.Context, now time.Time, nowUS int64, c *call, ops []rules.Op, res []rules.Result, batching bool) error {
	c.plan, c.ops, c.retry = c.plan[:0], c.ops[:0], false
	for i := range ops {
		st := s.plan(nowUS, ops, i, batching, &res[i])
		st.sent = -1
		if st.how != local {
			st.sent = len(c.ops)
			c.ops = append(c.ops, ops[i])
			if st.how == batch {
				c.ops[st.sent].Cost = st.units
			}
		}
		c.plan = append(c.plan, st)
	}
	if len(c.ops) > 0 {
		if cap(c.res) < len(c.ops) {
			c.res = make([]rules.Result, len(c.ops))
		}
		c.res = c.res[:len(c.ops)]
		if err := s.inner.Take(ctx, now, c.ops, c.res); err != nil {
			s.settle(nowUS, ops, res, c, true, false)
			return err
		}
		for i, st := range c.plan {
			if st.sent >= 0 {
				res[i] = c.res[st.sent]
			}
		}
	}
	s.settle(nowUS, ops, res, c, false, refused(ops, res))
	return nil
}

// refused reports whether the call refuses its request: an enforcing
// OpTake not allowed (rules.Store's contract).
func refused(ops []rules.Op, res []rules.Result) bool {
	for i := range ops {
		if ops[i].Kind == rules.OpTake && ops[i].Enforce && !res[i].Allowed {
			return true
		}
	}
	return false
}

// plan decides how ops[i] is answered and, for a local answer, reserves
// its units and sets *r: allowed, with what the shared store had left at
// its last answer and what this node holds as Remaining.
func (s *Store) plan(nowUS int64, ops []rules.Op, i int, batching bool, r *rules.Result) step {
	op := &ops[i]
	if op.LeaseUnits == 0 || !op.Enforce || op.Twin || op.Attempts ||
		(op.Kind != rules.OpTake && op.Kind != rules.OpPeek) || (i+1 < len(ops) && ops[i+1].Twin) {
		return step{how: pass}
	}
	t := &s.tables[maphash.Comparable(s.seed, op.Key)&(shards-1)]
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.m[op.Key]
	if l == nil {
		if l = s.newLease(t, nowUS, op); l == nil {
			s.passed.Add(1)
			return step{how: pass}
		}
	}
	if nowUS >= l.untilUS {
		l.left = 0 // what was held has expired
	}
	if u := int64(op.LeaseUnits); l.size > u || l.left > u {
		// A reload lowered the rule's units: hold no more than it says.
		l.size, l.left = min(l.size, u), min(l.left, u)
	}
	if l.left >= op.Cost {
		if op.Kind == rules.OpPeek {
			s.local.Add(1)
			*r = rules.Result{Allowed: true, Remaining: l.remaining + l.left - op.Cost, ResetAfter: l.reset}
			return step{l: l, how: local}
		}
		l.left -= op.Cost
		st := step{l: l, how: local, units: op.Cost}
		if batching && !l.inFlight && l.left < l.size/2 && op.Cost < l.size {
			// Top the lease up while it still answers: the op goes as a
			// batch, and the units reserved go back to the lease.
			l.left += op.Cost
			l.inFlight = true
			s.batches.Add(1)
			return step{l: l, how: batch, units: l.size - l.left}
		}
		s.local.Add(1)
		*r = rules.Result{Allowed: true, Remaining: l.remaining + l.left, ResetAfter: l.reset}
		return st
	}
	if batching && op.Kind == rules.OpTake && !l.inFlight && op.Cost < l.size {
		l.inFlight = true
		s.batches.Add(1)
		return step{l: l, how: batch, units: max(l.size-l.left, op.Cost)}
	}
	s.passed.Add(1)
	return step{l: l, how: pass}
}

// newLease adds a lease for op's key to t, its table, or returns nil when
// t holds its share of MaxLeases in leases that are live. t's mutex is
// held.
func (s *Store) newLease(t *table, nowUS int64, op *rules.Op) *lease {
	if len(t.m) >= s.perShard {
		for k, l := range t.m {
			if nowUS >= l.untilUS && !l.inFlight {
				delete(t.m, k)
			}
		}
		if len(t.m) >= s.perShard {
			return nil
		}
	}
	l := &lease{size: int64(op.LeaseUnits)}
	t.m[op.Key] = l
	return l
}

// settle finishes c's plan once the call's outcome is known: failed (the
// inner store could not decide), or refused (no op consumed) or not. A
// local answer's reservation is spent, or given back; an allowed batch's
// units beyond its op's cost are held; each lease's size follows the
// shared store's Remaining. It sets c.retry when the call should be sent
// again without batches (retryable).
func (s *Store) settle(nowUS int64, ops []rules.Op, res []rules.Result, c *call, failed, refusedCall bool) {
	for i, st := range c.plan {
		if st.l == nil {
			continue
		}
		t := &s.tables[maphash.Comparable(s.seed, ops[i].Key)&(shards-1)]
		t.mu.Lock()
		l, r := st.l, &res[i]
		switch {
		case st.how == local:
			if failed || refusedCall {
				// Not spent: the request was not admitted. Capped at the
				// lease's units, so that what a node holds stays within
				// the error bound whatever expired or refilled meanwhile.
				l.left = min(l.left+st.units, int64(ops[i].LeaseUnits))
			}
		case failed:
			l.inFlight = false
		case st.how == batch && r.Allowed && !r.StoreError && !refusedCall:
			l.inFlight = false
			if nowUS >= l.untilUS {
				l.left = 0
			}
			l.left += st.units - ops[i].Cost
			l.untilUS = nowUS + s.holdUS
			l.remaining, l.reset = r.Remaining, r.ResetAfter
			l.size = sizeFor(int64(ops[i].LeaseUnits), r.Remaining)
			r.Remaining += l.left // what this node holds is its clients' too
		case st.how == batch:
			// Refused by another op (it consumed nothing), or by the
			// shared store: fewer units than the lease's size are left.
			l.inFlight = false
			if !r.Allowed && !r.StoreError {
				l.size = 1
			}
		case r.Allowed && !r.StoreError:
			l.remaining, l.reset = r.Remaining, r.ResetAfter
			l.size = sizeFor(int64(ops[i].LeaseUnits), r.Remaining)
		}
		t.mu.Unlock()
	}
	c.retry = !failed && refusedCall && retryable(c, ops, res)
}

// retryable reports whether a refused call may be sent again without
// batches: every op that refused it was a batch of more than its own cost
// that the store decided (not a failure-handling store's on_store_error),
// and no op changes its counter whatever the outcome (consumesAnyway), so
// that the second call decides the request as a call without leases would
// have.
func retryable(c *call, ops []rules.Op, res []rules.Result) bool {
	batched := false
	for i, st := range c.plan {
		op := &ops[i]
		if consumesAnyway(op) {
			return false
		}
		if op.Kind != rules.OpTake || !op.Enforce || res[i].Allowed {
			continue
		}
		if res[i].StoreError {
			return false // the store could not decide: a second call would not either
		}
		if st.how != batch || st.units <= op.Cost {
			return false
		}
		batched = true
	}
	return batched
}

// consumesAnyway reports whether op changes its counter whether or not the
// call refuses its request, so that a call with it cannot be sent twice.
func consumesAnyway(op *rules.Op) bool {
	return op.Attempts || op.Kind == rules.OpAdd || op.Kind == rules.OpRefund || op.Kind == rules.OpReset
}

// sizeFor is a lease's size when the shared store has remaining units left
// after its last answer: units, or half of remaining when that is less, at
// least 1.
func sizeFor(units, remaining int64) int64 {
	return min(units, max(remaining/2, 1))
}

var _ rules.Store = (*Store)(nil)
