package nat

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMintVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	s := signer(t, secretA)
	prefix := []byte("prefix:")
	v, id := s.Mint(bytes.Clone(prefix), t0)
	if !bytes.HasPrefix(v, prefix) {
		t.Fatalf("Mint dropped dst: got %q", v)
	}
	v = v[len(prefix):]
	if len(v) != 56 {
		t.Errorf("got %d characters, want 56", len(v))
	}
	for i, c := range v {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			t.Errorf("character %d is %q, want [A-Za-z0-9_-]", i, c)
		}
	}
	if id == (ID{}) {
		t.Errorf("got the zero ID")
	}
	got, ok := s.Verify(v, t0)
	if !ok || got != id {
		t.Errorf("Verify = %x, %v; want %x, true", got, ok, id)
	}
}

// TestFormat pins the cookie layout against an independent HMAC.
func TestFormat(t *testing.T) {
	t.Parallel()
	s := signer(t, secretA, secretB)
	now := t0.Add(700 * time.Millisecond) // rounded down to t0's second
	v, id := mint(s, now)
	if want := string(craft(secretA, 1, id, uint64(t0.Unix()))); v != want {
		t.Errorf("got %s, want %s", v, want)
	}
	// And the crafted form of a known ID verifies.
	got, ok := s.Verify(craft(secretA, 1, testID, uint64(t0.Unix())), t0)
	if !ok || got != testID {
		t.Errorf("Verify(crafted) = %x, %v; want %x, true", got, ok, testID)
	}
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	s := signer(t, secretA)
	valid := craft(secretA, 1, testID, uint64(t0.Unix()))
	with := func(i int, c byte) []byte { b := bytes.Clone(valid); b[i] = c; return b }
	tests := []struct {
		name  string
		value []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"truncated by one", valid[:55]},
		{"half", valid[:27]},
		{"overlong by one", append(bytes.Clone(valid), 'A')},
		{"doubled", append(bytes.Clone(valid), valid...)},
		{"std padding", append(bytes.Clone(valid), '=')},
		{"quoted", append(append([]byte{'"'}, valid...), '"')},
		{"garbage of the right length", bytes.Repeat([]byte("!"), 56)},
		{"zeros of the right length", bytes.Repeat([]byte("A"), 56)},
		{"std alphabet plus", with(10, '+')},
		{"std alphabet slash", with(10, '/')},
		{"space", with(10, ' ')},
		{"NUL", with(10, 0)},
		{"non-ASCII", with(10, 0xc3)},
		{"newline inside, right length", append(append(bytes.Clone(valid[:20]), '\n'), valid[20:55]...)},
		{"CR inside, right length", append(append(bytes.Clone(valid[:20]), '\r'), valid[20:55]...)},
		{"newline at the end, right length", append(bytes.Clone(valid[:55]), '\n')},
		{"key ID of another secret", craftKID(secretA, 1, keyIDOf(secretB), testID, uint64(t0.Unix()))},
		{"key ID of no secret", craftKID(secretA, 1, keyIDOf(secretA)+1, testID, uint64(t0.Unix()))},
		{"version 0", craft(secretA, 0, testID, uint64(t0.Unix()))},
		{"version 2", craft(secretA, 2, testID, uint64(t0.Unix()))},
		{"MAC of the zero secret", craft(make([]byte, 16), 1, testID, uint64(t0.Unix()))},
		{"unsigned", func() []byte {
			var raw [42]byte
			raw[0], raw[1] = 1, keyIDOf(secretA)
			binary.BigEndian.PutUint64(raw[18:26], uint64(t0.Unix()))
			return base64.RawURLEncoding.AppendEncode(nil, raw[:])
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if id, ok := s.Verify(tt.value, t0); ok || id != (ID{}) {
				t.Errorf("Verify(%q) = %x, %v; want zero ID, false", tt.value, id, ok)
			}
		})
	}
}

