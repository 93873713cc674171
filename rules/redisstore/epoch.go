package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Epochs: a Redis that restarts without its data (no persistence, a
// FLUSHALL, a replica promoted before it had synced) gives every client a
// fresh allowance, bans and lockouts included, and says nothing: its
// answers look like any other. So the store keeps an epoch in Redis, a
// random value under <prefix>epoch with no expiry, one per master of a
// cluster (in a hash slot that master serves), and CheckEpoch reads it: an
// epoch gone, or another than the one this node read last (a node of the
// fleet found it gone first and wrote a new one), is a reset. The node
// checks on a timer and at once after a NOSCRIPT reply (EpochWake): a Redis
// that restarted has an empty script cache too, so the first call after
// the restart tells. The check is off the request path: one GET per master.
// docs/deploying.md, "A Redis that comes back empty".

// epochKey is the epoch's key after the store's prefix (a cluster's keys
// add a hash tag).
const epochKey = "epoch"

// epochState is what CheckEpoch carries from one check to the next: per
// epoch key, the value it read last.
type epochState struct {
	mu   sync.Mutex
	seen map[string]string
	// wake is signalled (capacity 1) when a call is answered NOSCRIPT.
	wake chan struct{}
	// resets counts the resets CheckEpoch found (Stats.EpochResets).
	resets atomic.Uint64
}

// EpochWake is signalled when Redis answers a script call NOSCRIPT (its
// script cache is empty: restarted, flushed, failed over): a reason to
// call CheckEpoch now rather than at the next tick.
func (s *Store) EpochWake() <-chan struct{} { return s.epoch.wake }

// sawNoScript counts n NOSCRIPT replies and wakes the epoch check.
func (s *Store) sawNoScript(n uint64) {
	if n == 0 {
		return
	}
	s.noScript.Add(n)
	select {
	case s.epoch.wake <- struct{}{}:
	default:
	}
}

// EpochReset describes a reset CheckEpoch found: the epoch key (the
// master's, on a cluster) and whether the epoch was gone (this node found
// the reset first and wrote a new epoch) or another (a node of the fleet
// had).
type EpochReset struct {
	Key  string
	Gone bool
}

// CheckEpoch reads every epoch key and returns the resets it found since
// the last check: an epoch key missing (written again with a fresh random
// value, SET NX, so the fleet's nodes agree on one) or holding another
// value than last read. The first check of a key adopts what it finds
// (writing it when missing) and reports nothing: a node cannot tell a
// fresh Redis from one emptied before it started. It returns the first
// error met; the keys checked before it are kept.
func (s *Store) CheckEpoch(ctx context.Context) ([]EpochReset, error) {
	keys, err := s.epochKeys(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.hashes()
	if err != nil {
		return nil, err
	}
	s.epoch.mu.Lock()
	defer s.epoch.mu.Unlock()
	if s.epoch.seen == nil {
		s.epoch.seen = map[string]string{}
	}
	var resets []EpochReset
	for _, key := range keys {
		v, err := c.Get(ctx, key).Result()
		gone := errors.Is(err, redis.Nil)
		if err != nil && !gone {
			return resets, fmt.Errorf("redisstore: reading the epoch: %w", err)
		}
		if gone {
			if err := c.SetNX(ctx, key, newEpoch(), 0).Err(); err != nil {
				return resets, fmt.Errorf("redisstore: writing the epoch: %w", err)
			}
			if v, err = c.Get(ctx, key).Result(); err != nil {
				return resets, fmt.Errorf("redisstore: reading the epoch: %w", err)
			}
		}
		last, known := s.epoch.seen[key]
		s.epoch.seen[key] = v
		if known && v != last {
			resets = append(resets, EpochReset{Key: key, Gone: gone})
			s.epoch.resets.Add(1)
		}
	}
	return resets, nil
}

// newEpoch is a random epoch value: 128 bits, hex.
func newEpoch() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// epochKeys returns the keys CheckEpoch reads: one for a single Redis; on
// a cluster, one per master, <prefix>epoch{N} with the smallest N whose
// hash slot that master serves (found anew each time: slots move).
func (s *Store) epochKeys(ctx context.Context) ([]string, error) {
	if s.cluster == nil {
		return []string{s.prefix + epochKey}, nil
	}
	var mu sync.Mutex
	masters := map[string]bool{}
	err := s.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		masters[c.Options().Addr] = false
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: listing the cluster's masters: %w", err)
	}
	keys := make([]string, 0, len(masters))
	// 16384 slots, a handful of masters: a few dozen tags find them all.
	for n := 0; n < 1<<16 && len(keys) < len(masters); n++ {
		key := s.prefix + epochKey + "{" + strconv.Itoa(n) + "}"
		m, err := s.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("redisstore: finding the master of %s: %w", key, err)
		}
		if covered, ok := masters[m.Options().Addr]; ok && !covered {
			masters[m.Options().Addr] = true
			keys = append(keys, key)
		}
	}
	return keys, nil
}
