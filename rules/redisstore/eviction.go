package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Eviction is what one Redis server does once it reaches maxmemory, as its
// configuration says (CONFIG GET maxmemory*). Every key the edge writes has
// a TTL, the time its state takes to decay, so an eviction policy that
// picks among keys with a TTL picks among the edge's live counters. See
// docs/memory-store.md, "Redis".
type Eviction struct {
	// Addr is the server (each master of a cluster).
	Addr string
	// Policy is its maxmemory-policy, such as "noeviction".
	Policy string
	// MaxMemory is its maxmemory in bytes; 0 means no limit (nothing is
	// evicted until one is set, which CONFIG SET can do at any time).
	MaxMemory int64
}

// Risk says what an eviction policy does to the edge's counters.
type Risk uint8

const (
	// RiskNone: noeviction. Nothing is forgotten: a full Redis refuses
	// writes, the script fails, and each rule answers by its
	// on_store_error (sensitive rules fail closed).
	RiskNone Risk = iota
	// RiskDecayed: volatile-ttl. The keys nearest their expiry go first:
	// the counters closest to decaying, the least a client can gain.
	RiskDecayed
	// RiskLive: volatile-lru, volatile-lfu, volatile-random. Every edge key
	// has a TTL, so these pick among all the edge's counters, live ones
	// included, as an allkeys policy would: a client whose counter is
	// evicted gets a fresh allowance.
	RiskLive
	// RiskAnyKey: allkeys-lru, allkeys-lfu, allkeys-random. Any key may go,
	// live counters included.
	RiskAnyKey
	// RiskUnknown: a policy this build does not know.
	RiskUnknown
)

// Risk classifies e's policy.
func (e Eviction) Risk() Risk {
	switch {
	case e.Policy == "noeviction":
		return RiskNone
	case e.Policy == "volatile-ttl":
		return RiskDecayed
	case strings.HasPrefix(e.Policy, "allkeys-"):
		return RiskAnyKey
	case strings.HasPrefix(e.Policy, "volatile-"):
		return RiskLive
	}
	return RiskUnknown
}

// Evictions reads the eviction settings of the server, or of every master
// of a cluster, with CONFIG GET. Managed Redis services often refuse
// CONFIG (or rename it): the error then says so, and the caller can only
// log that the policy could not be checked. ctx bounds the whole check.
func (s *Store) Evictions(ctx context.Context) ([]Eviction, error) {
	if s.cluster != nil {
		var mu sync.Mutex
		var out []Eviction
		err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			e, err := eviction(ctx, c)
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, e)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	c, ok := s.node.(*redis.Client)
	if !ok {
		return nil, fmt.Errorf("redisstore: reading maxmemory-policy: no server client")
	}
	e, err := eviction(ctx, c)
	if err != nil {
		return nil, err
	}
	return []Eviction{e}, nil
}

// eviction reads one server's maxmemory and maxmemory-policy.
func eviction(ctx context.Context, c *redis.Client) (Eviction, error) {
	e := Eviction{Addr: c.Options().Addr}
	vals, err := c.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		return e, fmt.Errorf("redisstore: reading maxmemory-policy of %s (CONFIG GET): %w", e.Addr, err)
	}
	policy, ok := vals["maxmemory-policy"]
	if !ok {
		return e, fmt.Errorf("redisstore: reading maxmemory-policy of %s: CONFIG GET did not return it", e.Addr)
	}
	e.Policy = policy
	if m, ok := vals["maxmemory"]; ok {
		if e.MaxMemory, err = strconv.ParseInt(m, 10, 64); err != nil {
			return e, fmt.Errorf("redisstore: reading maxmemory of %s: %q is not a number of bytes", e.Addr, m)
		}
	}
	return e, nil
}

// MinReplicasToWrite reads the min-replicas-to-write of a master that Redis
// Sentinel manages (CONFIG GET), for the start-up check of what a failover
// forgets (docs/deploying.md, "Redis over TLS, ACLs and Sentinel"): with 0,
// a master that is being failed over keeps taking counts its promoted
// replica never sees, and the clients they counted get that many requests
// again. managed is false, and nothing is read, for any other store. An
// error means CONFIG could not be read (managed services often refuse it).
func (s *Store) MinReplicasToWrite(ctx context.Context) (n int, managed bool, err error) {
	if !s.sentinel {
		return 0, false, nil
	}
	c, ok := s.node.(*redis.Client)
	if !ok {
		return 0, true, fmt.Errorf("redisstore: reading min-replicas-to-write: no server client")
	}
	vals, err := c.ConfigGet(ctx, "min-replicas-to-write").Result()
	if err != nil {
		return 0, true, fmt.Errorf("redisstore: reading min-replicas-to-write (CONFIG GET): %w", err)
	}
	v, ok := vals["min-replicas-to-write"]
	if !ok {
		return 0, true, fmt.Errorf("redisstore: reading min-replicas-to-write: CONFIG GET did not return it")
	}
	if n, err = strconv.Atoi(v); err != nil || n < 0 {
		return 0, true, fmt.Errorf("redisstore: reading min-replicas-to-write: %q is not a count", v)
	}
	return n, true, nil
}
