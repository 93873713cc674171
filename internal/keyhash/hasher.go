package keyhash

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/netip"
	"time"

	"github.com/edge-gateway/edge/rules/counter"
)

// Hasher is one request's hashing under an engine's Keys: the keys of the
// values it hashes (Hash), and, in a migration or rotation window, their
// twins, which Expand sends with the request's ops. The zero value is
// ready for Begin; it is reused request after request (rules.Scratch holds
// one) and allocates nothing once warm. Not safe for concurrent use.
type Hasher struct {
	keys    *Keys
	mode    mode
	network uint32 // every op's counter.Op.Network (Expand)
	// mac and pmac are HMAC-SHA256 under the secret and the previous one
	// (format 1; HashClient), made on first use for their Keys: crypto/hmac
	// keeps the keyed inner and outer SHA-256 states, so each key then
	// costs two compressions.
	mac, pmac hash.Hash
	sum       []byte
	// prev is the last values hashed and prevSum their hash: keys alike in
	// one request (a limit and its shadow, a rule and the mint budget)
	// share one hash.
	prev    []byte
	prevSum [15]byte
	// pairs are the request's hashes and their twins (a migration, a
	// rotation); ops and res a store call's ops with their twins (Expand).
	pairs []pair
	ops   []counter.Op
	res   []counter.Result
	cbuf  []byte // HashClient's input
}

// pair is a hash in a request's ops (h1) and its twin (h2) for the same
// values: in a migration window, format 1 and format 2; in a rotation,
// under the secret and under the previous one.
type pair struct{ h1, h2 [15]byte }

// Begin starts a request hashed under k at now, whose client is of
// network (counter.Op.Network, 0 for none: Keys.Network): in k's format,
// and in a migration or rotation window when now is in one (Formats). It
// forgets the previous request's hashes.
func (h *Hasher) Begin(k *Keys, now time.Time, network uint32) {
	if h.keys != k {
		h.mac, h.pmac, h.keys = nil, nil, k // keyed by k's secrets
	}
	h.mode, h.network = k.mode(now), network
	h.prev, h.pairs = h.prev[:0], h.pairs[:0]
	if h.mode.hmac() && h.mac == nil {
		h.mac = newMAC(k.secret) // once per Hasher and Keys
	}
}

func newMAC(secret []byte) hash.Hash { return hmac.New(sha256.New, secret) }

// Hash returns the keyed hash of buf, encoded key values, 15 bytes, in the
// request's format: SipHash-2-4-128 in format 2, HMAC-SHA256 in format 1
// and in the migration window, where the format 2 twin is computed too and
// kept for Expand (in a rotation window, the twin under the previous
// secret). The bytes are h's until the next call.
func (h *Hasher) Hash(buf []byte) []byte {
	if len(h.prev) > 0 && bytes.Equal(buf, h.prev) {
		return h.prevSum[:]
	}
	switch h.mode {
	case mode2, modeRotate2:
		h.prevSum = sip15(h.keys.sip, buf)
	default:
		h.prevSum = h.hmac(h.mac, buf)
	}
	if h.mode != mode2 && h.mode != mode1 {
		if _, ok := h.twin(h.prevSum[:]); !ok {
			h.pairs = append(h.pairs, pair{h1: h.prevSum, h2: h.twinHash(buf)})
		}
	}
	h.prev = append(h.prev[:0], buf...)
	return h.prevSum[:]
}

// twinHash is the twin of buf's hash: format 2's in the migration
// window, the previous secret's in a rotation.
func (h *Hasher) twinHash(buf []byte) [15]byte {
	switch h.mode {
	case modeRotate2:
		return sip15(h.keys.prevSip, buf)
	case modeRotate1:
		if h.pmac == nil {
			h.pmac = newMAC(h.keys.prev) // once per Hasher and Keys
		}
		return h.hmac(h.pmac, buf)
	}
	return sip15(h.keys.sip, buf)
}

// hmac is format 1's hash of buf through mac.
func (h *Hasher) hmac(mac hash.Hash, buf []byte) (out [15]byte) {
	mac.Reset()
	mac.Write(buf)
	h.sum = mac.Sum(h.sum[:0])
	copy(out[:], h.sum)
	return out
}

// HashClient is Keys.HashClient without allocating, once warm, for the
// Keys of the last Begin.
func (h *Hasher) HashClient(a netip.Addr) [15]byte {
	if h.mac == nil {
		h.mac = newMAC(h.keys.secret) // a format 2 request made none
	}
	b := a.As16()
	h.cbuf = append(append(h.cbuf[:0], clientTag), b[:]...)
	return h.hmac(h.mac, h.cbuf)
}

// twin returns the twin of hash k, one Hash computed in this request.
func (h *Hasher) twin(k []byte) ([15]byte, bool) {
	for i := range h.pairs {
		if bytes.Equal(h.pairs[i].h1[:], k) {
			return h.pairs[i].h2, true
		}
	}
	return [15]byte{}, false
}

