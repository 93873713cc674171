package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/edge-gateway/edge/rules/redisstore"
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
// (docs/operations.md, "Rotating the key secret"). Counter keys are keyed
// hashes under the secret, so a node with another secret counts every
// client afresh: a silent reset of every limit. The first node writes its
// secret's fingerprint to Redis; a node whose fingerprint differs refuses
// to start, unless rotate (the -rotate-key-secret flag) acknowledges the
// reset, which overwrites the fingerprint (the fleet's other nodes then
// refuse to restart with the old secret). A Redis that does not answer
// within fingerprintTimeout does not stop the node (it serves degraded, as
// openStore says): the check is skipped, with a warning.
func checkKeySecret(rs *redisstore.Store, secret []byte, env string, rotate bool, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), fingerprintTimeout)
	defer cancel()
	fp := keyFingerprint(secret)
	held, err := rs.ClaimKeyFingerprint(ctx, fp, rotate)
	switch {
	case err != nil:
		log.Warn("could not check the key secret against redis: a node started with another secret than the fleet's would count every client afresh", "env", env, "error", err.Error())
		return nil
	case held == "":
		log.Info("key secret fingerprint written to redis", "fingerprint", fp[:16])
	case held == fp:
	case rotate:
		log.Warn("key secret rotated (-rotate-key-secret): every counter in redis restarts from zero, and nodes still on the old secret refuse to restart", "env", env, "old_fingerprint", held[:min(16, len(held))], "fingerprint", fp[:16])
	default:
		return fmt.Errorf("the key secret in $%s is not the one the counters in redis are keyed under (fingerprint %s, redis holds %s): starting would silently reset every limit; give this node the fleet's secret, or, to rotate it on purpose, start one node with -rotate-key-secret and then the others with the new secret (docs/operations.md, \"Rotating the key secret\")",
			env, fp[:16], held[:min(16, len(held))])
	}
	return nil
}
