// Package testheader checks the header names a package sets with
// fasthttp's SetCanonical, which takes the name as given: the gateway's
// own (X-Forwarded-For) and its extensions' (nat's X-Edge-Visitor,
// botscore's X-Edge-Bot-Score), each kept beside the code that sets it.
// Nothing outside tests imports it.
package testheader

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// Canonical checks that each of names is in the form fasthttp normalises
// it to, so that setting it with SetCanonical is setting it with
// SetBytesV: one line, replacing any other of that name (a client's copy,
// had the gateway not stripped it).
func Canonical(t testing.TB, names ...[]byte) {
	t.Helper()
	for _, k := range names {
		var a, b fasthttp.RequestHeader
		a.Set(string(k), "old")
		b.Set(string(k), "old")
		a.SetBytesV(strings.ToLower(string(k)), []byte("v"))
		b.SetCanonical(k, []byte("v"))
		if a.String() != b.String() {
			t.Errorf("%s: SetCanonical gives %q, SetBytesV %q", k, b.String(), a.String())
		}
		if n := len(b.PeekAll(string(k))); n != 1 {
			t.Errorf("%s: %d lines after SetCanonical, want 1", k, n)
		}
	}
}
