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
