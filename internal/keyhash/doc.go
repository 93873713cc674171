// Package keyhash is the keyed hashing of counter keys (docs/deploying.md,
// "Key format and rolling upgrades"; docs/operations.md, "Rotating the key
// secret"): rules' Engine keys every counter, marker and distinct member by
// a keyed hash of the values a request carries, never by the values, and
// this package computes it. A counter key's last 15 bytes are that hash, in
// one of two formats:
//
//   - Format 1: HMAC-SHA256 under the key secret, truncated to 15 bytes
//     (two SHA-256 compressions a key after the first). The only format of
//     nodes before formats existed, byte for byte.
//   - Format 2: SipHash-2-4 with a 128-bit output (Aumasson and Bernstein,
//     "SipHash: a fast short-input PRF", 2012), truncated to 15 bytes,
//     under a 16-byte subkey derived once from the key secret:
//     HMAC-SHA256(secret, "edge key format 2")[:16]. Both are keyed PRFs: a
//     key reveals no value, and two deployments with different secrets
//     share no key; SipHash is made for inputs this short.
//
// A memory store is node-local and always uses format 2. A Redis shared by
// a fleet holds the fleet's format beside the key secret's fingerprint
// (redisstore.ClaimKeyFormat). Two windows send each op on two keys in one
// store call (Hasher.Expand), and decide on both (Hasher.Fold): a fleet
// moves from format 1 to 2 through a migration window (Formats.DualUntil),
// and from one key secret to another through a rotation window
// (Formats.RotateUntil), in which the store carries a key's state under the
// previous secret over to the key under the new one (counter.Op.Twin).
//
// Keys holds an engine's secrets and formats and is safe for concurrent
// use; a Hasher is one request's working state, owned by one goroutine
// (rules.Scratch holds one), and allocates nothing once warm.
package keyhash
