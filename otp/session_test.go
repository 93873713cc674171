package otp

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func TestAppendSessionKey(t *testing.T) {
	t.Parallel()
	ids := []string{"abc", "3abc", "bc", "", "+12015550123", strings.Repeat("x", 300)}
	seen := map[string]string{}
	for _, id := range ids {
		key := AppendSessionKey([]byte("prefix"), id)
		if !bytes.HasPrefix(key, []byte("prefix")) {
			t.Fatalf("AppendSessionKey dropped dst: %q", key)
		}
		key = key[len("prefix"):]
		if prev, ok := seen[string(key)]; ok {
			t.Errorf("IDs %q and %q give one key", prev, id)
		}
		seen[string(key)] = id
		// The key decodes back to its ID, and is nothing else: no phone.
		n, w := binary.Uvarint(key)
		if got := string(key[w:]); int(n) != len(id) || got != id {
			t.Errorf("AppendSessionKey(%q) decodes to %q (length %d)", id, got, n)
		}
	}
}

// TestSessionSpellingsAreOneChallenge: the spellings of one challenge ID
// that a case- and accent-insensitive column reads as one (issue 24 §2)
// are one otp_session value; another ID stays apart, and an ID that is no
// identifier (empty, a control character, too long) is Invalid.
func TestSessionSpellingsAreOneChallenge(t *testing.T) {
	t.Parallel()
	var st sessionState
	for _, id := range []string{"AbC123XyZ", "abc123xyz", "ABC123XYZ", "ＡＢＣ１２３ｘｙｚ", "ab\u00adc123xyz", "a\u0301bc123xyz", " abc123xyz "} {
		if !st.Add(id) {
			t.Errorf("Add(%q) = false, want a challenge ID", id)
		}
	}
	if st.Len() != 1 {
		t.Errorf("%d distinct challenge IDs from one ID's spellings, want 1", st.Len())
	}
	st.Add("abc123xya")
	if st.Len() != 2 {
		t.Errorf("another ID: %d distinct, want 2", st.Len())
	}
	for _, id := range []string{"", "ab\x00c", strings.Repeat("a", maxSessionBytes+1)} {
		if st.Add(id) {
			t.Errorf("Add(%q) = true, want false", id)
		}
	}
}
