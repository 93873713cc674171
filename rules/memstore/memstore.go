package memstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/counter"
)

const (
	// DefaultMaxKeys is the shared budget's bound when Options.MaxKeys is 0.
	DefaultMaxKeys = 100_000
	// DefaultShards is the shard count when Options.Shards is 0.
	DefaultShards = 64
	// MaxShards bounds Options.Shards: Take marks the shards it locks in a
	// fixed-size bitmap on its stack.
	MaxShards = 1024
	// DefaultSweepInterval is how often the sweeper runs when
	// Options.SweepInterval is 0.
	DefaultSweepInterval = time.Minute

	// cachedOps is how many ops of one call keep their shard and entry on
	// the stack between the passes; more are looked up again.
	cachedOps = 16
	// sweepBatch bounds the entries the sweeper looks at per lock hold, so
	// requests on a shard wait at most one batch.
	sweepBatch = 256
	// maxEvictionsPerKey bounds the keys one new key evicts: one normally,
	// two while a budget is above its bound (a reload lowered max_keys), so
	// that it shrinks back.
	maxEvictionsPerKey = 2
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// MaxKeys bounds the shared budget: the keys of every op whose
	// rules.Op.MaxKeys is 0, together (DefaultMaxKeys when 0). An op with
	// MaxKeys set is bounded by its rule's own budget instead (the package
	// doc's "Key budgets"); the Engine always sets it.
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to a
	// power of two, at most MaxShards (DefaultShards when 0).
	Shards int
	// SweepInterval is how often the background sweeper drops expired
	// entries (DefaultSweepInterval when 0; negative: no sweeper, expired
	// entries then only read as fresh and wait to be reclaimed by a new key
	// of their budget).
	SweepInterval time.Duration
	// Clock tells the sweeper the time (rules.SystemClock when nil). Take
	// never reads it: each call passes its own now.
	Clock rules.Clock
}

// Store is the in-memory rules.Store. Create one with New.
type Store struct {
	seed   maphash.Seed
	mask   uint64
	shards []shard
	clock  rules.Clock
	shared *budget // ops with MaxKeys 0
	// maxKeys is Options.MaxKeys: the bound of a marker budget whose ops
	// carry no MaxKeys.
	maxKeys int32

	budgetsMu sync.Mutex
	budgets   map[budgetID]*budget // ops with MaxKeys > 0, and markers

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{} // nil without a sweeper
}

var _ rules.Store = (*Store)(nil)

// shardState is one lock and the entries it guards.
type shardState struct {
	mu sync.Mutex
	m  map[rules.Key]*entry
	// drops counts the entries removed from m (forget, move), so that a
	// Take reads again an entry it read earlier in the call only when one
	// was: a map lookup an op spared on the hot path.
	drops uint32
	// touched lists the entries the Take holding mu has touched (their
	// touched flag set): nothing evicts or reclaims such an entry, so a
	// call never loses its own writes. unlock clears the flags before it
	// lets go of mu, so whoever else takes mu (the sweeper, a reclaim from
	// another shard, Restore) finds none set. Its array is kept for the
	// next call.
	touched []*entry
	// shared is this shard's part of the shared budget (nil until used);
	// parts[i] is its part of the rule budget (or rule's marker budget)
	// that partIDs[i] names. A part, once made, keeps its place: entries
	// name it by that place (entry.part).
	shared  *part
	partIDs []budgetID
	parts   []*part
	// spare holds up to maxSpare entries a Take dropped because they had
	// become empty, with their Log and Seen arrays, for the next new key
	// of the shard: a key that empties and comes back (a concurrency
	// rule's set of leases, docs/policy.md, "Concurrency limits") then
	// allocates nothing.
	spare []*entry
}

// maxSpare bounds a shard's spare entries.
const maxSpare = 8

// shard is a shardState padded to its own cache lines, so that
// neighbours' locks do not contend through false sharing.
type shard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

// entry is one key's state, when it has decayed to empty, and its place in
// its budget's part of its shard: the recency list and the expiry heap.
//
// The state is held compact, not as a rules.State (80 B): the scalar
// fields in place, and the arrays only sliding_log and distinct use behind
// one pointer, nil for a key that never had one. Its part is named by its
// place in the shard (1 byte, not an 8-byte pointer), its network by its
// slot in the budget's network counts (2 bytes), and what the call holding
// the shard touched by one bit beside the algorithm (not a 4-byte
// generation). An entry is then 96 B on amd64, the 96 B size class (112 B
// with a part pointer and a generation; 152 B, the 160 B class, with a
// rules.State in place): with its map slot and heap slot, about 190 B a
// tracked GCRA key at a million keys (docs/memory-store.md, "What a key
// costs"). TestEntryFitsItsSizeClass holds it there. load and store
// convert to and from rules.State around counter.Check and counter.Settle.
type entry struct {
	at, n, before int64   // rules.State's At, N and Prev
	arr           *arrays // rules.State's Log and Seen; nil until a key has one
	expiresAt     int64   // µs since the epoch
	// heapAt orders the expiry heap: never later than expiresAt (a take
	// that extends expiresAt leaves it, so the hot path never touches the
	// heap; it is brought up to date when it reaches the top), except
	// math.MaxInt64 while the call holding the shard rewrites an expired
	// entry (shard.expired).
	heapAt     int64
	key        rules.Key
	prev, next *entry // towards the most and the least recently used
	idx        int32  // position in its part's heap
	// net is the slot of the network that made the key in its budget's
	// network counts (netSlot), 0 when it counts to none (the package
	// doc's "Network shares").
	net uint16
	// part is its part of the shard (shard.partAt): 0 the shared one, i
	// parts[i-1], partByKey the part of the rule ID key starts with.
	part uint8
	// bits holds rules.State's Alg (algMask) and touchedBit: the call
	// holding the shard has touched it (shard.touched lists it); nothing
	// evicts or reclaims it.
	bits uint8
}

const (
	algMask    = 0x0f
	touchedBit = 0x80
)

// The algorithms' ids fit in algMask.
var _ [algMask + 1 - int(counter.NumAlgorithms)]struct{}

func (e *entry) alg() rules.Algorithm { return rules.Algorithm(e.bits & algMask) }

func (e *entry) setAlg(a rules.Algorithm) { e.bits = e.bits&^algMask | uint8(a)&algMask }

func (e *entry) touched() bool { return e.bits&touchedBit != 0 }

// partByKey is entry.part for a part at parts[partByKey-1] or later,
// beyond what 8 bits name: it is found by its rule ID, the first 8 bytes
// of the entry's key, and, of the rule's two budgets (its counters' and
// its markers'), by the one whose heap holds the entry at its place (a
// shard has that many parts only after as many rule budgets had keys in
// it; a policy has a few dozen rules, each with at most two).
const partByKey = math.MaxUint8

