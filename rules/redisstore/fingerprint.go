package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
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

// FleetKeyFormat is the key format a fleet's Redis holds in the
// fingerprint key's value, beside the key secret's fingerprint
// (internal/keyhash, docs/deploying.md "Key format and rolling
// upgrades"):
//
//	<fp>               format 1: what nodes before key formats write
//	2:<fp>             format 2
//	2:<fp>:<until µs>  format 2 after a migration window from format 1
//	                   that ends at until (Unix time in µs)
//	<f>:<fp>:0:<prev>:<rotate µs>
//	                   format f (1 or 2) in a key-secret rotation from
//	                   the secret whose fingerprint is prev to fp, whose
//	                   window ends at rotate (docs/operations.md,
//	                   "Rotating the key secret")
//
// A node before key formats compares the whole value with its bare
// fingerprint, so it refuses to start on a format 2 fleet (or one
// migrating) as it refuses another secret: it would count in keys no
// other node reads.
type FleetKeyFormat struct {
	// Fingerprint is the key secret's fingerprint.
	Fingerprint string
	// Format is the fleet's format.
	Format rules.KeyFormat
	// DualUntil is the end of the migration window; zero when none.
	DualUntil time.Time
	// Previous is the fingerprint of the key secret before Fingerprint's
	// in a rotation, RotateUntil the end of its window; "" and zero when
	// none.
	Previous    string
	RotateUntil time.Time
}

// KeyFormats is the engine's setting for f.
func (f FleetKeyFormat) KeyFormats() rules.KeyFormats {
	return rules.KeyFormats{Format: f.Format, DualUntil: f.DualUntil, RotateUntil: f.RotateUntil}
}

// String is the value f is stored as.
func (f FleetKeyFormat) String() string {
	switch {
	case f.Previous != "":
		return strconv.Itoa(int(f.Format)) + ":" + f.Fingerprint + ":0:" + f.Previous + ":" + strconv.FormatInt(f.RotateUntil.UnixMicro(), 10)
	case f.Format == rules.KeyFormat1:
		return f.Fingerprint
	case f.DualUntil.IsZero():
		return "2:" + f.Fingerprint
	}
	return "2:" + f.Fingerprint + ":" + strconv.FormatInt(f.DualUntil.UnixMicro(), 10)
}

// ErrBadKeyFormat is returned for a fingerprint key whose value is none of
// FleetKeyFormat's forms.
var ErrBadKeyFormat = errors.New("redisstore: the key fingerprint's value is not one this version reads")

// ParseFleetKeyFormat parses a fingerprint key's value.
func ParseFleetKeyFormat(v string) (FleetKeyFormat, error) {
	if parts := strings.Split(v, ":"); len(parts) == 5 {
		us, err := strconv.ParseInt(parts[4], 10, 64)
		f := FleetKeyFormat{Fingerprint: parts[1], Previous: parts[3], RotateUntil: time.UnixMicro(us)}
		switch parts[0] {
		case "1":
			f.Format = rules.KeyFormat1
		case "2":
			f.Format = rules.KeyFormat2
		}
		if f.Format == 0 || f.Fingerprint == "" || parts[2] != "0" || f.Previous == "" || err != nil || us <= 0 {
			return FleetKeyFormat{}, ErrBadKeyFormat
		}
		return f, nil
	}
	rest, ok := strings.CutPrefix(v, "2:")
	if !ok {
		if v == "" || strings.Contains(v, ":") {
			return FleetKeyFormat{}, ErrBadKeyFormat
		}
		return FleetKeyFormat{Fingerprint: v, Format: rules.KeyFormat1}, nil
	}
	f := FleetKeyFormat{Format: rules.KeyFormat2}
	fp, until, dual := strings.Cut(rest, ":")
	if fp == "" {
		return FleetKeyFormat{}, ErrBadKeyFormat
	}
	f.Fingerprint = fp
	if dual {
		us, err := strconv.ParseInt(until, 10, 64)
		if err != nil || us <= 0 {
			return FleetKeyFormat{}, ErrBadKeyFormat
		}
		f.DualUntil = time.UnixMicro(us)
	}
	return f, nil
}

