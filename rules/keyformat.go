package rules

import (
	"context"
	"time"

	"github.com/edge-gateway/edge/internal/keyhash"
	"github.com/edge-gateway/edge/rules/counter"
)

// KeyFormat is the format of a counter key's keyed hash (Key[9:24]),
// counter.KeyFormat; package internal/keyhash computes it
// (docs/deploying.md, "Key format and rolling upgrades").
type KeyFormat = counter.KeyFormat

const (
	// KeyFormat1 is HMAC-SHA256(secret, values)[:15].
	KeyFormat1 = counter.KeyFormat1
	// KeyFormat2 is SipHash-2-4-128(subkey, values)[:15], the 128-bit
	// output as its two 64-bit halves little-endian, low half first.
	KeyFormat2 = counter.KeyFormat2
)

// KeyFormats is what an engine hashes counter keys in (keyhash.Formats): a
// Format, a migration window until DualUntil, a rotation's until RotateUntil.
type KeyFormats = keyhash.Formats

// SetKeyFormats sets the formats the engine hashes keys in from the next
// request on (0 is KeyFormat2); a request already decided keeps its own
// for its Settle and Release.
func (e *Engine) SetKeyFormats(f KeyFormats) { e.keys.SetFormats(f) }

// KeyFormats returns the formats the engine hashes keys in.
func (e *Engine) KeyFormats() KeyFormats { return e.keys.Formats() }

// take is the engine's every Store.Take of a request s decided: one call,
// carrying each op's twin too in a migration or rotation window, each
// result then decided on both keys (keyhash.Hasher.Expand, Fold).
func (e *Engine) take(ctx context.Context, now time.Time, s *Scratch, ops []Op, res []Result) error {
	sops, sres := s.keys.Expand(ops, res)
	err := e.store.Take(ctx, now, sops, sres)
	s.keys.Fold(ops, res)
	return err
}

// LongestKeyLifetime bounds how long any key p's rules write lives, for a
// migration window from format 1 to 2 (docs/deploying.md) and a key-secret
// rotation's (docs/operations.md): each rule's longest window (its period,
// or a WindowShaper's) times its algorithm's counter.Spec.Periods, for an
// algorithm of a burst times one plus its burst over its limit (its IP
// ceiling's alike), and its stages' keys (KeyKeeper; a concurrency rule's
// period is its lease); not a forgive's exemption (at most forgive.MaxExempt), which, written in format 1
// alone, ends early: that only makes a limit stricter.
func (p *Policy) LongestKeyLifetime() time.Duration {
	var longest time.Duration
	for _, r := range p.Rules {
		d, _ := r.longestWindow()
		spec := r.Algorithm.Spec()
		d *= time.Duration(max(spec.Periods, 1)) // sliding_window's state lasts 2 periods
		ratio := 0.0
		if spec.Burst && r.Limit > 0 { // the window algorithms ignore burst
			ratio = float64(r.Burst) / float64(r.Limit)
		}
		if spec.Burst && r.IPCeiling > 0 {
			ratio = max(ratio, float64(r.CeilingBurst)/float64(r.IPCeiling))
		}
		d += time.Duration(float64(d) * ratio)
		longest = max(longest, d)
		for _, st := range r.stages {
			if k, ok := st.(KeyKeeper); ok {
				longest = max(longest, k.KeyLifetime()) // known_visitors', a ban's marker
			}
		}
	}
	return longest
}
