package keyhash

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/dchest/siphash"

	"github.com/edge-gateway/edge/rules/counter"
)

// Formats is what an engine hashes counter keys in (rules.KeyFormats).
type Formats struct {
	// Format is the fleet's format: counter.KeyFormat1 or KeyFormat2 (0
	// is KeyFormat2).
	Format counter.KeyFormat
	// DualUntil, when after a request's now, is a migration window from
	// format 1 to 2: every store op is applied to the key of each format,
	// in the same store call, and a result refuses when either key's does
	// (Hasher.Expand). From DualUntil on, Format alone.
	DualUntil time.Time
	// RotateUntil, when after a request's now and the engine has a
	// previous key secret, is a key-secret rotation window
	// (docs/operations.md, "Rotating the key secret"): every store op is
	// keyed under the secret, in Format, and sent with its twin under the
	// previous secret (counter.Op.Twin) in the same store call; the store
	// carries a twin's state over to a key that has none, and a result
	// refuses when either key's does. From RotateUntil on, the secret
	// alone. A migration window (DualUntil) takes precedence: the previous
	// secret is not read in one, so a node refuses to rotate during a
	// migration (cmd/edge).
	RotateUntil time.Time
}

// mode is how one request hashes its keys.
type mode uint8

const (
	mode2       mode = iota // format 2 only
	mode1                   // format 1 only
	modeDual                // format 1 keys in the ops, each applied to its format 2 twin too
	modeRotate2             // format 2 keys in the ops, each sent with its twin under the previous secret
	modeRotate1             // the same in format 1
)

// hmac reports whether m hashes keys in format 1 (Hasher.mac).
func (m mode) hmac() bool { return m == mode1 || m == modeDual || m == modeRotate1 }

// format2Label is what format 2's subkey is the HMAC of.
const format2Label = "edge key format 2"

// ErrSamePrevious is returned by New when the previous secret is the
// secret: a rotation needs two.
var ErrSamePrevious = errors.New("rules: the previous key secret is the key secret")

// Keys is an engine's key secret, its previous one (a rotation's), their
// format 2 subkeys and the formats the engine hashes in. Safe for
// concurrent use: the formats are swapped atomically, the rest never
// changes.
type Keys struct {
	secret, prev []byte // prev is nil without a previous secret
	sip, prevSip [2]uint64
	formats      atomic.Pointer[Formats]
}

// New returns the Keys of secret (empty: 32 random bytes, which suit one
// node with a memory store only) and prev (empty: none), hashing in f. It
// fails with ErrSamePrevious when prev is secret, or when the system's
// random source does.
func New(secret, prev []byte, f Formats) (*Keys, error) {
	k := &Keys{secret: bytes.Clone(secret)}
	if len(k.secret) == 0 {
		k.secret = make([]byte, 32)
		if _, err := rand.Read(k.secret); err != nil {
			return nil, err
		}
	}
	k.sip = subkey(k.secret)
	if len(prev) > 0 {
		if bytes.Equal(prev, k.secret) {
			return nil, ErrSamePrevious
		}
		k.prev = bytes.Clone(prev)
		k.prevSip = subkey(k.prev)
	}
	k.SetFormats(f)
	return k, nil
}

// subkey is format 2's subkey of secret: HMAC-SHA256(secret,
// format2Label)[:16], as two little-endian halves.
func subkey(secret []byte) [2]uint64 {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(format2Label))
	sub := m.Sum(nil)
	return [2]uint64{binary.LittleEndian.Uint64(sub[0:8]), binary.LittleEndian.Uint64(sub[8:16])}
}

// SetFormats sets the formats k hashes in from the next Hasher.Begin on (0
// is format 2).
func (k *Keys) SetFormats(f Formats) {
	if f.Format == 0 {
		f.Format = counter.KeyFormat2
	}
	k.formats.Store(&f)
}

// Formats returns the formats k hashes in.
func (k *Keys) Formats() Formats { return *k.formats.Load() }

// mode returns the key mode of a request at now: the formats', or a
// rotation mode when k has a previous secret and now is in the rotation
// window (outside a migration window, which takes precedence).
func (k *Keys) mode(now time.Time) mode {
	f := k.formats.Load()
	m := mode2
	switch {
	case now.Before(f.DualUntil):
		return modeDual
	case f.Format == counter.KeyFormat1:
		m = mode1
	}
	if k.prev == nil || !now.Before(f.RotateUntil) {
		return m
	}
	if m == mode1 {
		return modeRotate1
	}
	return modeRotate2
}

// sip15 is format 2's hash of buf under the subkey sk: SipHash-2-4-128,
// its halves little-endian, low half first, truncated to 15 bytes.
func sip15(sk [2]uint64, buf []byte) (h [15]byte) {
	lo, hi := siphash.Hash128(sk[0], sk[1], buf)
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:8], lo)
	binary.LittleEndian.PutUint64(b[8:16], hi)
	copy(h[:], b[:15])
	return h
}

// clientTag is the domain byte before a client address in HashClient, so
// that its hash never equals a counter key's.
const clientTag = 0xfd

// HashClient is the keyed hash of a client address (HMAC-SHA256 under the
// key secret, as format 1 keys are, truncated to 15 bytes), for logs and
// the admin API: an operator can follow one client without the log
// holding its address. The address is hashed as its 16-byte form after a
// domain byte. It allocates; Hasher.HashClient does not.
func (k *Keys) HashClient(a netip.Addr) (h [15]byte) {
	b := a.As16()
	mac := hmac.New(sha256.New, k.secret)
	mac.Write([]byte{clientTag})
	mac.Write(b[:])
	copy(h[:], mac.Sum(nil))
	return h
}

// Network is the network of a client at a (counter.Op.Network;
// docs/memory-store.md, "Network shares"): the keyed hash (SipHash-2-4
// under the format 2 subkey, tagged apart from every counter key's) of a
// masked to bits4 (an IPv4 address) or bits6 (an IPv6 one) bits, never 0,
// so that a store can count a network's keys without learning it. It does
// not allocate.
func (k *Keys) Network(a netip.Addr, bits4, bits6 int) uint32 {
	// 'n', the family, the prefix length, the masked address (IPv4 in the
	// first 4 of 16 bytes): as ipv6.AppendKey encodes a prefix, without
	// building a netip.Prefix.
	var b [19]byte
	b[0] = 'n'
	a = a.Unmap()
	if a.Is4() {
		b[1], b[2] = 4, byte(bits4)
		v := a.As4()
		binary.BigEndian.PutUint32(b[3:], binary.BigEndian.Uint32(v[:])&^(math.MaxUint32>>bits4))
	} else {
		b[1], b[2] = 6, byte(bits6)
		v := a.As16()
		hi, lo := binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])
		if bits6 < 64 {
			hi, lo = hi&^(math.MaxUint64>>bits6), 0
		} else {
			lo &^= math.MaxUint64 >> (bits6 - 64)
		}
		binary.BigEndian.PutUint64(b[3:], hi)
		binary.BigEndian.PutUint64(b[11:], lo)
	}
	h := uint32(siphash.Hash(k.sip[0], k.sip[1], b[:]))
	if h == 0 {
		h = 1 // 0 is no network
	}
	return h
}