// budgetID names a budget other than the shared one: its rule's ID (the
// first 8 bytes of its keys) and whether it is the rule's marker budget
// (the package doc's "Markers").
type budgetID struct {
	rule    uint64
	markers bool
}

// partIndex is entry.part for the part at parts[i].
func partIndex(i int) uint8 {
	if i >= partByKey-1 {
		return partByKey
	}
	return uint8(i + 1)
}

// partAt returns e's part. sh holds e.
func (sh *shardState) partAt(e *entry) *part {
	switch i := e.part; {
	case i == 0:
		return sh.shared
	case i < partByKey:
		return sh.parts[i-1]
	}
	id := ruleID(&e.key)
	for i := partByKey - 1; i < len(sh.partIDs); i++ {
		if p := sh.parts[i]; sh.partIDs[i].rule == id && int(e.idx) < len(p.heap) && p.heap[e.idx] == e {
			return p
		}
	}
	panic("memstore: an entry's rule budget has no part in its shard")
}

// mark flags e as touched by the call holding sh, for unlock to clear.
func (sh *shardState) mark(e *entry) {
	if !e.touched() {
		e.bits |= touchedBit
		sh.touched = append(sh.touched, e)
	}
}

// unmark clears the flags of the entries the call holding sh touched.
func (sh *shardState) unmark() {
	for i, e := range sh.touched {
		e.bits &^= touchedBit
		sh.touched[i] = nil // a dropped entry is not kept alive by the list
	}
	sh.touched = sh.touched[:0]
}

// arrays are the Log and Seen of a key's rules.State, apart from its entry
// so that the keys of the other algorithms do not carry them. They stay
// with the entry through expiry and reuse as a spare, so a log's or a
// distinct set's array is allocated once per entry.
type arrays struct {
	log  []int64
	seen []rules.Seen
}

// load returns e's state as a rules.State, sharing e's arrays.
func (e *entry) load() rules.State {
	st := rules.State{Alg: e.alg(), At: e.at, N: e.n, Prev: e.before}
	if e.arr != nil {
		st.Log, st.Seen = e.arr.log, e.arr.seen
	}
	return st
}

// store sets e's state to st, keeping st's arrays (allocating the arrays
// holder the first time st has one).
func (e *entry) store(st *rules.State) {
	e.at, e.n, e.before = st.At, st.N, st.Prev
	e.setAlg(st.Alg)
	switch {
	case e.arr != nil:
		e.arr.log, e.arr.seen = st.Log, st.Seen
	case st.Log != nil || st.Seen != nil:
		e.arr = &arrays{log: st.Log, seen: st.Seen}
	}
}

// clear sets e's state to the fresh state of every algorithm, keeping its
// arrays, emptied, for reuse (rules.State.Cleared).
func (e *entry) clear() {
	e.at, e.n, e.before = 0, 0, 0
	e.setAlg(0)
	if e.arr != nil {
		e.arr.log, e.arr.seen = e.arr.log[:0], e.arr.seen[:0]
	}
}

// partState is one budget's entries in one shard.
type partState struct {
	b *budget
	// markers is b.markers, here so that a take of an existing key reads
	// no line of its budget, which other cores write.
	markers    bool
	head, tail *entry   // most and least recently used
	heap       []*entry // min-heap on heapAt
	// evicted counts live keys evicted to make room (non-sensitive ops);
	// full counts new keys of sensitive ops answered by OnError; netFull
	// new keys refused because their network held its share. Per part,
	// under the shard's lock, so that a flood writes no shared line;
	// Budgets sums them.
	evicted, full, netFull uint64
}

// part is a partState padded to its own cache lines: every touch of a key
// writes its part's head, and parts of neighbouring shards, allocated side
// by side, would otherwise share a line between cores.
type part struct {
	partState
	_ [128 - unsafe.Sizeof(partState{})%128]byte
}

// newPart returns a part of b.
func newPart(b *budget) *part { return &part{partState: partState{b: b, markers: b.markers}} }

// budget is the key budget of one rule (or the shared one, or a rule's
// markers), across shards.
type budget struct {
	id     [8]byte
	shared bool
	// markers: the rule's marker budget, which never evicts (the package
	// doc's "Markers").
	markers bool
	max     atomic.Int64 // the newest op's MaxKeys
	n       atomic.Int64 // keys held, across shards
	// nets counts the keys each network holds (by netSlot), across
	// shards; nil until a key with a network share is made.
	nets atomic.Pointer[netCounts]
	// next holds, per network slot, a time before which none of its keys
	// decays (nextNet); nil until a network reaches its share.
	next atomic.Pointer[netNext]

	// hint: no entry of the budget has a heapAt before it, so a search of
	// every shard for decayed state is pointless until then (0: unknown).
	// Lowered on every insert and earlier expiry; raised only by a search
	// that saw every shard with no lowering meanwhile (ver, scanning).
	hint     atomic.Int64
	scanning atomic.Int64
	hintMu   sync.Mutex
	ver      uint64 // guarded by hintMu
}