// twinMember returns the twin of a distinct op's Member (the first 8
// bytes of a Hash, big-endian); any other Member (a concurrency rule's
// lease ID) is its own twin.
func (h *Hasher) twinMember(m uint64) uint64 {
	for i := range h.pairs {
		if binary.BigEndian.Uint64(h.pairs[i].h1[:8]) == m {
			return binary.BigEndian.Uint64(h.pairs[i].h2[:8])
		}
	}
	return m
}

// twinOp returns op on the twin of its key (and Member), and whether its
// key has one: false for a key this request did not hash (there is none:
// every key is built by Hash), which is sent on its own key alone.
func (h *Hasher) twinOp(op counter.Op) (counter.Op, bool) {
	t, ok := h.twin(op.Key[9:])
	if !ok {
		return op, false
	}
	copy(op.Key[9:], t[:])
	if op.Algorithm.Spec().Members {
		op.Member = h.twinMember(op.Member)
	}
	return op, true
}

// Expand returns the ops and results of the store call that decides ops,
// a call of the request's whose keys h hashed, with the request's network
// set on every op (counter.Op.Network): ops and res themselves in one format, each op's
// KeyFormat set. In the migration window, ops (format 1, their KeyFormat
// left as it is) and their format 2 twins, the twins after every op; in a
// rotation window, each op (its KeyFormat set) followed by its twin under
// the previous secret (Op.Twin). The caller makes the call, then Fold.
func (h *Hasher) Expand(ops []counter.Op, res []counter.Result) ([]counter.Op, []counter.Result) {
	f := counter.KeyFormat2
	if h.mode == mode1 || h.mode == modeRotate1 {
		f = counter.KeyFormat1
	}
	switch h.mode {
	case mode2, mode1:
		for i := range ops {
			ops[i].Network, ops[i].KeyFormat = h.network, f // the Redis key's name says the format
		}
		return ops, res
	case modeDual:
		h.ops = h.ops[:0]
		for i := range ops {
			ops[i].Network = h.network
			h.ops = append(h.ops, ops[i])
			h.ops[i].KeyFormat = counter.KeyFormat1
		}
		for i := range ops {
			if t, ok := h.twinOp(ops[i]); ok {
				t.KeyFormat = counter.KeyFormat2
				h.ops = append(h.ops, t)
			}
		}
	default:
		h.ops = h.ops[:0]
		for i := range ops {
			ops[i].Network, ops[i].KeyFormat = h.network, f
			h.ops = append(h.ops, ops[i])
			if t, ok := h.twinOp(ops[i]); ok {
				t.Twin = true
				h.ops = append(h.ops, t)
			}
		}
	}
	if cap(h.res) < len(h.ops) {
		h.res = make([]counter.Result, len(h.ops))
	}
	h.res = h.res[:len(h.ops)]
	return h.ops, h.res
}

// Fold fills res, the results of ops, from the call Expand returned for
// them. An op sent with its twin is decided on both keys: allowed only
// when both are (a ban or a counter on either key refuses), with the
// larger RetryAfter and ResetAfter and the smaller Remaining. A store
// refuses a call as a whole when one enforcing take is refused (no op
// consumes but Attempts ops; a Redis Cluster undoes other slots' takes,
// redisstore's doc), so the two keys consume alike on every call of a
// window; they differ only by what nodes on one key alone wrote, and
// deciding on both can only be stricter than either. In a rotation the
// store carries a twin's state over to a key of the secret that has none
// (Op.Twin), so a counter, a ban or a lockout written before the rotation
// goes on refusing and from its first touch is held under the secret too:
// dropping the previous secret then forgets nothing that was touched, and
// what was not has decayed once the window has lasted the policy's
// longest key lifetime (rules.Policy.LongestKeyLifetime).
func (h *Hasher) Fold(ops []counter.Op, res []counter.Result) {
	switch h.mode {
	case mode2, mode1:
	case modeDual:
		n := len(ops)
		copy(res, h.res[:n])
		j := n
		for i := range ops {
			if j == len(h.ops) {
				break
			}
			if _, ok := h.twin(ops[i].Key[9:]); ok {
				res[i] = combine(res[i], h.res[j])
				j++
			}
		}
	default:
		j := 0
		for i := range ops {
			res[i] = h.res[j]
			j++
			if j < len(h.ops) && h.ops[j].Twin {
				res[i] = combine(res[i], h.res[j])
				j++
			}
		}
	}
}

// combine is the result of an op decided on two keys: refused when either
// refuses.
func combine(a, b counter.Result) counter.Result {
	r := a
	r.Allowed = a.Allowed && b.Allowed
	r.NetworkFull = a.NetworkFull || b.NetworkFull
	r.Remaining = min(a.Remaining, b.Remaining)
	r.ResetAfter = max(a.ResetAfter, b.ResetAfter)
	switch {
	case a.Allowed && !b.Allowed:
		r.RetryAfter = b.RetryAfter
	case !a.Allowed && !b.Allowed && (a.RetryAfter == counter.RetryNever || b.RetryAfter == counter.RetryNever):
		r.RetryAfter = counter.RetryNever
	case !a.Allowed && !b.Allowed:
		r.RetryAfter = max(a.RetryAfter, b.RetryAfter)
	}
	r.StoreError = a.StoreError || b.StoreError
	return r
}
