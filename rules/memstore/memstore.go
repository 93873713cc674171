package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
	"unsafe"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/edge-gateway/edge/rules"
)

const (
	// DefaultMaxKeys is the key bound when Options.MaxKeys is 0.
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
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// MaxKeys bounds the keys held across all shards (DefaultMaxKeys when
	// 0). Each shard holds MaxKeys/Shards, rounded up, and evicts its least
	// recently used key when full.
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to a
	// power of two, at most MaxShards (DefaultShards when 0).
	Shards int
	// SweepInterval is how often the background sweeper drops expired
	// entries (DefaultSweepInterval when 0; negative: no sweeper, expired
	// entries then only read as fresh and wait for eviction).
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

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{} // nil without a sweeper
}

var _ rules.Store = (*Store)(nil)

// shard is one lock and its LRU, padded to its own cache lines so that
// neighbours' locks do not contend through false sharing.
type shard struct {
	mu  sync.Mutex
	lru *simplelru.LRU[rules.Key, *entry]
	_   [128 - unsafe.Sizeof(sync.Mutex{}) - unsafe.Sizeof(uintptr(0))]byte
}

// entry is one key's state and when it has decayed to empty.
type entry struct {
	st        rules.State
	expiresAt int64 // µs since the epoch
}

// errLenMismatch is preallocated: Take's errors never allocate.
var errLenMismatch = errors.New("memstore: len(res) != len(ops)")

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
	perShard := (opts.MaxKeys + n - 1) / n
	s := &Store{
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		shards: make([]shard, n),
		clock:  opts.Clock,
		stop:   make(chan struct{}),
	}
	for i := range s.shards {
		lru, err := simplelru.NewLRU[rules.Key, *entry](perShard, nil)
		if err != nil {
			return nil, fmt.Errorf("memstore: creating shard: %w", err)
		}
		s.shards[i].lru = lru
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
			s.shards[int(w)<<6|bits.TrailingZeros64(word)].mu.Unlock()
		}
	}
}

// Take applies ops at now atomically, as rules.Store specifies. It returns
// an error, having changed nothing, when len(res) != len(ops) or an op fails
// rules.ValidateOp. ctx is not consulted: nothing here blocks but the shard
// locks.
func (s *Store) Take(_ context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	if len(res) != len(ops) {
		return errLenMismatch
	}
	for i := range ops {
		if err := rules.ValidateOp(&ops[i]); err != nil {
			return err
		}
	}
	nowUS := now.UnixMicro()

	var (
		set   shardSet
		idx   [cachedOps]uint16
		ents  [cachedOps]*entry
		fresh rules.State // the state of a missing key, read-only in pass 1
	)
	for i := range ops {
		x := s.shardOf(&ops[i].Key)
		if i < cachedOps {
			idx[i] = x
		}
		set.add(x)
	}
	s.lock(&set)
	defer s.unlock(&set)

	// Pass 1: decide every op against the state before the call.
	for i := range ops {
		op := &ops[i]
		x := s.shardIndex(i, &idx, op)
		e, ok := s.shards[x].lru.Get(op.Key)
		if ok && nowUS >= e.expiresAt {
			// Expired: read it as the fresh state it equals (rules tests
			// prove it), keeping the log's array for reuse.
			e.st = rules.State{Log: e.st.Log[:0]}
		}
		if i < cachedOps {
			ents[i] = e
		}
		st := &fresh
		if ok {
			st = &e.st
		}
		res[i] = rules.Check(st, nowUS, op)
	}

	// Pass 2: consume per the contract and report the state after.
	refused := rules.Refused(ops, res)
	for i := range ops {
		op := &ops[i]
		sh := &s.shards[s.shardIndex(i, &idx, op)]
		var e *entry
		if i < cachedOps {
			e = ents[i]
		} else {
			e, _ = sh.lru.Peek(op.Key)
		}
		if e == nil {
			var st rules.State
			if ttl := rules.Settle(&st, nowUS, op, refused, &res[i]); ttl > 0 {
				sh.lru.Add(op.Key, &entry{st: st, expiresAt: nowUS + ttl})
			}
			continue
		}
		if ttl := rules.Settle(&e.st, nowUS, op, refused, &res[i]); ttl > 0 {
			e.expiresAt = nowUS + ttl
		} else {
			sh.lru.Remove(op.Key) // empty: a missing key reads the same
		}
	}
	return nil
}

// shardIndex returns op i's shard, from the stack cache when it holds it.
func (s *Store) shardIndex(i int, idx *[cachedOps]uint16, op *rules.Op) uint16 {
	if i < cachedOps {
		return idx[i]
	}
	return s.shardOf(&op.Key)
}

// Len returns the number of keys held, expired ones not yet swept included.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.lru.Len()
		sh.mu.Unlock()
	}
	return n
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

// sweepBatch bounds how long the sweeper holds a shard's lock at a time.
const sweepBatch = 256

// sweep drops every entry expired at nowUS, one shard and one batch at a
// time, so requests on a shard wait at most one batch.
func (s *Store) sweep(nowUS int64) (dropped int) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		keys := sh.lru.Keys() // oldest first
		sh.mu.Unlock()
		for len(keys) > 0 {
			batch := keys[:min(len(keys), sweepBatch)]
			keys = keys[len(batch):]
			sh.mu.Lock()
			for _, k := range batch {
				// Peek: the sweeper must not refresh recency.
				if e, ok := sh.lru.Peek(k); ok && nowUS >= e.expiresAt {
					sh.lru.Remove(k)
					dropped++
				}
			}
			sh.mu.Unlock()
		}
	}
	return dropped
}
