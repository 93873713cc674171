package nat

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// FuzzVerify: Verify never panics on any input, and whatever it accepts is
// the one canonical spelling of its bytes (strict base64, exact length), so
// no two texts name the same cookie. The seeds include genuine cookies
// under both secrets, so mutations explore around accepted values.
func FuzzVerify(f *testing.F) {
	s := signer(f, secretA, secretB)
	first, _ := mint(s, t0)
	second, _ := mint(signer(f, secretB), t0)
	f.Add([]byte(first))
	f.Add([]byte(second))
	f.Add(craft(secretA, 1, testID, uint64(t0.Unix())))
	f.Add(craft(secretRetired, 1, testID, uint64(t0.Unix())))
	f.Add(craft(secretA, 1, testID, 1<<63))
	f.Add([]byte(first[:55]))
	f.Add([]byte(first + "A"))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte("_"), 56))
	f.Fuzz(func(t *testing.T, value []byte) {
		in := bytes.Clone(value)
		id, ok := s.Verify(value, t0)
		if !bytes.Equal(in, value) {
			t.Fatalf("Verify modified its input")
		}
		if !ok {
			if id != (ID{}) {
				t.Fatalf("refused with a non-zero ID %x", id)
			}
			return
		}
		raw, err := base64.RawURLEncoding.DecodeString(string(value))
		if err != nil {
			t.Fatalf("accepted %q, which does not decode: %v", value, err)
		}
		if re := base64.RawURLEncoding.EncodeToString(raw); re != string(value) {
			t.Fatalf("accepted %q, which re-encodes to %q", value, re)
		}
		if !bytes.Equal(raw[2:18], id[:]) {
			t.Fatalf("got ID %x, want the encoded %x", id, raw[2:18])
		}
	})
}
