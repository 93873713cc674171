package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
	"github.com/redis/go-redis/v9"
)

// fingerprintLabel is what the key secret's fingerprint is an HMAC of.
const fingerprintLabel = "edge key fingerprint"

// fingerprintTimeout bounds the fingerprint's round trips at start.
const fingerprintTimeout = 2 * time.Second

// keyFingerprint is the fingerprint of a key secret that Redis keeps
// beside the counters: HMAC-SHA256(secret, fingerprintLabel) in hex. It
// tells whether two secrets are the same and nothing more (HMAC is a PRF:
// RFC 2104 §6), unlike a plain hash of a secret someone could guess.
func keyFingerprint(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(fingerprintLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// checkKeySecret holds a Redis-backed node to the fleet's key secret
// (docs/operations.md, "Rotating the key secret") and returns the fleet's
// key format (docs/deploying.md, "Key format and rolling upgrades").
// Counter keys are keyed hashes under the secret, so a node with another
// secret counts every client afresh: a silent reset of every limit. The
// first node writes its secret's fingerprint to Redis, claiming format 2; a
// fingerprint without a format (what nodes before key formats write) is a
// format 1 fleet, which the node joins in format 1. A node whose
// fingerprint differs refuses to start, unless rotate (the
// -rotate-key-secret flag) acknowledges the reset, which overwrites the
// fingerprint (the fleet's other nodes then refuse to restart with the old
// secret). A Redis that does not answer within fingerprintTimeout does not
// stop the node (it serves degraded, as openStore says): the check is
// skipped, with a warning, and the node applies every op in both formats
// (unknownKeyFormat) until watchKeyFormat reads the fleet's.
func checkKeySecret(rs *redisstore.Store, secret []byte, env string, rotate bool, log *slog.Logger) (rules.KeyFormats, error) {
	return checkKeySecrets(rs, secret, nil, env, rotate, 0, time.Now(), log)
}

// previousSecretEnv names the variable of the previous key secret, read
// in a rotation: the key secret's own, such as EDGE_KEY_SECRET, and
// "_PREVIOUS".
func previousSecretEnv(env string) string { return env + "_PREVIOUS" }

// checkKeySecrets is checkKeySecret with prev, the previous key secret
// ($<env>_PREVIOUS; nil when unset), which rotates the fleet's secret
// without resetting a counter (docs/operations.md, "Rotating the key
// secret"). A node whose previous secret's fingerprint is the one Redis
// holds starts the rotation: it records the new fingerprint, the previous
// one and the window's end (now plus lifetime, the policy's longest key
// lifetime, plus migrationMargin) atomically, and reads keys under both
// secrets until then. A node with both secrets that finds the rotation
// recorded joins it. During the window a node with the new secret alone
// refuses to start (it would not read what the old keys hold), and one
// with the old secret alone starts with a warning (it reads and writes
// the old keys, which the rotating nodes read too). A rotation waits for
// a key format migration's end.
func checkKeySecrets(rs *redisstore.Store, secret, prev []byte, env string, rotate bool, lifetime time.Duration, now time.Time, log *slog.Logger) (rules.KeyFormats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fingerprintTimeout)
	defer cancel()
	fp := keyFingerprint(secret)
	pfp := ""
	if len(prev) > 0 {
		pfp = keyFingerprint(prev)
	}
	penv := previousSecretEnv(env)
	held, claimed, err := rs.ClaimKeyFormat(ctx, fp, rotate)
	rotating := held.Previous != "" && now.Before(held.RotateUntil)
	switch {
	case err == nil && !claimed && held.Fingerprint == fp && rotating && pfp != held.Previous:
		return rules.KeyFormats{}, fmt.Errorf("the fleet is rotating its key secret until %s: a node with the new secret alone would not read what the counters under the previous one hold; give this node the previous secret in $%s too, or start it after then (docs/operations.md, \"Rotating the key secret\")", held.RotateUntil.UTC().Format(time.RFC3339), penv)
	case err == nil && !claimed && held.Fingerprint == fp && rotating:
		log.Info("joining the fleet's key secret rotation: keys are read under the previous secret too until the window ends; drop $"+penv+" after it", "until", held.RotateUntil.UTC().Format(time.RFC3339))
		return held.KeyFormats(), nil
	case err == nil && !claimed && held.Fingerprint == fp && pfp != "":
		log.Warn("$"+penv+" is set but redis records no key secret rotation under way from it: the previous secret is not read (remove it)", "fingerprint", fp[:16])
		f := held.KeyFormats()
		f.RotateUntil = time.Time{}
		return f, nil
	case err == nil && !claimed && pfp != "" && held.Fingerprint == pfp:
		if now.Before(held.DualUntil) {
			return rules.KeyFormats{}, fmt.Errorf("a key format migration is under way until %s: rotate the key secret after it ends", held.DualUntil.UTC().Format(time.RFC3339))
		}
		until := now.Add(lifetime + migrationMargin)
		got, err := rs.StartRotation(ctx, held, fp, until)
		switch {
		case err == nil && got.String() == held.String():
			got, _ = redisstore.ParseFleetKeyFormat(redisstore.FleetKeyFormat{Fingerprint: fp, Format: held.Format, Previous: pfp, RotateUntil: until}.String())
			log.Warn("key secret rotation started: counter keys are now hashed under the new secret, and read under the previous one too until the window ends (the policy's longest key lifetime and a margin); restart the other nodes with both secrets, and drop $"+penv+" everywhere after it", "until", until.UTC().Format(time.RFC3339), "longest_key_lifetime", lifetime.String(), "old_fingerprint", pfp[:16], "fingerprint", fp[:16])
			return got.KeyFormats(), nil
		case err == nil && got.Fingerprint == fp && got.Previous == pfp:
			return got.KeyFormats(), nil // another node started it first
		case err == nil:
			return rules.KeyFormats{}, fmt.Errorf("the fleet's key fingerprint changed while this node started a key secret rotation; start it again")
		}
		return rules.KeyFormats{}, fmt.Errorf("starting the key secret rotation: %w", err)
	case err == nil && !claimed && held.Previous == fp && rotating:
		log.Warn("this node's key secret is the one the fleet is rotating away from: it counts under the old secret alone, which the rotating nodes read too; restart it with the new secret and this one in $"+penv, "until", held.RotateUntil.UTC().Format(time.RFC3339))
		f := held.KeyFormats()
		f.RotateUntil = time.Time{}
		return f, nil
	}
	switch {
	case err != nil:
		log.Warn("could not check the key secret against redis: a node started with another secret than the fleet's would count every client afresh", "env", env, "error", err.Error())
		return unknownKeyFormat(), nil
	case claimed:
		log.Info("key secret fingerprint written to redis, key format 2", "fingerprint", fp[:16])
		return held.KeyFormats(), nil
	case held.Fingerprint == fp:
		if held.Format == rules.KeyFormat1 {
			log.Info("joining a key format 1 fleet: counter keys are hashed as older nodes hash them; run edge key-format migrate once every node runs this version (docs/deploying.md)")
		}
		return held.KeyFormats(), nil
	case rotate:
		log.Warn("key secret rotated (-rotate-key-secret): every counter in redis restarts from zero, and nodes still on the old secret refuse to restart", "env", env, "old_fingerprint", held.Fingerprint[:min(16, len(held.Fingerprint))], "fingerprint", fp[:16])
		f := held.KeyFormats()
		f.DualUntil = time.Time{} // every counter restarts: nothing to migrate
		return f, nil
	}
	return rules.KeyFormats{}, fmt.Errorf("the key secret in $%s is not the one the counters in redis are keyed under (fingerprint %s, redis holds %s): starting would silently reset every limit; give this node the fleet's secret, or, to rotate it on purpose, start the nodes with the new secret and the fleet's in $%s (or, resetting every counter, one node with -rotate-key-secret) (docs/operations.md, \"Rotating the key secret\")",
		env, fp[:16], held.Fingerprint[:min(16, len(held.Fingerprint))], previousSecretEnv(env))
}

// unknownKeyFormat is the key format of a node that could not read the
// fleet's: every op applied in both formats, refused when either key
// refuses, which is safe beside nodes of either format (internal/keyhash)
// at twice the store's work, until the fleet's is read.
func unknownKeyFormat() rules.KeyFormats {
	return rules.KeyFormats{Format: rules.KeyFormat1, DualUntil: time.Unix(1<<40, 0)}
}

// keyFormatPoll is how often a Redis-backed node reads the fleet's key
// format, so that a migration started by edge key-format migrate reaches
// every node within it; keyFormatStale is how long a node trusts what it
// read last when reads fail.
const (
	keyFormatPoll  = 10 * time.Second
	keyFormatStale = 3 * keyFormatPoll
)

// watchKeyFormat reads the fleet's key format on every tick until ctx
// ends and sets it on e (keyFormatPoller.poll says how). now is the clock
// (tests inject one); tick paces the loop.
func watchKeyFormat(ctx context.Context, rs *redisstore.Store, e *rules.Engine, fp string, now func() time.Time, tick <-chan time.Time, log *slog.Logger) {
	p := newKeyFormatPoller(rs, e, fp, now, log)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			p.poll(ctx)
		}
	}
}

