package nat

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestCanonicalHeaderNames: the name OnForward sets with SetCanonical is
// in the form fasthttp normalises it to, so setting them so is setting
// them with SetBytesV: one line, replacing any other of that name (the
// client's copy, had the gateway not stripped it).
func TestCanonicalHeaderNames(t *testing.T) {
	for _, k := range [][]byte{hdrXEdgeVisitor} {
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
