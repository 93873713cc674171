package gateway

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// benchLoadRequest is a request as bench/run.sh's load sends it (the load
// tool's plain scenario through a trusted proxy): no header the edge
// removes, so the hygiene's whole cost is its checks.
const benchLoadRequest = "GET /api/bench HTTP/1.1\r\n" +
	"Host: 127.0.0.1:18080\r\n" +
	"User-Agent: edge-loadtest\r\n" +
	"X-Forwarded-For: 198.18.3.7\r\n" +
	"X-Api-Key: bench-key-7\r\n" +
	"Accept: */*\r\n" +
	"\r\n"

// benchOriginResponse is an origin's ordinary answer (the demo origin's).
const benchOriginResponse = "HTTP/1.1 200 OK\r\n" +
	"Server: origin\r\n" +
	"Date: Wed, 02 Dec 2026 08:00:00 GMT\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Length: 3\r\n" +
	"\r\n" +
	"ok\n"

// BenchmarkHeaderHygiene is forward's header work on the bench load's
// request (hop-by-hop and client-sent edge headers removed) and on the
// origin's answer (hop-by-hop, X-Edge-Outcome and settle_from headers
// removed, the shared-cache check), copying a parsed message into place
// first, as fasthttp's parse would have left it.
func BenchmarkHeaderHygiene(b *testing.B) {
	s := benchServer(b, "empty.hcl", `edge {
  upstream        = "http://127.0.0.1:1"
  trusted_proxies = ["127.0.0.1/32"]
}`, nil)
	st := s.state.Load()
	rs := newReqState().(*reqState)
	b.Run("request", func(b *testing.B) {
		var tmpl, req fasthttp.Request
		if err := tmpl.Read(bufio.NewReader(strings.NewReader(benchLoadRequest))); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			tmpl.Header.CopyTo(&req.Header)
			requestHygiene(s, st, rs, &req)
		}
		if got := req.Header.Peek("X-Api-Key"); string(got) != "bench-key-7" {
			b.Fatalf("X-Api-Key %q after the hygiene", got)
		}
	})
	b.Run("response", func(b *testing.B) {
		var tmpl, resp fasthttp.Response
		if err := tmpl.Read(bufio.NewReader(strings.NewReader(benchOriginResponse))); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			tmpl.Header.CopyTo(&resp.Header)
			if responseHygiene(st, &resp) {
				b.Fatal("the answer is not storable by a shared cache")
			}
		}
	})
}

// requestHygiene is forward's request-side header hygiene.
func requestHygiene(s *Server, st *policyState, rs *reqState, req *fasthttp.Request) {
	s.sanitizeHeaders(rs, req, false, st.policy.HeaderNames())
}

// responseHygiene is forward's response-side header hygiene; it reports
// sharedStorable.
func responseHygiene(st *policyState, resp *fasthttp.Response) bool {
	stripHopByHopResponse(&resp.Header)
	resp.Header.Del("X-Edge-Outcome")
	stripSettleHeaders(st.policy, &resp.Header)
	return sharedStorable(&resp.Header)
}
