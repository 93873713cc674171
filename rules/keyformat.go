package rules

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/dchest/siphash"

	"github.com/edge-gateway/edge/rules/counter"
)

// Key formats (docs/deploying.md, "Key format and rolling upgrades"). A
// counter key's last 15 bytes are a keyed hash of its characteristic
// values; the format says which:
//
//   - KeyFormat1: HMAC-SHA256 under the key secret, truncated to 15 bytes
//     (two SHA-256 compressions a key after the first). The only format of
//     nodes before formats existed, byte for byte.
//   - KeyFormat2: SipHash-2-4 with a 128-bit output (Aumasson and
//     Bernstein, "SipHash: a fast short-input PRF", 2012), truncated to 15
//     bytes, under a 16-byte subkey derived once from the key secret:
//     HMAC-SHA256(secret, keyFormat2Label)[:16]. Both are keyed PRFs: a
//     key reveals no value, and two deployments with different secrets
//     share no key; SipHash is made for inputs this short.
//
// A memory store is node-local and always uses format 2. A Redis shared by
// a fleet holds the fleet's format beside the key secret's fingerprint
// (redisstore.ClaimKeyFormat); a fleet moves from 1 to 2 through a
// migration window (KeyFormats.DualUntil) in which every op is applied to
// both keys.

// KeyFormat is the format of a counter key's keyed hash (Key[9:24]),
// counter.KeyFormat.
type KeyFormat = counter.KeyFormat

const (
	// KeyFormat1 is HMAC-SHA256(secret, values)[:15].
	KeyFormat1 = counter.KeyFormat1
	// KeyFormat2 is SipHash-2-4-128(subkey, values)[:15], the 128-bit
	// output as its two 64-bit halves little-endian, low half first.
	KeyFormat2 = counter.KeyFormat2
)

// keyFormat2Label is what format 2's subkey is the HMAC of.
const keyFormat2Label = "edge key format 2"

// KeyFormats is what an engine hashes counter keys in.
type KeyFormats struct {
	// Format is the fleet's format: KeyFormat1 or KeyFormat2 (0 is
	// KeyFormat2).
	Format KeyFormat
	// DualUntil, when after a request's now, is a migration window from
	// format 1 to 2: every store op is applied to the key of each format,
	// in the same store call, and a result refuses when either key's does
	// (see Engine.take). From DualUntil on, Format alone.
	DualUntil time.Time
	// RotateUntil, when after a request's now and the engine has a
	// previous key secret (EngineOptions.PreviousSecret), is a key-secret
	// rotation window (docs/operations.md, "Rotating the key secret"):
	// every store op is keyed under the secret, in Format, and sent with
	// its twin under the previous secret (Op.Twin) in the same store call;
	// the store carries a twin's state over to a key that has none, and a
	// result refuses when either key's does. From RotateUntil on, the
	// secret alone. A migration window (DualUntil) takes precedence: the
	// previous secret is not read in one, so a node refuses to rotate
	// during a migration (cmd/edge).
	RotateUntil time.Time
}

// keyMode is how one request hashes its keys.
type keyMode uint8

const (
	mode2       keyMode = iota // format 2 only
	mode1                      // format 1 only
	modeDual                   // format 1 keys in Ops, each applied to its format 2 twin too
	modeRotate2                // format 2 keys in Ops, each sent with its twin under the previous secret
	modeRotate1                // the same in format 1
)

// hmac reports whether m hashes keys in format 1 (Scratch.mac).
func (m keyMode) hmac() bool { return m == mode1 || m == modeDual || m == modeRotate1 }

// mode returns the key mode of e's requests at now: f's, or a rotation
// mode when e has a previous secret and now is in f's rotation window.
func (e *Engine) mode(f *KeyFormats, now time.Time) keyMode {
	m := f.mode(now)
	if e.prevSecret == nil || m == modeDual || !now.Before(f.RotateUntil) {
		return m
	}
	if m == mode1 {
		return modeRotate1
	}
	return modeRotate2
}

// mode returns the key mode at now.
func (f *KeyFormats) mode(now time.Time) keyMode {
	switch {
	case f == nil:
		return mode2
	case now.Before(f.DualUntil):
		return modeDual
	case f.Format == KeyFormat1:
		return mode1
	}
	return mode2
}

// SetKeyFormats sets the formats the engine hashes keys in from the next
// request on; a request already decided keeps its own for its Settle and
// Release.
func (e *Engine) SetKeyFormats(f KeyFormats) {
	if f.Format == 0 {
		f.Format = KeyFormat2
	}
	e.formats.Store(&f)
}

// KeyFormats returns the formats the engine hashes keys in.
func (e *Engine) KeyFormats() KeyFormats { return *e.formats.Load() }

// initKeyFormats derives format 2's subkeys from the secret and the
// previous one, and sets f.
func (e *Engine) initKeyFormats(f KeyFormats) {
	e.sip0, e.sip1 = subkey(e.secret)
	if e.prevSecret != nil {
		e.prevSip0, e.prevSip1 = subkey(e.prevSecret)
	}
	e.SetKeyFormats(f)
}

