package otp

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func TestAppendSessionKey(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{
		{"+12015550123", "abc"},
		{"+1201555012", "3abc"},
		{"+12015550123a", "bc"},
		{"+12015550123", ""},
		{"", "+12015550123"},
		{"", ""},
		{"+12015550123", strings.Repeat("x", 300)},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		key := AppendSessionKey([]byte("prefix"), p[0], p[1])
		if !bytes.HasPrefix(key, []byte("prefix")) {
			t.Fatalf("AppendSessionKey dropped dst: %q", key)
		}
		key = key[len("prefix"):]
		if prev, ok := seen[string(key)]; ok {
			t.Errorf("pairs %q and %q give one key", prev, p)
		}
		seen[string(key)] = p
		// The key decodes back to its pair.
		n, w := binary.Uvarint(key)
		phone := string(key[w : w+int(n)])
		rest := key[w+int(n):]
		m, w2 := binary.Uvarint(rest)
		session := string(rest[w2:])
		if phone != p[0] || session != p[1] || int(m) != len(session) {
			t.Errorf("AppendSessionKey(%q, %q) decodes to %q, %q", p[0], p[1], phone, session)
		}
	}
}
