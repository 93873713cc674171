package httpsyntax

import (
	"strings"
	"testing"
)

// TestTokenChars checks the tchar table against RFC 9110 §5.6.2 written
// out: every byte, in or out.
func TestTokenChars(t *testing.T) {
	const want = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for c := range 256 {
		if got, in := IsTokenChar(byte(c)), strings.IndexByte(want, byte(c)) >= 0; got != in {
			t.Errorf("IsTokenChar(%q) = %v, want %v", byte(c), got, in)
		}
	}
	for s, want := range map[string]bool{"": false, "GET": true, "X-Api-Key": true, "a b": false, "é": false, "a:b": false, "__Host-x": true} {
		if got := IsToken(s); got != want {
			t.Errorf("IsToken(%q) = %v, want %v", s, got, want)
		}
		if got := IsToken([]byte(s)); got != want {
			t.Errorf("IsToken([]byte(%q)) = %v, want %v", s, got, want)
		}
	}
}

func TestUnhex(t *testing.T) {
	for c := range 256 {
		v, ok := Unhex(byte(c))
		i := strings.IndexByte("0123456789abcdef", byte(c))
		if i < 0 {
			i = strings.IndexByte("0123456789ABCDEF", byte(c))
		}
		if ok != (i >= 0) || ok && int(v) != i {
			t.Errorf("Unhex(%q) = %d, %v; want %d, %v", byte(c), v, ok, i, i >= 0)
		}
	}
}

func TestTrimOWS(t *testing.T) {
	for in, want := range map[string]string{"": "", " \t": "", "a": "a", " a b\t": "a b", "\ta\r": "a\r", "\u00a0a": "\u00a0a"} {
		if got := string(TrimOWS([]byte(in))); got != want {
			t.Errorf("TrimOWS(%q) = %q, want %q", in, got, want)
		}
	}
}
