package nat

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// ID is a visitor ID: 128 random bits from crypto/rand, minted by the edge.
// It is comparable and allocation-free as a map key.
type ID [16]byte

// Defaults applied by NewSigner to zero Options fields. They match the
// `visitor { }` block's defaults in docs/policy.md.
const (
	DefaultCookie = "__edge_vid"
	DefaultMaxAge = 720 * time.Hour
)

// Limits enforced by NewSigner and Verify.
const (
	// MinSecretLen is the shortest secret accepted, in bytes (128 bits).
	MinSecretLen = 16
	// MaxSecrets bounds the rotation list. A well-formed cookie with a bad MAC
	// costs one HMAC per secret, so the list is short by design: two (new,
	// old) is the normal rotation, a third leaves room for a hurried one.
	MaxSecrets = 8
	// MaxMaxAge is the longest MaxAge accepted: browsers cap a cookie's
	// Max-Age at 400 days (RFC 6265bis), so a longer one would only ever be
	// honoured by the edge.
	MaxMaxAge = 400 * 24 * time.Hour
	// ClockSkew is how far in the future a cookie's issue time may be and
	// still verify: nodes of a fleet mint with their own clocks, which may
	// disagree by this much. A cookie issued exactly ClockSkew ahead of now
	// verifies; one issued a second later does not.
	ClockSkew = 5 * time.Minute
)

// Cookie format, version 1. The value is the unpadded base64url
// (RFC 4648 §5) encoding of
//
//	[0]      version (1)
//	[1]      key ID: which secret signed (see keyID)
//	[2:18]   the ID
//	[18:26]  issue time, Unix seconds, big endian
//	[26:42]  HMAC-SHA256(secret, bytes [0:26]), truncated to 16 bytes
//
// which is 42 bytes and always 56 characters from [A-Za-z0-9_-], all of them
// allowed in a cookie value without quoting (42 is a multiple of 3, so no
// character carries unused bits).
//
// The key ID lets Verify compute one HMAC however many secrets the list
// holds: without it a forged cookie would cost one HMAC per secret.
const (
	version   = 1
	kidOff    = 1
	idOff     = kidOff + 1
	timeOff   = idOff + len(ID{})
	macOff    = timeOff + 8
	macLen    = 16
	rawLen    = macOff + macLen // 42
	signedLen = macOff          // the MAC covers version, key ID, ID and issue time
	valueLen  = 56              // base64.RawURLEncoding.EncodedLen(rawLen)
	hashLen   = 16              // bytes of AppendVisitorHash's MAC, before hex
)

// keyIDLabel is the message whose HMAC under a secret gives the secret's key
// ID (its first byte). One byte of a PRF output says nothing useful about a
// secret of at least 128 bits; two secrets of a list share a key ID once in
// 256 pairs, and Verify then tries both.
const keyIDLabel = "edge visitor key id"

// hashPrefix separates AppendVisitorHash's messages from the other MACs made
// with the same key (cookies and the key ID): the three messages differ in
// length (24, 26 and 19 bytes) and in their first byte.
const hashPrefix = "visitor\x00"

// b64 is strict so that exactly one text decodes to given bytes (unused
// trailing bits must be zero; with rawLen a multiple of 3 there are none
// today, and strictness keeps a format change from quietly allowing two
// spellings). Strict decoding still skips CR and LF, so Verify also demands
// exactly valueLen characters: a value carrying a newline then decodes to
// fewer than rawLen bytes and is refused.
var b64 = base64.RawURLEncoding.Strict()

// Options configures a Signer. Only Secrets is required.
type Options struct {
	// Secrets are the HMAC keys: the first signs new cookies and keys
	// AppendVisitorHash, and every one of them verifies, so a rotation puts
	// the new secret first and keeps the old one second until MaxAge has
	// passed. At least one and at most MaxSecrets, each at least
	// MinSecretLen bytes. NewSigner copies them.
	Secrets [][]byte
	// MaxAge is a cookie's lifetime, counted from its issue time; it is also
	// the Set-Cookie Max-Age (in whole seconds, rounded down). Zero means
	// DefaultMaxAge; otherwise between one second and MaxMaxAge.
	MaxAge time.Duration
	// Cookie is the cookie's name, an RFC 6265 token. Empty means
	// DefaultCookie.
	Cookie string
	// Insecure drops the Secure attribute, for plain-HTTP deployments
	// (the policy's `secure = false`). The zero value sets Secure.
	Insecure bool
}

// Signer mints and verifies visitor cookies. It is immutable once NewSigner
// returns it and safe for concurrent use; a policy reload builds a new one.
type Signer struct {
	secrets   [][]byte
	maxAge    time.Duration
	maxAgeSec int64 // maxAge in whole seconds, rounded down
	cookie    string
	setCookie string // "; Path=/; Max-Age=N; HttpOnly; SameSite=Lax[; Secure]"
	kids      []byte // kids[i] is secrets[i]'s key ID
	pool      sync.Pool
}