// subkey is format 2's subkey of secret: HMAC-SHA256(secret,
// keyFormat2Label)[:16], as two little-endian halves.
func subkey(secret []byte) (k0, k1 uint64) {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyFormat2Label))
	sub := m.Sum(nil)
	return binary.LittleEndian.Uint64(sub[0:8]), binary.LittleEndian.Uint64(sub[8:16])
}

// Rotating reports whether e has a previous key secret and, if so,
// until when it reads keys under it (KeyFormats.RotateUntil; the window
// may be over).
func (e *Engine) Rotating() (until time.Time, ok bool) {
	if e.prevSecret == nil {
		return time.Time{}, false
	}
	return e.formats.Load().RotateUntil, true
}

// sipHash is format 2's hash of buf: SipHash-2-4-128 under the engine's
// subkey, truncated to 15 bytes.
func (e *Engine) sipHash(buf []byte) (h [15]byte) { return sip15(e.sip0, e.sip1, buf) }

// prevSipHash is sipHash under the previous secret's subkey.
func (e *Engine) prevSipHash(buf []byte) (h [15]byte) { return sip15(e.prevSip0, e.prevSip1, buf) }

func sip15(k0, k1 uint64, buf []byte) (h [15]byte) {
	lo, hi := siphash.Hash128(k0, k1, buf)
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:8], lo)
	binary.LittleEndian.PutUint64(b[8:16], hi)
	copy(h[:], b[:15])
	return h
}

// hmacHash is format 1's hash of buf, through s's pooled HMAC (created
// once per pooled Scratch and engine: crypto/hmac keeps the keyed inner
// and outer SHA-256 states, so each key then costs two compressions).
func (s *Scratch) hmacHash(buf []byte) (h [15]byte) {
	s.mac.Reset()
	s.mac.Write(buf)
	s.sum = s.mac.Sum(s.sum[:0])
	copy(h[:], s.sum)
	return h
}

// prevHMACHash is hmacHash under the previous secret (modeRotate1).
func (s *Scratch) prevHMACHash(buf []byte) (h [15]byte) {
	if s.pmac == nil {
		s.pmac = hmac.New(sha256.New, s.owner.prevSecret) // once per pooled Scratch and engine
	}
	s.pmac.Reset()
	s.pmac.Write(buf)
	s.sum = s.pmac.Sum(s.sum[:0])
	copy(h[:], s.sum)
	return h
}

// hashPair is a hash in Ops (h1) and its twin (h2) for the same values: in
// modeDual, format 1 and format 2; in a rotation, under the secret and
// under the previous one.
type hashPair struct{ h1, h2 [15]byte }

// twin returns the format 2 twin of h, a format 1 hash s computed in its
// current request.
func (s *Scratch) twin(h []byte) ([15]byte, bool) {
	for i := range s.pairs {
		if bytes.Equal(s.pairs[i].h1[:], h) {
			return s.pairs[i].h2, true
		}
	}
	return [15]byte{}, false
}

// twinMember returns the format 2 twin of a distinct op's Member (the
// first 8 bytes of a format 1 hash, big-endian); any other Member (a
// concurrency rule's lease ID) is its own twin.
func (s *Scratch) twinMember(m uint64) uint64 {
	for i := range s.pairs {
		if binary.BigEndian.Uint64(s.pairs[i].h1[:8]) == m {
			return binary.BigEndian.Uint64(s.pairs[i].h2[:8])
		}
	}
	return m
}

// take is the engine's every Store.Take of a request s decided. In the
// migration window (modeDual) each op of ops, whose keys are format 1, is
// sent together with its format 2 twin (the same op on the twin key and
// Member) in the same store call, and res[i] is the two results combined:
// allowed only when both are (a ban or a counter on either key refuses),
// with the larger RetryAfter and ResetAfter and the smaller Remaining. A
// store refuses a call as a whole when one enforcing take is refused (no
// op consumes but Attempts ops; a Redis Cluster undoes other slots'
// takes, redisstore's doc), so the two keys consume alike on every call
// of the window; they differ only by what nodes on one format alone
// wrote, and deciding on both can only be stricter than either.
func (e *Engine) take(ctx context.Context, now time.Time, s *Scratch, ops []Op, res []Result) error {
	switch s.mode {
	case modeRotate2, modeRotate1:
		return e.takeRotating(ctx, now, s, ops, res)
	case mode2, mode1:
		f := KeyFormat2
		if s.mode == mode1 {
			f = KeyFormat1
		}
		for i := range ops {
			ops[i].KeyFormat = f // the Redis key's name says the format
			ops[i].Network = s.network
		}
		return e.store.Take(ctx, now, ops, res)
	}
	n := len(ops)
	for i := range ops {
		ops[i].Network = s.network
	}
	s.dops = append(s.dops[:0], ops...)
	for i := range ops {
		s.dops[i].KeyFormat = KeyFormat1
		op := ops[i]
		h2, ok := s.twin(op.Key[9:])
		if !ok {
			// A key this request did not hash (none: every key is built
			// by valueHash): format 1 alone, which the window's nodes
			// all write.
			continue
		}
		copy(op.Key[9:], h2[:])
		op.KeyFormat = KeyFormat2
		if op.Algorithm.Spec().Members {
			op.Member = s.twinMember(op.Member)
		}
		s.dops = append(s.dops, op)
	}
	err := e.takeTwins(ctx, now, s)
	copy(res, s.dres[:n])
	j := n
	for i := range ops {
		if j == len(s.dops) {
			break
		}
		if _, ok := s.twin(ops[i].Key[9:]); !ok {
			continue
		}
		res[i] = combine(res[i], s.dres[j])
		j++
	}
	return err
}

