package gateway

import (
	"bufio"
	"strings"
	"testing"

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