// macState is the per-goroutine scratch of a Signer, kept in its pool: one
// keyed HMAC per secret (crypto/hmac keeps its pad states after the first
// Reset, so later uses do not allocate) and the buffers handed to them. The
// buffers live here, on the heap already, because a stack buffer passed to
// an interface method escapes and would cost an allocation per call.
type macState struct {
	macs []hash.Hash
	raw  [rawLen]byte
	msg  [max(len(hashPrefix)+len(ID{}), len(keyIDLabel))]byte
	sum  [sha256.Size]byte
}

// NewSigner validates opts and returns a Signer.
func NewSigner(opts Options) (*Signer, error) {
	if len(opts.Secrets) == 0 {
		return nil, errors.New("no visitor secrets")
	}
	if len(opts.Secrets) > MaxSecrets {
		return nil, fmt.Errorf("%d visitor secrets, at most %d are allowed", len(opts.Secrets), MaxSecrets)
	}
	secrets := make([][]byte, len(opts.Secrets))
	for i, sec := range opts.Secrets {
		if len(sec) < MinSecretLen {
			return nil, fmt.Errorf("visitor secret %d of %d is %d bytes, at least %d are needed", i+1, len(opts.Secrets), len(sec), MinSecretLen)
		}
		secrets[i] = append([]byte(nil), sec...)
	}

	maxAge := opts.MaxAge
	switch {
	case maxAge == 0:
		maxAge = DefaultMaxAge
	case maxAge < time.Second:
		return nil, fmt.Errorf("visitor max age %v is under one second", maxAge)
	case maxAge > MaxMaxAge:
		return nil, fmt.Errorf("visitor max age %v is over 400 days, which browsers cap", maxAge)
	}

	name := opts.Cookie
	if name == "" {
		name = DefaultCookie
	}
	if err := checkCookieName(name); err != nil {
		return nil, err
	}
	if opts.Insecure && hasSecurePrefix(name) {
		return nil, fmt.Errorf("visitor cookie %q needs the Secure attribute: browsers drop __Host- and __Secure- cookies without it", name)
	}

	s := &Signer{
		secrets:   secrets,
		maxAge:    maxAge,
		maxAgeSec: int64(maxAge / time.Second),
		cookie:    name,
	}
	attrs := "; Path=/; Max-Age=" + strconv.FormatInt(s.maxAgeSec, 10) + "; HttpOnly; SameSite=Lax"
	if !opts.Insecure {
		attrs += "; Secure"
	}
	s.setCookie = attrs
	s.pool.New = s.newState
	// Warm one state, so the first request does not pay for it, and use it
	// to derive the key IDs.
	st := s.newState().(*macState)
	s.kids = make([]byte, len(secrets))
	copy(st.msg[:], keyIDLabel)
	for i := range secrets {
		s.kids[i] = st.mac(i, st.msg[:len(keyIDLabel)])[0]
	}
	s.pool.Put(st)
	return s, nil
}

func (s *Signer) newState() any {
	st := &macState{macs: make([]hash.Hash, len(s.secrets))}
	for i, sec := range s.secrets {
		h := hmac.New(sha256.New, sec)
		// The first Reset marshals the pad states (it allocates once);
		// every later Reset restores them without allocating.
		h.Reset()
		st.macs[i] = h
	}
	return st
}

// CookieName returns the cookie's name.
func (s *Signer) CookieName() string { return s.cookie }

// MaxAge returns a cookie's lifetime.
func (s *Signer) MaxAge() time.Duration { return s.maxAge }

// Mint appends a fresh cookie value to dst: a new random ID, issued at now
// (in whole Unix seconds, rounded down), signed with the first secret. It
// returns the extended slice and the ID.
func (s *Signer) Mint(dst []byte, now time.Time) ([]byte, ID) {
	st := s.pool.Get().(*macState)
	raw := &st.raw
	raw[0] = version
	raw[kidOff] = s.kids[0]
	// crypto/rand.Read never fails: on a broken system it crashes the
	// program rather than return predictable bytes.
	_, _ = rand.Read(raw[idOff:timeOff])
	binary.BigEndian.PutUint64(raw[timeOff:macOff], uint64(now.Unix()))
	copy(raw[macOff:], st.mac(0, raw[:signedLen])[:macLen])
	var id ID
	copy(id[:], raw[idOff:timeOff])
	dst = b64.AppendEncode(dst, raw[:])
	s.pool.Put(st)
	return dst, id
}

