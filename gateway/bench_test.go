package gateway

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// benchPolicy has five rules matching POST /login, one per algorithm
// family and key shape, with limits high enough to keep allowing.
const benchPolicy = `
edge {
  upstream        = "http://127.0.0.1:1"
  trusted_proxies = ["10.0.0.0/8", "fd00::/8"]
}
rule "per-ip" {
  methods = ["POST"]
  paths   = ["/login"]
  key     = ["ip"]
  limit   = 1000000
  period  = "1s"
}
rule "per-network" {
  methods     = ["POST"]
  paths       = ["/login"]
  key         = ["ip"]
  ipv4_prefix = 24
  ipv6_prefix = 48
  algorithm   = "sliding_window"
  limit       = 1000000
  period      = "1m"
}
rule "per-key" {
  paths     = ["/login"]
  key       = ["header:X-Api-Key", "ip"]
  algorithm = "token_bucket"
  limit     = 1000000
  period    = "1s"
}
rule "per-route" {
  paths     = ["/login"]
  key       = ["route"]
  algorithm = "fixed_window"
  limit     = 1000000000
  period    = "1h"
}
rule "shadow" {
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "leaky_bucket"
  limit     = 1000000
  period    = "1s"
  dry_run   = true
}
`

type benchSetup struct {
	s   *Server
	st  *policyState
	rs  *reqState
	ctx *fasthttp.RequestCtx
}

// benchVisitorPolicy adds a visitor block and a visitor rule: the cookie
// is verified (HMAC, constant time) on the decision path.
const benchVisitorPolicy = benchPolicy + `
visitor {
  secure = false
}
rule "per-visitor" {
  paths = ["/login"]
  key   = ["visitor"]
  limit = 100000
  period = "1s"
}
`

func newBenchSetup(tb testing.TB, peer, xff string) *benchSetup {
	return newBenchSetupWith(tb, benchPolicy, peer, xff, nil)
}

// benchServer is a server of the policy src (named name) on a memory store
// of 1000 keys that closes when the test ends, reading the time from clk.
func benchServer(tb testing.TB, name, src string, clk *fakeClock, opts ...func(*Options)) *Server {
	tb.Helper()
	p, diags := builtin.Load(name, []byte(src))
	if diags.HasErrors() {
		tb.Fatal(diags.Error())
	}
	store, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	o := Options{Extensions: builtin.ExtensionsWith(builtin.ExtensionOptions{VisitorSecret: benchVisitorSecret}), Policy: p, Store: store, Clock: clk}
	for _, f := range opts {
		f(&o)
	}
	s, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func newBenchSetupWith(tb testing.TB, src, peer, xff string, cookie func(*Server, time.Time) []byte, opts ...func(*Options)) *benchSetup {
	tb.Helper()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	s := benchServer(tb, "bench.hcl", src, clk, opts...)
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/login?next=%2Fhome")
	req.Header.SetHost("example.com")
	req.Header.Set("X-Forwarded-For", xff)
	req.Header.Set("X-Api-Key", "k-123456")
	req.Header.SetContentType("application/json")
	if cookie != nil {
		req.Header.SetCookieBytesKV([]byte("__edge_vid"), cookie(s, clk.Now()))
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 40000}, nil)
	b := &benchSetup{s: s, st: s.state.Load(), rs: newReqState().(*reqState), ctx: ctx}
	if !s.decide(ctx, b.st, b.rs) || len(b.rs.sc.Matches) != len(s.Policy().Rules) || b.rs.d.Verdict != rules.Forward {
		tb.Fatalf("setup: got %d matches, verdict %d", len(b.rs.sc.Matches), b.rs.d.Verdict)
	}
	return b
}

// BenchmarkDecisionPath measures the decision path (client address through
// a trusted proxy, canonical and match paths, five rules, the memory store)
// without the proxying.
func BenchmarkDecisionPath(b *testing.B) {
	for _, tt := range []struct{ name, peer, xff string }{
		{"ipv4", "10.1.2.3", "203.0.113.9, 10.0.0.2"},
		{"ipv6", "fd00::1", "2001:db8:1:2::9, fd00::2"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			bs := newBenchSetup(b, tt.peer, tt.xff)
			b.ReportAllocs()
			for b.Loop() {
				bs.s.decide(bs.ctx, bs.st, bs.rs)
			}
		})
	}
}

// benchVisitorSecret signs the bench servers' visitor cookies: their
// visitor block's secret_env is unset (benchServer).
var benchVisitorSecret = []byte("the bench servers' visitor secret, 32+ bytes")

// benchSigner is a signer of s's visitor cookies: the visitor block's, with
// the secret nat's extension signs with (secret_env's, else
// benchVisitorSecret).
func benchSigner(s *Server) *nat.Signer {
	c := nat.ConfigOf(s.Policy())
	secrets := [][]byte{benchVisitorSecret}
	if env := os.Getenv(c.SecretEnv); env != "" {
		var err error
		if secrets, err = nat.ParseSecrets(env); err != nil {
			panic(err)
		}
	}
	sg, err := nat.NewSigner(nat.Options{Secrets: secrets, MaxAge: c.MaxAge, Cookie: c.Cookie, Insecure: !c.Secure})
	if err != nil {
		panic(err)
	}
	return sg
}

// validCookie mints a cookie as the server's own signer would.
func validCookie(s *Server, now time.Time) []byte {
	v, _ := benchSigner(s).Mint(nil, now)
	return v
}

// BenchmarkDecisionPathVisitor is the decision path with a visitor rule
// and a valid visitor cookie to verify: six rules, one of them with its
// IP-ceiling op.
func BenchmarkDecisionPathVisitor(b *testing.B) {
	bs := newBenchSetupWith(b, benchVisitorPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", validCookie)
	if _, ok := nat.ConfigOf(bs.st.policy).Visitor(bs.rs.sc); !ok {
		b.Fatal("cookie not valid")
	}
	b.ReportAllocs()
	for b.Loop() {
		bs.s.decide(bs.ctx, bs.st, bs.rs)
	}
}

// BenchmarkRateLimitHeaders is the RateLimit and RateLimit-Policy fields of
// an allowed answer on the bench policy's ordinary route (five rules, four
// shown: the dry-run shadow is not), after one decision.
func BenchmarkRateLimitHeaders(b *testing.B) {
	bs := newBenchSetup(b, "10.1.2.3", "203.0.113.9, 10.0.0.2")
	if bs.rs.d.Sensitive {
		b.Fatal("the bench route is sensitive: no RateLimit fields")
	}
	bs.s.setRateLimitHeaders(bs.ctx, bs.rs)
	const want = `RateLimit-Policy: "per-ip";q=1000000;w=1, "per-network";q=1000000;w=60, "per-key";q=1000000;w=1, "per-route";q=1000000000;w=3600` + "\r\n" +
		`RateLimit: "per-ip";r=999999;t=1, "per-network";r=999999;t=61, "per-key";r=999999;t=1, "per-route";r=999999999;t=3600` + "\r\n"
	if got := bs.ctx.Response.Header.String(); !strings.Contains(got, want) {
		b.Fatalf("the fields: %q, want %q", got, want)
	}
	b.ReportAllocs()
	for b.Loop() {
		bs.s.setRateLimitHeaders(bs.ctx, bs.rs)
	}
}