// TestVerifyTamperedBytes flips every bit of the decoded value.
func TestVerifyTamperedBytes(t *testing.T) {
	t.Parallel()
	s := signer(t, secretA, secretB)
	v, _ := mint(s, t0)
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			b := bytes.Clone(raw)
			b[i] ^= 1 << bit
			if _, ok := s.Verify(base64.RawURLEncoding.AppendEncode(nil, b), t0); ok {
				t.Errorf("byte %d bit %d flipped: got accepted, want refused", i, bit)
			}
		}
	}
}

// TestVerifyTamperedText replaces every character with every other
// character of the alphabet.
func TestVerifyTamperedText(t *testing.T) {
	t.Parallel()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	s := signer(t, secretA, secretB)
	v, _ := mint(s, t0)
	for i := range len(v) {
		for _, c := range []byte(alphabet) {
			if c == v[i] {
				continue
			}
			b := []byte(v)
			b[i] = c
			if _, ok := s.Verify(b, t0); ok {
				t.Errorf("character %d %q→%q: got accepted, want refused", i, v[i], c)
			}
		}
	}
}

func TestSecretRotation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		mintWith     [][]byte
		verifyWith   [][]byte
		wantVerified bool
	}{
		{"same secret", [][]byte{secretA}, [][]byte{secretA}, true},
		{"signed with the second secret of the list", [][]byte{secretB}, [][]byte{secretA, secretB}, true},
		{"signed with the third secret of the list", [][]byte{secretB}, [][]byte{secretRetired, secretA, secretB}, true},
		{"retired secret", [][]byte{secretRetired}, [][]byte{secretA, secretB}, false},
		{"retired secret, alone", [][]byte{secretRetired}, [][]byte{secretA}, false},
		// Rotation: A was the only secret; now B signs and A still verifies.
		{"rotation: old cookie still verifies", [][]byte{secretA}, [][]byte{secretB, secretA}, true},
		{"rotation: new cookie verifies under the new secret", [][]byte{secretB, secretA}, [][]byte{secretB}, true},
		{"rotation: new cookie is signed with the new first secret", [][]byte{secretB, secretA}, [][]byte{secretA}, false},
		{"rotation finished: old secret removed", [][]byte{secretA}, [][]byte{secretB}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, id := mint(signer(t, tt.mintWith...), t0)
			got, ok := signer(t, tt.verifyWith...).Verify([]byte(v), t0)
			if ok != tt.wantVerified {
				t.Fatalf("got verified %v, want %v", ok, tt.wantVerified)
			}
			if want := map[bool]ID{true: id}[ok]; got != want {
				t.Errorf("got ID %x, want %x", got, want)
			}
		})
	}
}