// Verify reports whether value is a cookie value this Signer accepts at now,
// and if so returns its ID. It accepts only a well-formed version-1 value
// whose issue time is at most ClockSkew ahead of now and less than MaxAge
// behind it, and whose MAC verifies under one of the secrets. Anything else
// (absent, truncated, overlong, non-canonical, tampered, signed with a
// retired secret, expired, or from the future) is reported as false with a
// zero ID, and the caller treats the request as having no cookie.
//
// MACs are compared in constant time. Verify computes the MAC only under
// the secrets whose key ID the value names (almost always one), so a forged
// value costs at most that; its time reveals which secret a value names,
// which the value already says. Verify does not allocate and does not
// retain value.
func (s *Signer) Verify(value []byte, now time.Time) (ID, bool) {
	if len(value) != valueLen {
		return ID{}, false
	}
	st := s.pool.Get().(*macState)
	id, ok := s.verify(st, value, now)
	s.pool.Put(st)
	return id, ok
}

func (s *Signer) verify(st *macState, value []byte, now time.Time) (ID, bool) {
	raw := &st.raw
	if n, err := b64.Decode(raw[:], value); err != nil || n != rawLen || raw[0] != version {
		return ID{}, false
	}
	// The cheap checks come before the MACs, so a flood of stale cookies
	// costs no hashing. They reveal nothing: the issue time is the caller's.
	if !s.fresh(int64(binary.BigEndian.Uint64(raw[timeOff:macOff])), now) {
		return ID{}, false
	}
	mac, kid := raw[macOff:rawLen], raw[kidOff]
	for i := range st.macs {
		if s.kids[i] != kid {
			continue
		}
		if hmac.Equal(st.mac(i, raw[:signedLen])[:macLen], mac) {
			var id ID
			copy(id[:], raw[idOff:timeOff])
			return id, true
		}
	}
	return ID{}, false
}

// fresh reports whether a cookie issued at the Unix second issued is neither
// more than ClockSkew in the future of now nor MaxAge or more in its past.
// The cookie expires at issued+MaxAge exactly (Max-Age's meaning). Because
// issued was rounded down at minting, the edge drops a cookie up to a second
// before the browser does, never after.
func (s *Signer) fresh(issued int64, now time.Time) bool {
	sec := now.Unix()
	// issued < 0 is also a uint64 above MaxInt64: garbage either way.
	if issued < 0 || issued-sec > int64(ClockSkew/time.Second) {
		return false
	}
	age := sec - issued // whole seconds, at least -ClockSkew
	if age > s.maxAgeSec {
		// age ≥ maxAgeSec+1 > MaxAge; also keeps the product below from
		// overflowing.
		return false
	}
	return time.Duration(age)*time.Second+time.Duration(now.Nanosecond()) < s.maxAge
}

// AppendSetCookie appends a whole Set-Cookie header value for a cookie
// value made by Mint:
//
//	NAME=VALUE; Path=/; Max-Age=N; HttpOnly; SameSite=Lax; Secure
//
// without "; Secure" when Options.Insecure is set. It does not check value.
func (s *Signer) AppendSetCookie(dst, value []byte) []byte {
	dst = append(dst, s.cookie...)
	dst = append(dst, '=')
	dst = append(dst, value...)
	return append(dst, s.setCookie...)
}

// AppendVisitorHash appends the hex form (32 lowercase characters) of the
// first secret's HMAC-SHA256 of "visitor\x00" and id, truncated to 16 bytes.
// It is what the origin receives in X-Edge-Visitor: stable for one ID, it
// names a visitor without revealing the ID or the cookie, which the origin
// could otherwise replay. It changes when the first secret rotates.
func (s *Signer) AppendVisitorHash(dst []byte, id ID) []byte {
	st := s.pool.Get().(*macState)
	copy(st.msg[:], hashPrefix)
	copy(st.msg[len(hashPrefix):], id[:])
	dst = hex.AppendEncode(dst, st.mac(0, st.msg[:])[:hashLen])
	s.pool.Put(st)
	return dst
}

// mac returns the HMAC of msg under secret i, in st.sum. msg must be one of
// st's own buffers (see macState).
func (st *macState) mac(i int, msg []byte) []byte {
	h := st.macs[i]
	h.Reset()
	h.Write(msg)
	return h.Sum(st.sum[:0])
}

// checkCookieName reports whether name is an RFC 6265 cookie-name: an RFC
// 9110 token.
func checkCookieName(name string) error {
	for i := 0; i < len(name); i++ {
		if !httpsyntax.IsTokenChar(name[i]) {
			return fmt.Errorf("visitor cookie name %q has a character not allowed in a cookie name at byte %d", name, i)
		}
	}
	return nil
}

// hasSecurePrefix reports a cookie-name prefix that browsers only accept
// with Secure (they match it without regard to case).
func hasSecurePrefix(name string) bool {
	for _, p := range []string{"__Secure-", "__Host-"} {
		if len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) {
			return true
		}
	}
	return false
}
