//go:build !race

package gateway

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// decideAllocPolicy: one ordinary rule that always allows (RateLimit
// headers on every answer) and one sensitive rule.
const decideAllocPolicy = `
edge {
  trusted_proxies = ["10.0.0.0/8"]
  decide_listen   = "127.0.0.1:18081"
}

rule "api-per-ip" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 1000000
  period = "1s"
}

rule "login-per-ip" {
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 1000000
  period    = "1s"
  sensitive = true
}
`

// newDecideCtx returns a server for decideAllocPolicy and a described
// request as NGINX sends it, from peer 10.0.0.2.
func newDecideCtx(tb testing.TB, target string) (*Server, *fasthttp.RequestCtx) {
	tb.Helper()
	s := benchServer(tb, "decide-alloc.hcl", decideAllocPolicy, &fakeClock{t: time.Unix(1_800_000_000, 0)})
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI("/_edge")
	req.Header.SetHost("example.com")
	req.Header.Set("X-Original-Method", "POST")
	req.Header.Set("X-Original-URI", target)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.2"), Port: 40000}, nil)
	s.DecideHandler(ctx)
	if ctx.Response.StatusCode() != 200 || string(ctx.Method()) != "GET" {
		tb.Fatalf("setup: %d, method %q", ctx.Response.StatusCode(), ctx.Method())
	}
	return s, ctx
}

// TestDecideHandlerAllocatesNothing: the decide listener's path (the
// description read, decide(), the 200 with its RateLimit headers) adds no
// allocation to the proxy listener's zero-allocation decision path.
func TestDecideHandlerAllocatesNothing(t *testing.T) {
	for _, target := range []string{"/api/items?page=2", "/login"} {
		s, ctx := newDecideCtx(t, target)
		if n := testing.AllocsPerRun(200, func() { s.DecideHandler(ctx) }); n != 0 {
			t.Errorf("%s: the decide handler allocates %.1f times per request, want 0", target, n)
		}
		if ctx.Response.StatusCode() != 200 {
			t.Errorf("%s: %d", target, ctx.Response.StatusCode())
		}
	}
}

// BenchmarkDecideHandler measures one described request decided, without
// the network.
func BenchmarkDecideHandler(b *testing.B) {
	s, ctx := newDecideCtx(b, "/api/items?page=2")
	b.ReportAllocs()
	for b.Loop() {
		s.DecideHandler(ctx)
	}
}
