package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Shared state: a few small hashes a fleet's nodes read and write besides
// their counters, such as the admin API's dry-run toggles (the gateway's
// "dry-run" hash). Each is one Redis hash named by the store's prefix and
// the name given ("edge:dry-run"), so it lives in one hash slot of a
// cluster. These calls are for background loops and admin requests, never
// the request path: each is one round trip, retried by the client as its
// options say (reads and idempotent writes).

// errNoClient is returned by a Store whose connection is a test fake.
var errNoClient = errors.New("redisstore: no Redis client for shared state")

// hashes returns the client for shared state.
func (s *Store) hashes() (redis.Cmdable, error) {
	if s.cluster != nil {
		return s.cluster, nil
	}
	if c, ok := s.node.(*redis.Client); ok {
		return c, nil
	}
	return nil, errNoClient
}

// SharedGetAll returns every field of the shared hash name (empty when it
// does not exist).
func (s *Store) SharedGetAll(ctx context.Context, name string) (map[string]string, error) {
	c, err := s.hashes()
	if err != nil {
		return nil, err
	}
	m, err := c.HGetAll(ctx, s.prefix+name).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: reading shared %s: %w", name, err)
	}
	return m, nil
}

// SharedSet sets field to value in the shared hash name.
func (s *Store) SharedSet(ctx context.Context, name, field, value string) error {
	c, err := s.hashes()
	if err != nil {
		return err
	}
	if err := c.HSet(ctx, s.prefix+name, field, value).Err(); err != nil {
		return fmt.Errorf("redisstore: writing shared %s: %w", name, err)
	}
	return nil
}

// SharedDelete removes field from the shared hash name (no error when it
// is absent).
func (s *Store) SharedDelete(ctx context.Context, name, field string) error {
	c, err := s.hashes()
	if err != nil {
		return err
	}
	if err := c.HDel(ctx, s.prefix+name, field).Err(); err != nil {
		return fmt.Errorf("redisstore: deleting from shared %s: %w", name, err)
	}
	return nil
}