// New returns a Store configured by opts and starts its sweeper.
func New(opts Options) (*Store, error) {
	switch {
	case opts.MaxKeys < 0:
		return nil, fmt.Errorf("memstore: max keys %d is negative", opts.MaxKeys)
	case opts.Shards < 0 || opts.Shards > MaxShards:
		return nil, fmt.Errorf("memstore: shards %d is not between 0 and %d", opts.Shards, MaxShards)
	}
	if opts.MaxKeys == 0 {
		opts.MaxKeys = DefaultMaxKeys
	}
	if opts.Shards == 0 {
		opts.Shards = DefaultShards
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.Clock == nil {
		opts.Clock = rules.SystemClock{}
	}
	n := 1 << bits.Len(uint(opts.Shards-1)) // next power of two
	s := &Store{
		seed:    maphash.MakeSeed(),
		mask:    uint64(n - 1),
		shards:  make([]shard, n),
		clock:   opts.Clock,
		shared:  &budget{shared: true},
		maxKeys: int32(min(opts.MaxKeys, math.MaxInt32)),
		budgets: make(map[budgetID]*budget),
		stop:    make(chan struct{}),
	}
	s.shared.max.Store(int64(opts.MaxKeys))
	for i := range s.shards {
		s.shards[i].m = make(map[rules.Key]*entry)
	}
	if opts.SweepInterval > 0 {
		s.done = make(chan struct{})
		go s.sweepLoop(opts.SweepInterval)
	}
	return s, nil
}

func (s *Store) shardOf(k *rules.Key) uint16 {
	return uint16(maphash.Bytes(s.seed, k[:]) & s.mask)
}

// shardSet is a bitmap of shard indexes; iterating it yields them in
// ascending order, the lock order, each once. lo and hi bound the words in
// use, so a call touching one shard scans one word.
type shardSet struct {
	words  [MaxShards / 64]uint64
	lo, hi uint16 // words[lo:hi] may be non-zero
}

func (ss *shardSet) add(i uint16) {
	w := i >> 6
	if ss.hi == 0 {
		ss.lo, ss.hi = w, w+1
	} else {
		ss.lo, ss.hi = min(ss.lo, w), max(ss.hi, w+1)
	}
	ss.words[w] |= 1 << (i & 63)
}

func (ss *shardSet) has(i int) bool { return ss.words[i>>6]&(1<<(i&63)) != 0 }

func (s *Store) lock(ss *shardSet) {
	for w := ss.lo; w < ss.hi; w++ {
		for word := ss.words[w]; word != 0; word &= word - 1 {
			s.shards[int(w)<<6|bits.TrailingZeros64(word)].mu.Lock()
		}
	}
}

func (s *Store) unlock(ss *shardSet) {
	for w := ss.lo; w < ss.hi; w++ {
		for word := ss.words[w]; word != 0; word &= word - 1 {
			sh := &s.shards[int(w)<<6|bits.TrailingZeros64(word)]
			sh.unmark()
			sh.mu.Unlock()
		}
	}
}

// Take applies ops at now atomically, as rules.Store specifies. It returns
// an error, having changed nothing, when len(res) != len(ops) or an op fails
// counter.ValidateOp. ctx is not consulted: nothing here blocks but the shard
// locks.
//
// A new key of a Sensitive take or add whose budget is full of live state
// is answered as its OnError says, with StoreError set, and not stored
// (the package doc's "Key budgets").
func (s *Store) Take(_ context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	if err := rules.CheckTake(ops, res); err != nil {
		return err
	}
	nowUS := now.UnixMicro()

	var (
		set   shardSet
		idx   [cachedOps]uint16
		ents  [cachedOps]*entry
		drops [cachedOps]uint32 // the shard's drops when ents[i] was read
		fresh rules.State       // the state of a missing key, read-only in pass 1
		dup   bool              // a key missing in pass 1 comes twice in the call
		twins bool              // a key-secret rotation's call (rules.Op.Twin)
	)
	for i := range ops {
		x := s.shardOf(&ops[i].Key)
		if i < cachedOps {
			idx[i] = x
		}
		set.add(x)
		twins = twins || ops[i].Twin
	}
	s.lock(&set)
	defer s.unlock(&set)
	if twins {
		s.carry(ops, nowUS)
	}

	// Pass 1: decide every op against the state before the call, claim
	// each new key's room in its network's share (a decayed key read in
	// place is made again), and reserve room for the new keys of sensitive
	// and marker ops.
	for i := range ops {
		op := &ops[i]
		x := s.shardIndex(i, &idx, op)
		sh := &s.shards[x]
		e := sh.m[op.Key]
		renewed := false
		if e != nil && nowUS >= e.expiresAt {
			if op.Twin || !sh.inBudgetOf(e, op) {
				// A reload moved its rule to another budget, or a twin's
				// state has decayed: nothing is made again under the
				// previous secret.
				sh.drop(e)
				e = nil
			} else {
				renewed = true
				// Expired: read it as the fresh state it equals (rules
				// tests prove it), in place, keeping the arrays of a log
				// and a distinct set for reuse and the entry's room in its budget (given back in
				// pass 2 if the op leaves it empty).
				e.clear()
			}
		}
		if i < cachedOps {
			ents[i], drops[i] = e, sh.drops
		}
		if e == nil && op.Twin {
			res[i] = twinAnswer // skipped: no key made under the previous secret
			continue
		}
		if e == nil {
			res[i] = rules.Check(&fresh, nowUS, op)
			if j := rider(ops, i); j >= 0 {
				// A distinct key may come twice in one call (the values of
				// one request on one count_distinct key, behaviour/values):
				// the earlier op holds the key's room and its network's
				// claim, or was refused them, and this one rides on it.
				dup = true
				switch {
				case res[j].NetworkFull:
					res[i] = netFullAnswer(op, res[j].RetryAfter)
				case res[j].StoreError && reserves(op):
					res[i] = fullAnswer(op)
				}
				continue
			}
			if claims(op) {
				if ok, wait := s.claim(sh, x, op, nowUS, &set); !ok {
					res[i] = netFullAnswer(op, wait)
					continue
				}
			}
			if reserves(op) && !s.reserve(sh, x, op, nowUS, &set) {
				res[i] = fullAnswer(op)
				if claims(op) {
					b, _, _ := s.partOf(sh, op)
					b.release(netSlot(op.Network))
				}
			}
			continue
		}
		p := sh.touch(e)
		if p.markers != op.Marker {
			s.rehome(sh, e, p, op) // a marker restored from a version 1 snapshot
			p = sh.partAt(e)
		}
		st := e.load()
		res[i] = rules.Check(&st, nowUS, op)
		if renewed && stores(op) {
			if ok, wait := s.renew(sh, x, p, e, op, nowUS, &set); !ok {
				res[i] = netFullAnswer(op, wait) // dropped in pass 2
			}
		}
	}

	// Pass 2: consume per the contract and report the state after.
	refused := rules.Refused(ops, res)
	for i := range ops {
		op := &ops[i]
		x := s.shardIndex(i, &idx, op)
		sh := &s.shards[x]
		var e *entry
		if i < cachedOps {
			e = ents[i]
		} else {
			e = sh.m[op.Key]
		}
		if e == nil && op.Twin {
			continue // skipped in pass 1
		}
		isRider := false
		if e != nil && i < cachedOps && sh.drops != drops[i] && sh.m[op.Key] != e {
			// An earlier op of this call on the same key (a distinct key
			// coming twice) dropped it: this one holds no room of its own.
			e, isRider = nil, true
		}
		if e == nil && dup && !isRider {
			// An earlier op of this call may have stored the key: this one
			// settles on what it wrote (and holds no room of its own).
			e = sh.m[op.Key]
			isRider = e == nil && rider(ops, i) >= 0
		}
		if e != nil {
			if res[i].NetworkFull {
				sh.drop(e) // decayed, and op's network may not make it again
				sh.keepSpare(e)
				continue
			}
			if refused && attemptsOnly(op) && e.expiresAt <= nowUS {
				// Decayed, read in place as the fresh state it equals: a
				// new key, which an attempt in a refused call does not
				// make (attemptsOnly).
				sh.drop(e)
				sh.keepSpare(e)
				settleFresh(nowUS, op, &res[i])
				continue
			}
			st := e.load()
			ttl := rules.Settle(&st, nowUS, op, refused, &res[i])
			e.store(&st)
			if ttl > 0 {
				sh.setExpiry(e, nowUS+ttl)
			} else {
				sh.drop(e) // empty: a missing key reads the same
				sh.keepSpare(e)
			}
			continue
		}
		if res[i].StoreError || res[i].NetworkFull {
			continue // its budget, or its network's share, is full: not stored
		}
		if refused && attemptsOnly(op) {
			// An attempt in a refused call makes no new key: the room and
			// the network's claim pass 1 took for it go back.
			if !isRider {
				s.unreserve(sh, op)
			}
			settleFresh(nowUS, op, &res[i])
			continue
		}
		var st rules.State
		spare := sh.takeSpare()
		if spare != nil {
			st = spare.load() // cleared, with its arrays, for Settle to fill
		}
		ttl := rules.Settle(&st, nowUS, op, refused, &res[i])
		if isRider {
			// It holds no room nor claim of its own (pass 1): the op it
			// rode on stored nothing, so it takes them now to store, and
			// gives back nothing otherwise.
			if ttl > 0 && s.roomNow(sh, x, op, nowUS, &set) {
				s.insert(sh, x, op, &st, nowUS+ttl, nowUS, &set, spare)
				continue
			}
			sh.keepSpare(spare)
			continue
		}
		if ttl > 0 {
			s.insert(sh, x, op, &st, nowUS+ttl, nowUS, &set, spare)
			continue
		}
		s.unreserve(sh, op)
		sh.keepSpare(spare)
	}
	return nil
}

// unreserve gives back what pass 1 took for a new key of op that is not
// stored: a sensitive or marker op's reserved room, and its network's
// claim. sh is locked.
func (s *Store) unreserve(sh *shard, op *rules.Op) {
	if !reserves(op) && !claims(op) {
		return
	}
	b, _, _ := s.partOf(sh, op)
	if reserves(op) {
		b.n.Add(-1) // the room pass 1 reserved
	}
	if claims(op) {
		b.release(netSlot(op.Network)) // and the network's
	}
}

// attemptsOnly reports whether op consumes only because it counts
// attempts: an OpTake with Attempts. In a refused call such an op charges
// a key that exists but makes no new one (rules.Store's contract): an
// attacker refused by one limit of the call (its per-IP limit) would
// otherwise make a key of the attempts rule with each fresh phone or
// account it sends, filling that rule's budget, and its network's share of
// it, for nothing (a tester's finding F1 on issue 24).
func attemptsOnly(op *rules.Op) bool { return op.Kind == rules.OpTake && op.Attempts }

// settleFresh fills res, op's result, as counter.Settle reports a key left
// fresh (nothing consumed: the op is settled as a take that does not
// count attempts, in a refused call). It stores nothing.
func settleFresh(nowUS int64, op *rules.Op, res *rules.Result) {
	o := *op
	o.Attempts = false
	var st rules.State
	rules.Settle(&st, nowUS, &o, true, res)
}

// twinAnswer is the result of a twin op whose key holds no state
// (rules.Op.Twin): it changes nothing in the Engine's combination.
var twinAnswer = rules.Result{Allowed: true, Remaining: math.MaxInt64}

// carry moves, for each twin op of ops (rules.Op.Twin) but one counting
// members (a Distinct one, counter.Spec.Members), the live state of its
// key to the key of the op before it when that holds none (or only
// decayed state), so that a counter, a ban or a
// lockout written under the previous key secret goes on under the
// secret, whole and exactly, and the twin's key is gone: in one store of
// one node, nothing else reads it. The entry itself moves (its state, its
// expiry, its room in its budget and its network's count), between shards
// when the two keys' differ. Every shard of ops is locked.
func (s *Store) carry(ops []rules.Op, nowUS int64) {
	for i := 1; i < len(ops); i++ {
		t := &ops[i]
		if !t.Twin || t.Algorithm.Spec().Members {
			continue
		}
		from := &s.shards[s.shardOf(&t.Key)]
		e := from.m[t.Key]
		if e == nil || nowUS >= e.expiresAt {
			continue // nothing live to carry (pass 1 drops a decayed one)
		}
		op := &ops[i-1]
		to := &s.shards[s.shardOf(&op.Key)]
		if d := to.m[op.Key]; d != nil {
			if nowUS < d.expiresAt {
				continue // both live: pass 1 reads both
			}
			to.drop(d) // decayed: it reads as fresh, and the carried state replaces it
			to.keepSpare(d)
		}
		s.move(from, to, e, op)
	}
}

// move makes e, held by from under a twin's key, op's key's entry in to,
// as rehome moves one between budgets. from and to are locked.
func (s *Store) move(from, to *shard, e *entry, op *rules.Op) {
	p := from.partAt(e)
	delete(from.m, e.key)
	from.drops++
	p.unlinkList(e)
	p.remove(int(e.idx))
	b, q, qi := s.partOf(to, op)
	if b != p.b {
		p.b.n.Add(-1)
		b.n.Add(1)
		if e.net != 0 {
			p.b.release(e.net)
			b.counts()[e.net].Add(1) // moved, not made: counted without a bound
		}
	}
	e.key = op.Key
	e.part = qi
	to.m[op.Key] = e
	q.pushFront(e)
	q.push(e)
	b.lower(e.heapAt)
}

// rider returns, for an op i counting members (a Distinct one:
// counter.Spec.Members) on a key missing from the store, the
// index of an earlier op of the call on the same key, which holds the
// key's room and network claim for both (pass 1), or -1.
func rider(ops []rules.Op, i int) int {
	if i == 0 || !ops[i].Algorithm.Spec().Members {
		return -1
	}
	return keyBefore(ops, i)
}

// roomNow takes, in pass 2, what pass 1 takes for a new key of op (its
// network's claim, and a sensitive or marker op's reserved room), for a
// rider whose earlier op stored nothing; false, with nothing held, when
// either is refused. A rider stores only in a call that consumes, where
// the op it rode on stored too, so this is the rare path.
func (s *Store) roomNow(sh *shard, x uint16, op *rules.Op, nowUS int64, held *shardSet) bool {
	if claims(op) {
		if ok, _ := s.claim(sh, x, op, nowUS, held); !ok {
			return false
		}
	}
	if reserves(op) && !s.reserve(sh, x, op, nowUS, held) {
		if claims(op) {
			b, _, _ := s.partOf(sh, op)
			b.release(netSlot(op.Network))
		}
		return false
	}
	return true
}

// keyBefore returns the index of the last op before i in ops with i's
// key, or -1. Only a Distinct op on a key the store does not hold asks,
// and a call holds a few ops, so the scan costs the common call nothing.
func keyBefore(ops []rules.Op, i int) int {
	for j := i - 1; j >= 0; j-- {
		if ops[j].Key == ops[i].Key {
			return j
		}
	}
	return -1
}

// keepSpare keeps e, just dropped from sh, as a spare entry when there is
// room. sh is locked.
func (sh *shard) keepSpare(e *entry) {
	if e == nil || len(sh.spare) >= maxSpare {
		return
	}
	if sh.spare == nil {
		sh.spare = make([]*entry, 0, maxSpare) // once per shard
	}
	e.clear()
	*e = entry{arr: e.arr}
	sh.spare = append(sh.spare, e)
}

// takeSpare returns a spare entry of sh, or nil. sh is locked.
func (sh *shard) takeSpare() *entry {
	n := len(sh.spare)
	if n == 0 {
		return nil
	}
	e := sh.spare[n-1]
	sh.spare[n-1] = nil
	sh.spare = sh.spare[:n-1]
	return e
}

// shardIndex returns op i's shard, from the stack cache when it holds it.
func (s *Store) shardIndex(i int, idx *[cachedOps]uint16, op *rules.Op) uint16 {
	if i < cachedOps {
		return idx[i]
	}
	return s.shardOf(&op.Key)
}

// reserves reports whether a new key of op reserves its room in pass 1: a
// sensitive or marker op that may store state (only a take or an add
// leaves a fresh state non-empty). Neither evicts live state.
func reserves(op *rules.Op) bool {
	return (op.Sensitive || op.Marker) && stores(op)
}

// stores reports whether op may store state for a missing key: only a
// take or an add leaves a fresh state non-empty.
func stores(op *rules.Op) bool { return op.Kind == rules.OpTake || op.Kind == rules.OpAdd }

// claims reports whether a new key of op counts to its network's share in
// pass 1 (the package doc's "Network shares").
func claims(op *rules.Op) bool { return op.NetworkKeys > 0 && op.Network != 0 && stores(op) }

// netFullAnswer is a new key's result when its network holds its share of
// the budget: refused, for that network only, by the op's own rule, for
// wait (claim's: until the earliest of the network's keys decays); the
// op's period when that is unknown (0).
func netFullAnswer(op *rules.Op, wait time.Duration) rules.Result {
	if wait <= 0 {
		wait = rules.DurationUS(op.PeriodUS)
	}
	return rules.Result{NetworkFull: true, RetryAfter: wait, ResetAfter: wait}
}

// inShared reports whether op's keys count in the shared budget: an op
// without MaxKeys that is not a marker's.
func inShared(op *rules.Op) bool { return op.MaxKeys <= 0 && !op.Marker }

// inBudgetOf reports whether e, held by sh, is in the budget op's keys
// count in now: a reload can move a rule between its own budget and the
// shared one.
func (sh *shard) inBudgetOf(e *entry, op *rules.Op) bool {
	if e.part == 0 || inShared(op) {
		return (e.part == 0) == inShared(op)
	}
	return sh.partAt(e).markers == op.Marker
}

// fullAnswer is a new key's result when its sensitive budget is full of
// live state: the op's OnError answer, as a failure-handling store gives
// it. "local" refuses: this is the local store, there is no other bucket.
func fullAnswer(op *rules.Op) rules.Result {
	if op.OnError == rules.FailOpen {
		return rules.Result{Allowed: true, StoreError: true}
	}
	return rules.Result{StoreError: true}
}

// ruleID reads the rule ID a key starts with.
func ruleID(k *rules.Key) uint64 { return binary.LittleEndian.Uint64(k[:8]) }

// budgetOf returns op's budget, creating it on first sight, and records
// the op's MaxKeys as its bound.
func (s *Store) budgetOf(op *rules.Op) *budget {
	if inShared(op) {
		return s.shared
	}
	id := budgetID{rule: ruleID(&op.Key), markers: op.Marker}
	s.budgetsMu.Lock()
	b := s.budgets[id]
	if b == nil {
		b = &budget{markers: op.Marker}
		copy(b.id[:], op.Key[:8])
		s.budgets[id] = b
	}
	s.budgetsMu.Unlock()
	b.setMax(s.boundOf(op))
	return b
}

// boundOf is the bound op gives its budget: its MaxKeys, or, for a
// marker op without one, Options.MaxKeys.
func (s *Store) boundOf(op *rules.Op) int32 {
	if op.MaxKeys <= 0 {
		return s.maxKeys
	}
	return op.MaxKeys
}

func (b *budget) setMax(m int32) {
	if b.max.Load() != int64(m) { // a store on every new key would bounce the line between cores
		b.max.Store(int64(m))
	}
}

// netSlots is the size of a budget's network counts. A network's slot is
// its rules.Op.Network folded into 1..netSlots-1 (netSlot), 0 naming none,
// so two networks share a count when their keyed hashes fold alike: one
// pair in 65,535 (the package doc's "Network shares").
const netSlots = 1 << 16

// netCounts are a budget's keys per network slot: 256 KiB, made once for
// a budget with network shares.
type netCounts [netSlots]atomic.Int32

// netSlot is network n's slot in a budget's network counts.
func netSlot(n uint32) uint16 { return uint16(n%(netSlots-1)) + 1 }

// counts returns b's network counts, making them on first use.
func (b *budget) counts() *netCounts {
	if c := b.nets.Load(); c != nil {
		return c
	}
	b.nets.CompareAndSwap(nil, new(netCounts))
	return b.nets.Load()
}

// claimSlot counts one more key of network slot x in b, unless it holds
// max already, and reports whether it did.
func (b *budget) claimSlot(x uint16, max int32) bool {
	c := &b.counts()[x]
	for {
		n := c.Load()
		if n >= max {
			return false
		}
		if c.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// netNext are a budget's next-decay hints (budget.nextNet): 512 KiB, made
// once for a budget one of whose networks reached its share.
type netNext [netSlots]atomic.Int64

// release gives back a key of network slot x, which b counts.
func (b *budget) release(x uint16) { b.nets.Load()[x].Add(-1) }

// claim counts a new key of op (claims) to its network in op's budget, and
// reports whether the network had room, reclaiming the network's decayed
// keys first when it holds its share (claimSlotOrReclaim). A network
// without room is counted as the part's netFull, and wait is how long
// until one of its keys decays. sh (shard x) is locked, as held are.
func (s *Store) claim(sh *shard, x uint16, op *rules.Op, nowUS int64, held *shardSet) (bool, time.Duration) {
	b, p, _ := s.partOf(sh, op)
	ok, wait := s.claimSlotOrReclaim(x, b, netSlot(op.Network), op.NetworkKeys, nowUS, held)
	if !ok {
		p.netFull++
	}
	return ok, wait
}

// renew makes e, decayed and read in place by op as the fresh state it
// equals, a new key of op's network: the network that made it gives it
// back, and op's claims it, as claim does (false, counted, when that one
// holds its share: pass 2 then drops e). p is e's part, in op's budget;
// sh (shard x) holds e.
func (s *Store) renew(sh *shard, x uint16, p *part, e *entry, op *rules.Op, nowUS int64, held *shardSet) (bool, time.Duration) {
	if e.net != 0 {
		p.b.release(e.net)
		e.net = 0
	}
	if !claims(op) {
		return true, 0
	}
	slot := netSlot(op.Network)
	ok, wait := s.claimSlotOrReclaim(x, p.b, slot, op.NetworkKeys, nowUS, held)
	if !ok {
		p.netFull++
		return false, wait
	}
	e.net = slot
	p.b.lowerNet(slot, nowUS) // its expiry, set in pass 2, is after now
	return true, 0
}

// claimSlotOrReclaim counts one more key of network slot in b unless it
// holds max already. At its share, the network's keys whose state has
// decayed (each equal to a missing key: forgetting it loses nothing) are
// reclaimed first, in every shard (held ones in place, the others if their
// lock is free), and the claim tried again; a key still live, refusing or
// not, is never reclaimed. A network still without room gets wait, the
// time until the earliest of its keys decays: a slot frees no earlier
// (a key a take extended since the search may free later; 0 when its keys
// could not all be seen). The search reads every key of the budget, so it
// runs only when b's next-decay hint for the slot (nextNet) has passed: at
// most once per key of the network that decays while it is at its share
// (docs/memory-store.md, "Network shares").
func (s *Store) claimSlotOrReclaim(x uint16, b *budget, slot uint16, max int32, nowUS int64, held *shardSet) (bool, time.Duration) {
	if b.claimSlot(slot, max) {
		return true, 0
	}
	next := b.nextNet()
	hint := next[slot].Load()
	if hint > nowUS {
		return false, rules.DurationUS(hint - nowUS) // none of its keys decays before
	}
	freed, earliest, complete := s.reclaimNet(x, b, slot, nowUS, held)
	if complete {
		next[slot].CompareAndSwap(hint, earliest) // unless a new key lowered it meanwhile
	}
	if freed && b.claimSlot(slot, max) {
		return true, 0
	}
	if !complete || earliest == math.MaxInt64 {
		return false, 0
	}
	return false, rules.DurationUS(earliest - nowUS)
}

// reclaimBatch bounds the decayed keys reclaimNet drops per pass over a
// part, so that it needs no allocation.
const reclaimBatch = 32

// reclaimNet drops every key of network slot in b whose state has decayed
// at nowUS (untouched by the call holding the shards in held; the others
// only if their lock is free), and reports whether it dropped any, the
// earliest expiry of the slot's keys left (math.MaxInt64: none) and
// whether it saw every shard.
func (s *Store) reclaimNet(x uint16, b *budget, slot uint16, nowUS int64, held *shardSet) (freed bool, earliest int64, complete bool) {
	earliest, complete = math.MaxInt64, true
	for j := range len(s.shards) {
		y := (int(x) + j) & int(s.mask)
		o := &s.shards[y]
		mine := held.has(y)
		if !mine && !o.mu.TryLock() {
			complete = false
			continue
		}
		if p := o.partFor(b); p != nil {
			for {
				// Collect, then drop: dropping reorders the heap.
				var victims [reclaimBatch]*entry
				n := 0
				for _, e := range p.heap {
					switch {
					case e.net != slot:
					case e.expiresAt <= nowUS && !e.touched():
						if n < reclaimBatch {
							victims[n] = e
							n++
						}
					default:
						earliest = min(earliest, e.expiresAt)
					}
				}
				for _, e := range victims[:n] {
					o.drop(e)
				}
				freed = freed || n > 0
				if n < reclaimBatch {
					break
				}
			}
		}
		if !mine {
			o.mu.Unlock()
		}
	}
	return freed, earliest, complete
}

// nextNet returns b's next-decay hints, making them on first use (a
// network of b at its share): per network slot, a time (µs) before which
// none of the slot's keys decays, 0 when unknown. A search of the slot's
// keys (reclaimNet) sets it to their earliest expiry; a new key, or an
// expiry moved earlier, lowers it (lowerNet).
func (b *budget) nextNet() *netNext {
	if n := b.next.Load(); n != nil {
		return n
	}
	b.next.CompareAndSwap(nil, new(netNext))
	return b.next.Load()
}

// lowerNet records that a key of network slot in b may decay at at.
func (b *budget) lowerNet(slot uint16, at int64) {
	n := b.next.Load()
	if n == nil {
		return // no hint yet: each is 0, unknown, when made
	}
	h := &n[slot]
	for {
		v := h.Load()
		if v <= at || h.CompareAndSwap(v, at) {
			return
		}
	}
}

// partOf returns op's budget, its part in sh and the part's entry.part,
// creating the budget and the part on first sight. sh is locked.
func (s *Store) partOf(sh *shard, op *rules.Op) (*budget, *part, uint8) {
	if inShared(op) {
		if sh.shared == nil {
			sh.shared = newPart(s.shared)
		}
		return s.shared, sh.shared, 0
	}
	id := budgetID{rule: ruleID(&op.Key), markers: op.Marker}
	for i, pid := range sh.partIDs {
		if pid == id {
			p := sh.parts[i]
			p.b.setMax(s.boundOf(op))
			return p.b, p, partIndex(i)
		}
	}
	b := s.budgetOf(op)
	p := newPart(b)
	sh.partIDs = append(sh.partIDs, id)
	sh.parts = append(sh.parts, p)
	return b, p, partIndex(len(sh.parts) - 1)
}

// partFor returns b's part in sh, or nil. sh is locked.
func (sh *shard) partFor(b *budget) *part {
	if b.shared {
		return sh.shared
	}
	id := b.budgetID()
	for i, pid := range sh.partIDs {
		if pid == id {
			return sh.parts[i]
		}
	}
	return nil
}

// budgetID returns the name of b, which is not the shared budget.
func (b *budget) budgetID() budgetID {
	return budgetID{rule: binary.LittleEndian.Uint64(b.id[:]), markers: b.markers}
}

// rehome moves e, held by sh in part p and touched by the call, to op's
// budget: a marker op reading a key that a version 1 snapshot restored
// among its rule's counters (that format had no marker budgets), so that
// from its first use on it is never evicted. sh is locked.
func (s *Store) rehome(sh *shard, e *entry, p *part, op *rules.Op) {
	b, q, qi := s.partOf(sh, op)
	p.unlinkList(e)
	p.remove(int(e.idx))
	p.b.n.Add(-1)
	if e.net != 0 {
		p.b.release(e.net)
		b.counts()[e.net].Add(1) // moved, not made: counted without a bound
		b.lowerNet(e.net, e.expiresAt)
	}
	e.part = qi
	q.pushFront(e)
	q.push(e)
	b.n.Add(1)
	b.lower(e.heapAt)
}

// reserve takes room in op's budget for a new key of a sensitive op,
// reclaiming decayed state if the budget is full, and reports whether it
// could. It never evicts live state: a budget full of it counts one more
// full answer and reports false.
func (s *Store) reserve(sh *shard, x uint16, op *rules.Op, nowUS int64, held *shardSet) bool {
	b, p, _ := s.partOf(sh, op)
	for {
		n := b.n.Load()
		if n < b.max.Load() {
			if b.n.CompareAndSwap(n, n+1) {
				return true
			}
			continue
		}
		if !s.reclaim(sh, x, b, p, nowUS, held) {
			p.full++
			return false
		}
	}
}

// insert stores a new key's state, making room first when its budget is
// full: a non-sensitive op evicts (decayed state first, then the least
// recently used); a sensitive op reserved its room in pass 1, and an op
// with a network share its network's. spare, when
// not nil, is a spare entry (takeSpare) whose arrays st holds: it becomes
// the new key's entry unless an evicted one is reused.
func (s *Store) insert(sh *shard, x uint16, op *rules.Op, st *rules.State, expiresAt, nowUS int64, held *shardSet, spare *entry) {
	_, p, pi := s.partOf(sh, op)
	var e *entry
	if !reserves(op) {
		e = s.makeRoom(sh, x, p, nowUS, held)
	}
	switch {
	case e != nil:
		// An evicted entry; st holds spare's arrays, if any, and store
		// puts them in e's arrays holder, if e has one.
		*e = entry{arr: e.arr}
	case spare != nil:
		e = spare
		*e = entry{arr: e.arr}
	default:
		e = new(entry)
	}
	e.store(st)
	e.expiresAt, e.heapAt = expiresAt, expiresAt
	e.key = op.Key
	e.part = pi
	if claims(op) {
		e.net = netSlot(op.Network) // claimed in pass 1
		p.b.lowerNet(e.net, expiresAt)
	}
	sh.mark(e)
	sh.m[op.Key] = e
	p.pushFront(e)
	p.push(e)
	p.b.lower(expiresAt)
}

// makeRoom finds room in p's budget for a new key of a non-sensitive op in
// shard x: when the budget is full, the new key takes an evicted key's
// room (the count does not move, so a flood into a full budget writes no
// shared counter), and one more key goes while the budget is above its
// bound (a reload lowered it); otherwise the new key is counted. It
// returns an entry it evicted from sh, for reuse, or nil. When nothing can
// be evicted, the budget runs over by one until its next new key; callers
// racing past the bound together run it over by at most their number.
func (s *Store) makeRoom(sh *shard, x uint16, p *part, nowUS int64, held *shardSet) (recycled *entry) {
	b := p.b
	limit := b.max.Load()
	if b.n.Load() < limit {
		b.n.Add(1)
		return nil
	}
	v, ok := s.evict(sh, x, b, p, nowUS, held, true)
	if !ok {
		b.n.Add(1)
		return nil
	}
	if b.n.Load() > limit {
		if w, ok := s.evict(sh, x, b, p, nowUS, held, false); ok && v == nil {
			v = w
		}
	}
	return v // nil when the room was made in another shard
}

// evict makes room in b for a new key of a non-sensitive op in shard x:
// decayed state first (here, then in the other shards), else the least
// recently used entry here, else another shard's. It reports whether it
// made room, and returns the entry it unlinked from sh for reuse (nil when
// the room was made in another shard). With keep, the room stays counted,
// for the caller's new key; without, it goes back to the budget. Nothing
// can go when every candidate was touched by this call or sits in a shard
// busy with another.
func (s *Store) evict(sh *shard, x uint16, b *budget, p *part, nowUS int64, held *shardSet, keep bool) (*entry, bool) {
	if e, _ := sh.expired(p, nowUS, -1); e != nil {
		sh.forget(e, keep)
		return e, true
	}
	if b.hint.Load() <= nowUS && s.reclaimElsewhere(x, b, nowUS, held, keep) {
		return nil, true
	}
	if e := sh.lru(p); e != nil {
		sh.forget(e, keep)
		p.evicted++
		return e, true
	}
	// Nothing here (a small budget spread thin, or all of it this call's):
	// the least recently used of the first other shard that has one.
	for j := 1; j < len(s.shards); j++ {
		y := (int(x) + j) & int(s.mask)
		o := &s.shards[y]
		mine := held.has(y)
		if !mine {
			if !o.mu.TryLock() {
				continue
			}
		}
		var v *entry
		if op := o.partFor(b); op != nil {
			if v = o.lru(op); v != nil {
				o.forget(v, keep)
				op.evicted++
			}
		}
		if !mine {
			o.mu.Unlock()
		}
		if v != nil {
			return nil, true
		}
	}
	return nil, false
}

// reclaim drops one decayed entry of b to make room, here or in another
// shard, and reports whether it found one.
func (s *Store) reclaim(sh *shard, x uint16, b *budget, p *part, nowUS int64, held *shardSet) bool {
	if e, _ := sh.expired(p, nowUS, -1); e != nil {
		sh.drop(e)
		return true
	}
	if b.hint.Load() > nowUS {
		return false // no entry of b decays before the hint
	}
	return s.reclaimElsewhere(x, b, nowUS, held, false)
}

// reclaimElsewhere drops one decayed entry of b from a shard other than x
// (those this call holds are searched in place, the others only if their
// lock is free) and reports whether it found one. A search that finds none
// in any shard raises b's hint to the earliest expiry it saw, so that the
// next full-budget key does not search again before then. With keep, the
// room stays counted, for the caller's new key.
func (s *Store) reclaimElsewhere(x uint16, b *budget, nowUS int64, held *shardSet, keep bool) bool {
	b.scanning.Add(1)
	defer b.scanning.Add(-1)
	b.hintMu.Lock()
	ver := b.ver
	b.hintMu.Unlock()
	complete := true
	earliest := int64(math.MaxInt64)
	for j := range len(s.shards) {
		y := (int(x) + j) & int(s.mask)
		o := &s.shards[y]
		mine := held.has(y)
		if !mine {
			if !o.mu.TryLock() {
				complete = false
				continue
			}
		}
		found := false
		if op := o.partFor(b); op != nil {
			if e, _ := o.expired(op, nowUS, -1); e != nil {
				o.forget(e, keep)
				found = true
			} else if len(op.heap) > 0 {
				earliest = min(earliest, op.heap[0].heapAt)
			}
		}
		if !mine {
			o.mu.Unlock()
		}
		if found {
			return true
		}
	}
	if complete {
		b.hintMu.Lock()
		if b.ver == ver {
			b.hint.Store(earliest)
		}
		b.hintMu.Unlock()
	}
	return false
}

// lower records that an entry of b may decay at at: b's hint must not
// stay later than that.
func (b *budget) lower(at int64) {
	if at >= b.hint.Load() && b.scanning.Load() == 0 {
		return
	}
	b.hintMu.Lock()
	if at < b.hint.Load() {
		b.hint.Store(at)
	}
	b.ver++ // a search under way saw a shard before this entry: it must not raise the hint
	b.hintMu.Unlock()
}

// touch marks e as used by the call holding sh: most recently used, and
// not to be evicted before the call ends. It returns e's part.
func (sh *shard) touch(e *entry) *part {
	sh.mark(e)
	p := sh.partAt(e)
	if p.head != e {
		p.unlinkList(e)
		p.pushFront(e)
	}
	return p
}

// setExpiry records e's new expiry; an earlier one than its heap key moves
// it up the heap (a take only ever moves expiry later, which leaves it).
func (sh *shard) setExpiry(e *entry, at int64) {
	if at < e.expiresAt && e.net != 0 {
		sh.partAt(e).b.lowerNet(e.net, at) // a refund or a reset: it may decay sooner
	}
	e.expiresAt = at
	if at < e.heapAt {
		e.heapAt = at
		p := sh.partAt(e)
		p.up(int(e.idx))
		p.b.lower(at)
	}
}

// drop removes e from sh's map and its part's list and heap, and gives
// its room back to its budget.
func (sh *shard) drop(e *entry) { sh.forget(e, false) }

// forget removes e from sh's map and its part's list and heap; its room
// goes back to its budget unless keep (a new key takes it).
func (sh *shard) forget(e *entry, keep bool) {
	p := sh.partAt(e)
	delete(sh.m, e.key)
	sh.drops++
	p.unlinkList(e)
	p.remove(int(e.idx))
	if e.net != 0 {
		p.b.release(e.net)
		e.net = 0
	}
	if !keep {
		p.b.n.Add(-1)
	}
}

// expired returns an entry of p that has decayed at nowUS and that the
// call holding sh has not touched, or nil. It brings the heap's top up to
// date on the way: each stale heap key it meets is replaced by the entry's
// expiry, so that work is paid once per extension of an expiry, not per
// call. An expired entry the current call touched (an op is storing a new
// state in it) is keyed out of the way until the call sets its new expiry.
// limit, when not negative, bounds the heap keys it updates (steps; the
// sweeper's batches): nil with steps == limit means it stopped early.
func (sh *shard) expired(p *part, nowUS int64, limit int) (e *entry, steps int) {
	for len(p.heap) > 0 && steps != limit {
		e := p.heap[0]
		switch {
		case e.heapAt > nowUS:
			return nil, steps
		case e.expiresAt > nowUS:
			e.heapAt = e.expiresAt
		case e.touched():
			e.heapAt = math.MaxInt64 // setExpiry lowers it again
		default:
			return e, steps
		}
		p.down(0)
		steps++
	}
	return nil, steps
}

// lru returns p's least recently used entry that the call holding sh has
// not touched, or nil. Touched entries are at the front, so this looks at
// a few entries at most.
func (sh *shard) lru(p *part) *entry {
	for e := p.tail; e != nil; e = e.prev {
		if !e.touched() {
			return e
		}
	}
	return nil
}

// The recency list: head is the most recently used.

func (p *part) pushFront(e *entry) {
	e.prev, e.next = nil, p.head
	if p.head != nil {
		p.head.prev = e
	} else {
		p.tail = e
	}
	p.head = e
}

func (p *part) unlinkList(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		p.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		p.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// The expiry heap: a binary min-heap on heapAt, each entry knowing its
// index.

func (p *part) push(e *entry) {
	e.idx = int32(len(p.heap))
	p.heap = append(p.heap, e)
	p.up(int(e.idx))
}

func (p *part) remove(i int) {
	last := len(p.heap) - 1
	if i != last {
		p.swap(i, last)
	}
	p.heap[last] = nil
	p.heap = p.heap[:last]
	if i != last {
		p.down(i)
		p.up(i)
	}
}

func (p *part) swap(i, j int) {
	h := p.heap
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = int32(i), int32(j)
}

func (p *part) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if p.heap[parent].heapAt <= p.heap[i].heapAt {
			return
		}
		p.swap(i, parent)
		i = parent
	}
}

func (p *part) down(i int) {
	n := len(p.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && p.heap[r].heapAt < p.heap[l].heapAt {
			c = r
		}
		if p.heap[i].heapAt <= p.heap[c].heapAt {
			return
		}
		p.swap(i, c)
		i = c
	}
}

// Len returns the number of keys held, expired ones not yet swept or
// reclaimed included.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Budget is one key budget's counters, for metrics (the gateway exports
// them): Shared marks the shared budget, of ops with MaxKeys 0
// (Options.MaxKeys); the counts are since New.
type Budget = rules.KeyBudgetUse

// budgetList returns every budget the store has seen, the shared one
// first.
func (s *Store) budgetList() []*budget {
	s.budgetsMu.Lock()
	defer s.budgetsMu.Unlock()
	bs := make([]*budget, 0, len(s.budgets)+1)
	bs = append(bs, s.shared)
	for _, b := range s.budgets {
		bs = append(bs, b)
	}
	return bs
}

// Budgets returns every budget the store has seen, the shared one first.
// It locks each shard in turn, to add up the budgets' counters.
func (s *Store) Budgets() []Budget {
	bs := s.budgetList()
	at := make(map[*budget]int, len(bs))
	out := make([]Budget, len(bs))
	for i, b := range bs {
		at[b] = i
		out[i] = Budget{ID: b.id, Shared: b.shared, Markers: b.markers, Keys: b.n.Load(), MaxKeys: b.max.Load()}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		add := func(p *part) {
			if j, ok := at[p.b]; ok {
				out[j].Evictions += p.evicted
				out[j].Full += p.full
				out[j].NetworkFull += p.netFull
			}
		}
		if sh.shared != nil {
			add(sh.shared)
		}
		for _, p := range sh.parts {
			add(p)
		}
		sh.mu.Unlock()
	}
	return out
}

// Close stops the sweeper and waits for it. The Store stays usable; Close
// may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		if s.done != nil {
			<-s.done
		}
	})
	return nil
}