// keyFormatPoller is what watchKeyFormat carries from one read to the
// next: when a read last succeeded, and what it read under fp.
type keyFormatPoller struct {
	rs     *redisstore.Store
	e      *rules.Engine
	fp     string
	now    func() time.Time
	log    *slog.Logger
	lastOK time.Time
	last   redisstore.FleetKeyFormat // the last read under fp; zero before one
}

func newKeyFormatPoller(rs *redisstore.Store, e *rules.Engine, fp string, now func() time.Time, log *slog.Logger) *keyFormatPoller {
	return &keyFormatPoller{rs: rs, e: e, fp: fp, now: now, log: log, lastOK: now()}
}

// poll reads the fleet's key format once, within fingerprintTimeout, and
// sets it on e. A fingerprint other than fp leaves e as it is (the secret
// was rotated under the node, which restarts to follow). When reads have
// failed for keyFormatStale and e is not on format 2 for good, e applies
// every op in both formats (unknownKeyFormat) until a read succeeds: a
// node cut off from Redis through a migration's end must not come back
// writing format 1 alone. A marker gone from a Redis that answers
// (restarted empty) is written back as this node last read it (SET NX),
// so a node of the fleet starting next finds the fleet's format rather
// than claiming format 2 beside nodes on format 1.
func (p *keyFormatPoller) poll(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, fingerprintTimeout)
	held, err := p.rs.ReadKeyFormat(rctx)
	cancel()
	t := p.now()
	switch {
	case errors.Is(err, redis.Nil) && p.last.Fingerprint != "":
		wctx, wcancel := context.WithTimeout(ctx, fingerprintTimeout)
		_, werr := p.rs.ClaimKeyFingerprint(wctx, p.last.String(), false)
		wcancel()
		if werr == nil {
			p.lastOK = t
			p.log.Warn("the fleet's key format was gone from redis (restarted empty?): wrote back the one this node read last", "format", int(p.last.Format), "dual_until", p.last.DualUntil)
		}
	case err != nil:
		cur := p.e.KeyFormats()
		final := cur.Format == rules.KeyFormat2 && !t.Before(cur.DualUntil)
		if t.Sub(p.lastOK) >= keyFormatStale && !final && cur != unknownKeyFormat() {
			p.log.Warn("could not read the fleet's key format: applying every counter op in both formats until it is read", "error", err.Error())
			p.e.SetKeyFormats(unknownKeyFormat())
		}
	case held.Fingerprint != p.fp:
		p.lastOK = t
	default:
		p.lastOK = t
		p.last = held
		if f := held.KeyFormats(); f != p.e.KeyFormats() {
			p.log.Info("key format of the fleet changed", "format", int(f.Format), "dual_until", f.DualUntil)
			p.e.SetKeyFormats(f)
		}
	}
}