// ClaimKeyFormat is ClaimKeyFingerprint with the fleet's key format: an
// empty Redis is claimed as format 2 (SET NX: of several nodes starting at
// once, the first wins, and an old node racing a new one either wins, the
// fleet then being format 1, or finds format 2 and refuses to start);
// otherwise held is what Redis holds, a bare fingerprint being a format 1
// fleet. claimed reports that this call wrote it. With overwrite (a
// rotation of the secret, which restarts every counter) a different
// fingerprint is replaced by fp in the fleet's format (a migration's
// window is dropped: its counters restart), and held is still the old
// one. ctx bounds each round trip; there are at most three.
func (s *Store) ClaimKeyFormat(ctx context.Context, fp string, overwrite bool) (held FleetKeyFormat, claimed bool, err error) {
	c, err := s.hashes()
	if err != nil {
		return held, false, err
	}
	key := s.prefix + fingerprintKey
	mine := FleetKeyFormat{Fingerprint: fp, Format: rules.KeyFormat2}
	for range 2 {
		set, err := c.SetNX(ctx, key, mine.String(), 0).Result()
		if err != nil {
			return held, false, fmt.Errorf("redisstore: writing the key fingerprint: %w", err)
		}
		if set {
			return mine, true, nil
		}
		v, err := c.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue // removed between the two calls: claim it again, once
		}
		if err != nil {
			return held, false, fmt.Errorf("redisstore: reading the key fingerprint: %w", err)
		}
		held, err = ParseFleetKeyFormat(v)
		if err != nil && !overwrite {
			return held, false, err
		}
		if held.Fingerprint != fp && overwrite {
			next := FleetKeyFormat{Fingerprint: fp, Format: held.Format}
			if next.Format == 0 {
				next.Format = rules.KeyFormat2
			}
			if err := c.Set(ctx, key, next.String(), 0).Err(); err != nil {
				return held, false, fmt.Errorf("redisstore: overwriting the key fingerprint: %w", err)
			}
		}
		return held, false, nil
	}
	return held, false, nil
}

// ReadKeyFormat returns the fleet's key format as Redis holds it; redis.Nil
// (wrapped) when there is none.
func (s *Store) ReadKeyFormat(ctx context.Context) (FleetKeyFormat, error) {
	c, err := s.hashes()
	if err != nil {
		return FleetKeyFormat{}, err
	}
	v, err := c.Get(ctx, s.prefix+fingerprintKey).Result()
	if err != nil {
		return FleetKeyFormat{}, fmt.Errorf("redisstore: reading the key fingerprint: %w", err)
	}
	return ParseFleetKeyFormat(v)
}

// casScript sets KEYS[1] to ARGV[2] when it holds ARGV[1]; it returns what
// the key held.
var casScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) end
return v or ''`)

// MigrateKeyFormat starts a format 1 fleet's migration to format 2: the
// value from fp (format 1) to 2:<fp>:<until>, atomically (a script: the
// value must still be fp). It returns the format Redis held: a fleet
// already on format 2, or with another fingerprint, is left as it is.
func (s *Store) MigrateKeyFormat(ctx context.Context, fp string, until time.Time) (held FleetKeyFormat, err error) {
	c, err := s.hashes()
	if err != nil {
		return held, err
	}
	next := FleetKeyFormat{Fingerprint: fp, Format: rules.KeyFormat2, DualUntil: until}
	v, err := casScript.Run(ctx, c, []string{s.prefix + fingerprintKey}, fp, next.String()).Text()
	if err != nil {
		return held, fmt.Errorf("redisstore: migrating the key format: %w", err)
	}
	if v == "" {
		return held, fmt.Errorf("redisstore: migrating the key format: %w", redis.Nil)
	}
	return ParseFleetKeyFormat(v)
}

// StartRotation records a key-secret rotation: the value from held (what
// the caller read, the previous secret's fingerprint being
// held.Fingerprint) to fp in held's format, with held's fingerprint as
// the previous and a window to until, atomically (the value must still be
// held's). It returns what Redis held: another value means another node
// changed it first, and nothing was written.
func (s *Store) StartRotation(ctx context.Context, held FleetKeyFormat, fp string, until time.Time) (FleetKeyFormat, error) {
	c, err := s.hashes()
	if err != nil {
		return FleetKeyFormat{}, err
	}
	next := FleetKeyFormat{Fingerprint: fp, Format: held.Format, Previous: held.Fingerprint, RotateUntil: until}
	if next.Format == 0 {
		next.Format = rules.KeyFormat2
	}
	v, err := casScript.Run(ctx, c, []string{s.prefix + fingerprintKey}, held.String(), next.String()).Text()
	if err != nil {
		return FleetKeyFormat{}, fmt.Errorf("redisstore: recording the key secret's rotation: %w", err)
	}
	if v == "" {
		return FleetKeyFormat{}, fmt.Errorf("redisstore: recording the key secret's rotation: %w", redis.Nil)
	}
	return ParseFleetKeyFormat(v)
}