// TestVerifyTime fixes the boundaries. A cookie lives MaxAge from its issue
// time, which is the minting instant rounded down to the second: it
// verifies at issue+MaxAge-1ns and is expired at issue+MaxAge exactly (as a
// browser drops a Max-Age=N cookie N seconds after receiving it). An issue
// time up to ClockSkew ahead of now verifies (another node's clock may run
// ahead); one more second does not.
func TestVerifyTime(t *testing.T) {
	t.Parallel()
	const maxAge = 2 * time.Hour
	s := newTestSigner(t, Options{Secrets: [][]byte{secretA}, MaxAge: maxAge})
	tests := []struct {
		name   string
		mintAt time.Time
		now    time.Time
		want   bool
	}{
		{"at issue", t0, t0, true},
		{"one second old", t0, t0.Add(time.Second), true},
		{"just before MaxAge", t0, t0.Add(maxAge - time.Nanosecond), true},
		{"exactly MaxAge", t0, t0.Add(maxAge), false},
		{"past MaxAge", t0, t0.Add(maxAge + time.Second), false},
		{"a year old", t0, t0.AddDate(1, 0, 0), false},
		// Far enough that age in nanoseconds would overflow an int64.
		{"checked in the year 2600", t0, time.Date(2600, 1, 1, 0, 0, 0, 0, time.UTC), false},
		// Minted at t0+0.7s: the issue time is t0, so expiry is t0+MaxAge.
		{"fractional mint, just before MaxAge", t0.Add(700 * time.Millisecond), t0.Add(maxAge - time.Nanosecond), true},
		{"fractional mint, at MaxAge of the rounded issue time", t0.Add(700 * time.Millisecond), t0.Add(maxAge), false},
		{"fractional now, one second old", t0, t0.Add(1500 * time.Millisecond), true},
		{"issued in the future within skew", t0.Add(time.Minute), t0, true},
		{"issued exactly ClockSkew ahead", t0.Add(ClockSkew), t0, true},
		{"issued exactly ClockSkew ahead, now fractional", t0.Add(ClockSkew), t0.Add(time.Millisecond), true},
		{"issued ClockSkew+1s ahead", t0.Add(ClockSkew + time.Second), t0, false},
		{"issued ClockSkew+1s ahead, now fractional", t0.Add(ClockSkew + time.Second), t0.Add(999 * time.Millisecond), false},
		{"issued a day ahead", t0.AddDate(0, 0, 1), t0, false},
		{"issued at the epoch", time.Unix(0, 0), t0, false},
		{"issued before the epoch", time.Unix(-1, 0), t0, false},
		{"issued before the epoch, checked then", time.Unix(-100, 0), time.Unix(-100, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, _ := mint(s, tt.mintAt)
			if _, ok := s.Verify([]byte(v), tt.now); ok != tt.want {
				t.Errorf("got %v, want %v", ok, tt.want)
			}
		})
	}
}

// TestVerifyForgedTimes signs extreme issue times, as a holder of the secret
// could, to check the arithmetic cannot overflow into acceptance.
func TestVerifyForgedTimes(t *testing.T) {
	t.Parallel()
	s := signer(t, secretA)
	for _, issued := range []uint64{0, 1, 1 << 62, 1<<63 - 1, 1 << 63, 1<<64 - 1, uint64(t0.Unix()) + 301} {
		if _, ok := s.Verify(craft(secretA, 1, testID, issued), t0); ok {
			t.Errorf("issue time %d: got accepted, want refused", issued)
		}
	}
}

func TestAppendSetCookie(t *testing.T) {
	t.Parallel()
	value := []byte("VALUE")
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"defaults", Options{}, "__edge_vid=VALUE; Path=/; Max-Age=2592000; HttpOnly; SameSite=Lax; Secure"},
		{"insecure", Options{Insecure: true}, "__edge_vid=VALUE; Path=/; Max-Age=2592000; HttpOnly; SameSite=Lax"},
		{"name and max age", Options{Cookie: "vid", MaxAge: 90 * time.Minute}, "vid=VALUE; Path=/; Max-Age=5400; HttpOnly; SameSite=Lax; Secure"},
		{"max age rounded down", Options{MaxAge: 1500 * time.Millisecond, Insecure: true}, "__edge_vid=VALUE; Path=/; Max-Age=1; HttpOnly; SameSite=Lax"},
		{"__Host- prefix", Options{Cookie: "__Host-vid"}, "__Host-vid=VALUE; Path=/; Max-Age=2592000; HttpOnly; SameSite=Lax; Secure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.Secrets = [][]byte{secretA}
			s := newTestSigner(t, tt.opts)
			if got := string(s.AppendSetCookie([]byte("x"), value)); got != "x"+tt.want {
				t.Errorf("got %q, want %q", got, "x"+tt.want)
			}
		})
	}
}

