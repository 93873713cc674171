package gateway

import (
	"bufio"
	"bytes"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzHandler feeds arbitrary requests through the real handler, forwarding
// to a demo origin on loopback: never a panic, never a 5xx but the origin's
// 502/503/504 family the edge itself may answer, and a refusal on a
// sensitive route is always the bare 429.
func FuzzHandler(f *testing.F) {
	for _, seed := range []string{
		"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"GET //LOGIN/./?x=1 HTTP/1.1\r\nHost: x\r\nX-HTTP-Method-Override: POST\r\n\r\n",
		"GET /%6Cogin HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 2001:db8::1, garbage\r\n\r\n",
		"GET /api/x HTTP/1.1\r\nHost: [::1]:80\r\nX-Forwarded-For: , ,\r\nX-Forwarded-For: 1.2.3.4:5\r\n\r\n",
		"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a/../../%2e%2e/api/%2F HTTP/1.1\r\nHost: x\r\nX-Edge-Outcome: success\r\n\r\n",
		"DELETE /trace/gcra;x=1 HTTP/1.1\r\nHost: x\r\nConnection: close, X-Foo\r\n\r\n",
	} {
		f.Add([]byte(seed), uint8(1))
	}
	n := startNode(f, loadPolicy(f, foundation), nodeOptions{})
	f.Fuzz(func(t *testing.T, raw []byte, peerByte uint8) {
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
			return // fasthttp answers what it cannot parse with 400 itself
		}
		var ctx fasthttp.RequestCtx
		peer := net.IPv4(127, 0, 0, 1)
		if peerByte%2 == 0 {
			peer = net.IPv4(198, 51, 100, peerByte)
		}
		ctx.Init(&req, &net.TCPAddr{IP: peer, Port: 1234}, nil)
		n.srv.Handler(&ctx)
		st := ctx.Response.StatusCode()
		switch {
		case st == 500 || st < 100 || st > 599:
			t.Fatalf("status %d for %q", st, raw)
		case st == 429 && !hasHeader(&ctx.Response.Header, "RateLimit") &&
			string(ctx.Response.Body()) != bareBody:
			t.Fatalf("a 429 that is neither bare nor informative: %q", ctx.Response.Body())
		}
	})
}

// hasHeader looks a response header up case-insensitively (the RateLimit
// fields are set in the draft's case, which fasthttp's Peek does not find).
func hasHeader(h *fasthttp.ResponseHeader, name string) bool {
	for k := range h.All() {
		if bytes.EqualFold(k, []byte(name)) {
			return true
		}
	}
	return false
}
