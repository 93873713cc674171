package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// fingerprintKey names, under the store's prefix ("edge:key-fingerprint"),
// the fingerprint of the key secret the fleet's counters are hashed under.
// It is not a counter key (those are the prefix and a hex Key in braces),
// has no TTL, and holds no secret: the caller stores a keyed hash.
const fingerprintKey = "key-fingerprint"

// ClaimKeyFingerprint compares fp, the fingerprint of the node's key
// secret, with the one Redis holds and reports the one it held: "" when
// there was none (fp is then written, atomically with the check: SET NX,
// so the first of several nodes starting at once wins), fp itself when
// they agree. A different one means the node's counters would not be the
// fleet's; overwrite then replaces it with fp (the operator has
// acknowledged the reset), and held is still the old one. ctx bounds each
// round trip; there are at most three.
func (s *Store) ClaimKeyFingerprint(ctx context.Context, fp string, overwrite bool) (held string, err error) {
	c, err := s.hashes()
	if err != nil {
		return "", err
	}
	key := s.prefix + fingerprintKey
	set, err := c.SetNX(ctx, key, fp, 0).Result()
	if err != nil {
		return "", fmt.Errorf("redisstore: writing the key fingerprint: %w", err)
	}
	if set {
		return "", nil
	}
	held, err = c.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		// Removed between the two calls: claim it again, once.
		if err := c.SetNX(ctx, key, fp, 0).Err(); err != nil {
			return "", fmt.Errorf("redisstore: writing the key fingerprint: %w", err)
		}
		return "", nil
	case err != nil:
		return "", fmt.Errorf("redisstore: reading the key fingerprint: %w", err)
	}
	if held != fp && overwrite {
		if err := c.Set(ctx, key, fp, 0).Err(); err != nil {
			return held, fmt.Errorf("redisstore: overwriting the key fingerprint: %w", err)
		}
	}
	return held, nil
}
