package failclosed

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/edge-gateway/edge/rules"
)

// ways is the deny cache's associativity: a key lives in one of the ways
// slots of the set its hash picks.
const ways = 4

// denyCache remembers keys the store refused, until their RetryAfter. It is
// a fixed, preallocated set-associative table: inserting never allocates
// and memory never grows, whatever an attacker sends. A full set evicts the
// entry that expires first, the one worth least.
//
// Readers take no lock: each set has a sequence counter, odd while a writer
// (serialised by the set's mutex) changes it, and a reader retries, or
// finally locks, when the counter moved under it. Every field is an atomic,
// so the reads that race with a writer are well defined (and quiet under
// -race); a torn read is detected by the counter and discarded.
type denyCache struct {
	seed maphash.Seed
	mask uint64
	sets []denySet
	// horizon is the latest retryUntil ever inserted: past it every entry
	// has expired and lookups are skipped, so a node refusing nothing pays
	// one atomic load per call.
	horizon atomic.Int64
}

type denySet struct {
	seq   atomic.Uint32
	mu    sync.Mutex
	slots [ways]denySlot
}

// denySlot is one cached refusal of a request of cost units; retryUntil 0
// marks it empty. Times are µs since the Unix epoch, on the callers' clock.
type denySlot struct {
	k          [3]atomic.Uint64 // the rules.Key
	retryUntil atomic.Int64
	resetUntil atomic.Int64
	cost       atomic.Int64
}

func newDenyCache(maxKeys int) *denyCache {
	n := max((maxKeys+ways-1)/ways, 1)
	n = 1 << bits.Len(uint(n-1)) // next power of two
	return &denyCache{seed: maphash.MakeSeed(), mask: uint64(n - 1), sets: make([]denySet, n)}
}

func words(k *rules.Key) (a, b, c uint64) {
	return binary.LittleEndian.Uint64(k[0:8]), binary.LittleEndian.Uint64(k[8:16]), binary.LittleEndian.Uint64(k[16:24])
}

func (c *denyCache) set(k *rules.Key) *denySet {
	return &c.sets[maphash.Bytes(c.seed, k[:])&c.mask]
}

// live reports whether any entry may still be unexpired at nowUS.
func (c *denyCache) live(nowUS int64) bool { return c.horizon.Load() > nowUS }

// find returns the slot holding (a, b, c), or -1. Callers hold the set's
// mutex or validate the set's sequence counter afterwards.
func (s *denySet) find(a, b, c uint64) int {
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.k[0].Load() == a && sl.k[1].Load() == b && sl.k[2].Load() == c && sl.retryUntil.Load() != 0 {
			return i
		}
	}
	return -1
}

// lookup returns k's cached refusal if it is still in force at nowUS for a
// request of cost units. Only a request of the refused cost is answered: a
// cheaper one may pass sooner, and a dearer one's RetryAfter is later, or
// rules.RetryNever past the burst. (The Engine's costs are 1, so this
// loses nothing in practice.)
func (c *denyCache) lookup(k *rules.Key, nowUS, cost int64) (retryUntil, resetUntil int64, ok bool) {
	a, b, cc := words(k)
	s := c.set(k)
	var refusedCost int64
	for range 4 {
		seq := s.seq.Load()
		if seq&1 != 0 {
			continue // a writer is in the set
		}
		retryUntil, resetUntil, refusedCost = s.read(a, b, cc)
		if s.seq.Load() == seq {
			return retryUntil, resetUntil, retryUntil > nowUS && cost == refusedCost
		}
	}
	// Writers kept moving the counter: read under the lock instead.
	s.mu.Lock()
	retryUntil, resetUntil, refusedCost = s.read(a, b, cc)
	s.mu.Unlock()
	return retryUntil, resetUntil, retryUntil > nowUS && cost == refusedCost
}

// read returns the entry of (a, b, c), zeros when there is none.
func (s *denySet) read(a, b, c uint64) (retryUntil, resetUntil, cost int64) {
	i := s.find(a, b, c)
	if i < 0 {
		return 0, 0, 0
	}
	sl := &s.slots[i]
	return sl.retryUntil.Load(), sl.resetUntil.Load(), sl.cost.Load()
}

// insert remembers that k is refused for cost units until retryUntil (its
// counter full until resetUntil), as of nowUS.
func (c *denyCache) insert(k *rules.Key, nowUS, cost, retryUntil, resetUntil int64) {
	a, b, cc := words(k)
	s := c.set(k)
	s.mu.Lock()
	i := s.find(a, b, cc)
	if i < 0 {
		// An empty or expired slot, else the one that expires first.
		i = 0
		for j := range s.slots {
			u := s.slots[j].retryUntil.Load()
			if u <= nowUS {
				i = j
				break
			}
			if u < s.slots[i].retryUntil.Load() {
				i = j
			}
		}
	}
	sl := &s.slots[i]
	s.seq.Add(1) // odd: readers retry
	sl.k[0].Store(a)
	sl.k[1].Store(b)
	sl.k[2].Store(cc)
	sl.retryUntil.Store(retryUntil)
	sl.resetUntil.Store(resetUntil)
	sl.cost.Store(cost)
	s.seq.Add(1)
	s.mu.Unlock()
	for {
		h := c.horizon.Load()
		if retryUntil <= h || c.horizon.CompareAndSwap(h, retryUntil) {
			return
		}
	}
}

// forget drops k, if cached.
func (c *denyCache) forget(k *rules.Key) {
	a, b, cc := words(k)
	s := c.set(k)
	s.mu.Lock()
	if i := s.find(a, b, cc); i >= 0 {
		s.seq.Add(1)
		s.slots[i].retryUntil.Store(0)
		s.slots[i].resetUntil.Store(0)
		s.seq.Add(1)
	}
	s.mu.Unlock()
}
