package gateway

import (
	"bufio"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/internal/testheader"
	"github.com/valyala/fasthttp"
)

// TestHygieneTrailerFields: trailer fields are out of the header pass's
// sight until Trailer is deleted (fasthttp keeps them apart), so a
// hop-by-hop or edge-only name sent as one is removed all the same, in the
// request and in the origin's answer.
func TestHygieneTrailerFields(t *testing.T) {
	const raw = "POST /login HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"1\r\na\r\n0\r\nUpgrade: h2c\r\nX-Edge-Visitor: forged\r\nX_Forwarded_Host: evil\r\nX-Keep: 1\r\n\r\n"
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	var s Server
	s.sanitizeHeaders(newReqState().(*reqState), &req, false, nil)
	out := req.String()
	for _, bad := range []string{"Upgrade", "X-Edge-Visitor", "X_Forwarded_Host", "Trailer"} {
		if strings.Contains(out, bad) {
			t.Errorf("the request forwarded %s:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "X-Keep: 1") {
		t.Errorf("the request lost an ordinary trailer field:\n%s", out)
	}

	const answer = "HTTP/1.1 200 OK\r\nTrailer: Upgrade, X-Keep\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"1\r\na\r\n0\r\nUpgrade: h2c\r\nX-Keep: 1\r\n\r\n"
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(strings.NewReader(answer))); err != nil {
		t.Fatal(err)
	}
	stripHopByHopResponse(&resp.Header)
	if out := resp.String(); strings.Contains(out, "Upgrade") || !strings.Contains(out, "X-Keep: 1") {
		t.Errorf("the answer after the hygiene:\n%s", out)
	}
}

// TestHygieneNoHopByHop: the one-pass check leaves an ordinary request's
// headers as they were and removes a hop-by-hop header in any letter case.
func TestHygieneNoHopByHop(t *testing.T) {
	var req fasthttp.Request
	raw := "GET / HTTP/1.1\r\nHost: a\r\nX-Api-Key: k\r\nte: trailers\r\nKEEP-ALIVE: 5\r\nConnection: X-Drop\r\nX-Drop: 1\r\n\r\n"
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	var s Server
	s.sanitizeHeaders(newReqState().(*reqState), &req, false, nil)
	h := &req.Header
	if len(h.Peek("Te")) > 0 || len(h.Peek("Keep-Alive")) > 0 || len(h.Peek("X-Drop")) > 0 || string(h.Peek("X-Api-Key")) != "k" {
		t.Errorf("after the hygiene:\n%s", req.String())
	}
}

// TestKnownShapeCoversTheLists: every name isHopByHop or dropHeader
// matches, in the spellings origins read alike (letter case, "_" and "."
// for "-") and under the X-Edge-* prefix at any length, has a known shape,
// so the pass that skips the others skips none of theirs; and common names
// that are none of them are skipped.
func TestKnownShapeCoversTheLists(t *testing.T) {
	var names []string
	for _, l := range [][]string{hopByHop[:], clientIPHeaders[:], originRouteHeaders[:], originSchemeHeaders[:], methodOverrideHeaders[:]} {
		names = append(names, l...)
	}
	names = append(names, "X-Edge-Visitor", "x-edge-", "X_EDGE_A", "X-Edge-"+strings.Repeat("a", 100))
	for _, n := range names {
		for _, v := range []string{n, strings.ToUpper(n), strings.ToLower(n), strings.ReplaceAll(n, "-", "_"), strings.ReplaceAll(n, "-", ".")} {
			k := []byte(v)
			if !(isHopByHop(k) || dropHeader(k, false) || dropHeader(k, true)) {
				continue
			}
			if !knownShape(k) {
				t.Errorf("%q is matched but knownShape says no", v)
			}
		}
	}
	// The check above is not empty: every listed name but the method
	// overrides (kept in their own spelling) is matched as written, and
	// an override in another spelling is.
	for _, n := range names[:len(names)-len(methodOverrideHeaders)-4] {
		if !isHopByHop([]byte(n)) && !dropHeader([]byte(n), false) {
			t.Errorf("%q: the list's own spelling is not matched", n)
		}
	}
	if !dropHeader([]byte("X_HTTP_Method_Override"), false) {
		t.Error("X_HTTP_Method_Override is not dropped")
	}
	for _, n := range []string{"Host", "Accept", "User-Agent", "Accept-Encoding", "Content-Type", "Cookie", "Referer"} {
		if knownShape([]byte(n)) {
			t.Errorf("%q has a known shape: the pass compares it against every list", n)
		}
	}
}

// FuzzKnownShape: a name knownShape skips is never one isHopByHop or
// dropHeader matches.
func FuzzKnownShape(f *testing.F) {
	for _, s := range []string{"Keep-Alive", "x_edge_a", "TE", "Forwarded", "X-Api-Key", "\u212aeep-Alive"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, k []byte) {
		if !knownShape(k) && (isHopByHop(k) || dropHeader(k, false) || dropHeader(k, true)) {
			t.Fatalf("%q is matched but knownShape says no", k)
		}
	})
}

// TestCanonicalHeaderNames: the names forward sets with
// SetCanonical are in the form fasthttp normalises them to (testheader.Canonical).
func TestCanonicalHeaderNames(t *testing.T) {
	testheader.Canonical(t, hdrXForwardedFor, hdrXForwardedProto)
}

// TestConnectionPeekCanonical: stripConnectionTokens reads Connection as
// Peek("Connection") does, whatever the client's spelling.
func TestConnectionPeekCanonical(t *testing.T) {
	for _, raw := range []string{"connection: Keep-Alive, X-Foo", "CONNECTION: close", "Connection: te"} {
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: a\r\n" + raw + "\r\n\r\n"))); err != nil {
			t.Fatal(err)
		}
		got, want := string(req.Header.PeekCanonical(hdrConnection)), string(req.Header.Peek("Connection"))
		if got != want || want == "" {
			t.Errorf("%q: PeekCanonical %q, Peek %q", raw, got, want)
		}
	}
}