func TestNewSigner(t *testing.T) {
	t.Parallel()
	many := make([][]byte, MaxSecrets+1)
	for i := range many {
		many[i] = secretA
	}
	tests := []struct {
		name     string
		opts     Options
		wantErr  string // substring; "" means no error
		wantName string
		wantAge  time.Duration
	}{
		{"defaults", Options{Secrets: [][]byte{secretA}}, "", DefaultCookie, DefaultMaxAge},
		{"exactly 16 bytes", Options{Secrets: [][]byte{[]byte("0123456789abcdef")}}, "", DefaultCookie, DefaultMaxAge},
		{"max secrets", Options{Secrets: many[:MaxSecrets]}, "", DefaultCookie, DefaultMaxAge},
		{"one second", Options{Secrets: [][]byte{secretA}, MaxAge: time.Second}, "", DefaultCookie, time.Second},
		{"400 days", Options{Secrets: [][]byte{secretA}, MaxAge: MaxMaxAge}, "", DefaultCookie, MaxMaxAge},
		{"custom name", Options{Secrets: [][]byte{secretA}, Cookie: "vid"}, "", "vid", DefaultMaxAge},
		{"__Host- with Secure", Options{Secrets: [][]byte{secretA}, Cookie: "__Host-vid"}, "", "__Host-vid", DefaultMaxAge},
		{"no secrets", Options{}, "no visitor secrets", "", 0},
		{"empty secret list", Options{Secrets: [][]byte{}}, "no visitor secrets", "", 0},
		{"short secret", Options{Secrets: [][]byte{secretA, []byte("0123456789abcde")}}, "visitor secret 2 of 2 is 15 bytes, at least 16", "", 0},
		{"nil secret", Options{Secrets: [][]byte{nil}}, "visitor secret 1 of 1 is 0 bytes", "", 0},
		{"too many secrets", Options{Secrets: many}, "9 visitor secrets, at most 8", "", 0},
		{"negative max age", Options{Secrets: [][]byte{secretA}, MaxAge: -time.Hour}, "under one second", "", 0},
		{"sub-second max age", Options{Secrets: [][]byte{secretA}, MaxAge: 999 * time.Millisecond}, "under one second", "", 0},
		{"max age over 400 days", Options{Secrets: [][]byte{secretA}, MaxAge: MaxMaxAge + time.Second}, "over 400 days", "", 0},
		{"name with a space", Options{Secrets: [][]byte{secretA}, Cookie: "edge vid"}, "not allowed in a cookie name at byte 4", "", 0},
		{"name with =", Options{Secrets: [][]byte{secretA}, Cookie: "a=b"}, "not allowed", "", 0},
		{"name with ;", Options{Secrets: [][]byte{secretA}, Cookie: "a;b"}, "not allowed", "", 0},
		{"name with non-ASCII", Options{Secrets: [][]byte{secretA}, Cookie: "vïd"}, "not allowed", "", 0},
		{"__Host- without Secure", Options{Secrets: [][]byte{secretA}, Cookie: "__Host-vid", Insecure: true}, "needs the Secure attribute", "", 0},
		{"__secure- without Secure", Options{Secrets: [][]byte{secretA}, Cookie: "__secure-vid", Insecure: true}, "needs the Secure attribute", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := NewSigner(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				if bytes.Contains([]byte(err.Error()), secretA) {
					t.Errorf("error %q shows a secret", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if s.CookieName() != tt.wantName || s.MaxAge() != tt.wantAge {
				t.Errorf("got %q, %v; want %q, %v", s.CookieName(), s.MaxAge(), tt.wantName, tt.wantAge)
			}
		})
	}
}

// TestNewSignerCopiesSecrets: the caller may wipe or reuse its slices.
func TestNewSignerCopiesSecrets(t *testing.T) {
	t.Parallel()
	sec := bytes.Clone(secretA)
	s := signer(t, sec)
	v, id := mint(s, t0)
	clear(sec)
	if got, ok := s.Verify([]byte(v), t0); !ok || got != id {
		t.Errorf("after the caller cleared its secret: got %x, %v; want %x, true", got, ok, id)
	}
	if _, ok := signer(t, secretA).Verify([]byte(v), t0); !ok {
		t.Errorf("minted after clearing: got refused by the original secret, want accepted")
	}
}

func TestIDsUnique(t *testing.T) {
	t.Parallel()
	const n = 20000
	s := signer(t, secretA)
	ids := make(map[ID]struct{}, n)
	values := make(map[string]struct{}, n)
	for range n {
		v, id := mint(s, t0)
		ids[id] = struct{}{}
		values[v] = struct{}{}
	}
	if len(ids) != n || len(values) != n {
		t.Errorf("got %d distinct IDs and %d distinct values, want %d", len(ids), len(values), n)
	}
}

func TestVisitorHash(t *testing.T) {
	t.Parallel()
	other := ID{1}
	sAB, sA, sB, sBA := signer(t, secretA, secretB), signer(t, secretA), signer(t, secretB), signer(t, secretB, secretA)
	h := func(s *Signer, id ID) string { return string(s.AppendVisitorHash(nil, id)) }

	mac := hmac.New(sha256.New, secretA)
	mac.Write([]byte("visitor\x00"))
	mac.Write(testID[:])
	want := hex.EncodeToString(mac.Sum(nil)[:16])
	if got := h(sAB, testID); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := string(sAB.AppendVisitorHash([]byte("x="), testID)); got != "x="+want {
		t.Errorf("with a prefix: got %s, want x=%s", got, want)
	}

	tests := []struct {
		name      string
		a, b      string
		wantEqual bool
	}{
		{"stable for one ID", h(sAB, testID), h(sAB, testID), true},
		{"keyed by the first secret only", h(sAB, testID), h(sA, testID), true},
		{"different IDs", h(sAB, testID), h(sAB, other), false},
		{"different first secrets", h(sA, testID), h(sB, testID), false},
		{"changes when the first secret rotates", h(sAB, testID), h(sBA, testID), false},
	}
	for _, tt := range tests {
		if (tt.a == tt.b) != tt.wantEqual {
			t.Errorf("%s: got %s and %s, want equal=%v", tt.name, tt.a, tt.b, tt.wantEqual)
		}
	}
	if len(want) != 32 || strings.ToLower(want) != want {
		t.Errorf("got %q, want 32 lowercase hex characters", want)
	}
}

// TestConcurrent shares one Signer between goroutines; run with -race.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	s := signer(t, secretA, secretB)
	old, _ := mint(signer(t, secretB), t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			dst := make([]byte, 0, 128)
			for range 500 {
				var id ID
				dst, id = s.Mint(dst[:0], t0)
				if got, ok := s.Verify(dst, t0); !ok || got != id {
					t.Errorf("got %x, %v; want %x, true", got, ok, id)
					return
				}
				if _, ok := s.Verify([]byte(old), t0); !ok {
					t.Errorf("second-secret cookie: got refused, want accepted")
					return
				}
				if _, ok := s.Verify(dst[:55], t0); ok {
					t.Errorf("truncated cookie: got accepted, want refused")
					return
				}
				_ = s.AppendVisitorHash(dst[:0], id)
			}
		})
	}
	wg.Wait()
}

// TestKeyIDCollision: two secrets of a list may share a key ID (once in 256
// pairs); a cookie signed by either still verifies, and one signed by
// neither does not.
func TestKeyIDCollision(t *testing.T) {
	t.Parallel()
	seen := map[byte][]byte{}
	var first, second []byte
	for i := 0; second == nil; i++ {
		sec := fmt.Appendf(nil, "collision-secret-%04d", i)
		kid := keyIDOf(sec)
		if prev, ok := seen[kid]; ok {
			first, second = prev, sec
		}
		seen[kid] = sec
	}
	s := signer(t, first, second)
	for _, tt := range []struct {
		name   string
		secret []byte
		want   bool
	}{
		{"signed by the first", first, true},
		{"signed by the second", second, true},
		{"signed by neither, same key ID", secretA, false},
	} {
		value := craftKID(tt.secret, 1, keyIDOf(first), testID, uint64(t0.Unix()))
		if got, ok := s.Verify(value, t0); ok != tt.want || (ok && got != testID) {
			t.Errorf("%s: got %x, %v; want verified %v", tt.name, got, ok, tt.want)
		}
	}
}
