package nat

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"testing"
	"time"
)

// t0 is the fixed instant tests mint and verify at; tests never read the
// wall clock.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var (
	secretA       = []byte("secret-A-0123456789abcdef")
	secretB       = []byte("secret-B-0123456789abcdef")
	secretRetired = []byte("secret-R-0123456789abcdef")
)

func newTestSigner(tb testing.TB, opts Options) *Signer {
	tb.Helper()
	s, err := NewSigner(opts)
	if err != nil {
		tb.Fatalf("NewSigner: %v", err)
	}
	return s
}

func signer(tb testing.TB, secrets ...[]byte) *Signer {
	tb.Helper()
	return newTestSigner(tb, Options{Secrets: secrets})
}

func mint(s *Signer, now time.Time) (string, ID) {
	v, id := s.Mint(nil, now)
	return string(v), id
}

// craft builds a cookie value independently of the package (crypto/hmac
// used directly), so tests pin the format and can forge any field.
func craft(secret []byte, ver byte, id ID, issued uint64) []byte {
	return craftKID(secret, ver, keyIDOf(secret), id, issued)
}

func craftKID(secret []byte, ver, kid byte, id ID, issued uint64) []byte {
	var raw [42]byte
	raw[0] = ver
	raw[1] = kid
	copy(raw[2:18], id[:])
	binary.BigEndian.PutUint64(raw[18:26], issued)
	h := hmac.New(sha256.New, secret)
	h.Write(raw[:26])
	copy(raw[26:], h.Sum(nil)[:16])
	return base64.RawURLEncoding.AppendEncode(nil, raw[:])
}

func keyIDOf(secret []byte) byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("edge visitor key id"))
	return h.Sum(nil)[0]
}

var testID = ID{0: 0xde, 1: 0xad, 14: 0xbe, 15: 0xef}