func (s *Store) sweepLoop(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep(s.clock.Now().UnixMicro())
		}
	}
}

// sweep drops every entry expired at nowUS, one shard and at most
// sweepBatch heap steps at a time, so requests on a shard wait at most one
// batch. The heaps make it proportional to what expired (and to the stale
// heap keys it brings up to date), not to what is held.
func (s *Store) sweep(nowUS int64) (dropped int) {
	for i := range s.shards {
		dropped += s.shards[i].sweep(nowUS)
	}
	return dropped
}

func (sh *shard) sweep(nowUS int64) (dropped int) {
	k := -1 // the part being swept: -1 the shared one, then parts[k]
	for {
		sh.mu.Lock() // nothing is being rewritten: every expired entry may go
		left := sweepBatch
		for left > 0 && k < len(sh.parts) {
			p := sh.shared
			if k >= 0 {
				p = sh.parts[k]
			}
			if p == nil {
				k++
				continue
			}
			e, steps := sh.expired(p, nowUS, left)
			left -= steps
			switch {
			case e != nil:
				sh.drop(e)
				dropped++
				left--
			case left > 0: // not stopped early: nothing more has expired here
				k++
			}
		}
		done := k >= len(sh.parts)
		sh.mu.Unlock()
		if done {
			return dropped
		}
	}
}