// takeTwins sends s.dops, a call's ops with their twins, to the store in
// one call, their results in s.dres.
func (e *Engine) takeTwins(ctx context.Context, now time.Time, s *Scratch) error {
	if cap(s.dres) < len(s.dops) {
		s.dres = make([]Result, len(s.dops))
	}
	s.dres = s.dres[:len(s.dops)]
	return e.store.Take(ctx, now, s.dops, s.dres)
}

// takeRotating is take in a key-secret rotation window (modeRotate2,
// modeRotate1): each op of ops, keyed under the secret, is sent with its
// twin under the previous secret right after it (Op.Twin: the same op on
// the twin key and Member), in the same store call, and res[i] is the two
// results combined as in the migration window. The store carries a twin's
// state over to a key of the secret that has none (Op.Twin), so a counter,
// a ban or a lockout written before the rotation goes on refusing, and
// from the first touch on is held under the secret too: dropping the
// previous secret then forgets nothing that was touched, and what was not
// has decayed once the window has lasted the policy's LongestKeyLifetime.
func (e *Engine) takeRotating(ctx context.Context, now time.Time, s *Scratch, ops []Op, res []Result) error {
	f := KeyFormat2
	if s.mode == modeRotate1 {
		f = KeyFormat1
	}
	s.dops = s.dops[:0]
	for i := range ops {
		ops[i].KeyFormat = f
		ops[i].Network = s.network
		s.dops = append(s.dops, ops[i])
		h2, ok := s.twin(ops[i].Key[9:])
		if !ok {
			continue // a key this request did not hash (none): the secret's alone
		}
		op := ops[i]
		copy(op.Key[9:], h2[:])
		op.Twin = true
		if op.Algorithm.Spec().Members {
			op.Member = s.twinMember(op.Member)
		}
		s.dops = append(s.dops, op)
	}
	err := e.takeTwins(ctx, now, s)
	j := 0
	for i := range ops {
		res[i] = s.dres[j]
		j++
		if j < len(s.dops) && s.dops[j].Twin {
			res[i] = combine(res[i], s.dres[j])
			j++
		}
	}
	return err
}

// combine is the result of an op decided on two keys: refused when either
// refuses.
func combine(a, b Result) Result {
	r := a
	r.Allowed = a.Allowed && b.Allowed
	r.NetworkFull = a.NetworkFull || b.NetworkFull
	r.Remaining = min(a.Remaining, b.Remaining)
	r.ResetAfter = max(a.ResetAfter, b.ResetAfter)
	switch {
	case a.Allowed && !b.Allowed:
		r.RetryAfter = b.RetryAfter
	case !a.Allowed && !b.Allowed && (a.RetryAfter == RetryNever || b.RetryAfter == RetryNever):
		r.RetryAfter = RetryNever
	case !a.Allowed && !b.Allowed:
		r.RetryAfter = max(a.RetryAfter, b.RetryAfter)
	}
	r.StoreError = a.StoreError || b.StoreError
	return r
}

// LongestKeyLifetime bounds how long any key p's rules write lives, for
// a migration window from format 1 to 2 (docs/deploying.md) and a
// key-secret rotation's window (docs/operations.md): each rule's period
// (or a WindowShaper's longest window: a calendar day's 25 hours, a week
// and an hour, 31 days and an hour, for the DST days), times its
// algorithm's counter.Spec.Periods (twice the period for a
// sliding_window, whose count weighs in the estimate until the end of the
// window after its own, counter.Settle's reset), for an algorithm of a
// burst (Spec.Burst) times one plus its burst over its limit (a GCRA or
// bucket state holding a burst outlives one period), its
// IP ceiling's alike, and its stages' keys (KeyKeeper: a known_visitors
// marker, a ban's); a concurrency rule's period is its lease.
// Exemption markers (forgive, at most MaxExempt) are not counted: one
// written in format 1 alone ends early, which only makes a limit stricter.
func (p *Policy) LongestKeyLifetime() time.Duration {
	var longest time.Duration
	for _, r := range p.Rules {
		d, _ := r.longestWindow()
		ratio := 0.0
		spec := r.Algorithm.Spec()
		// sliding_window's state lasts 2 periods; the window algorithms
		// ignore burst.
		d *= time.Duration(max(spec.Periods, 1))
		if spec.Burst {
			if r.Limit > 0 {
				ratio = float64(r.Burst) / float64(r.Limit)
			}
			if r.IPCeiling > 0 {
				ratio = max(ratio, float64(r.CeilingBurst)/float64(r.IPCeiling))
			}
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
