package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testcert"
	"github.com/edge-gateway/edge/rules/memstore"
)

// BenchmarkProxyOrigin: requests through the edge to a fasthttp origin on
// loopback over http:// and https:// (pooled, resumed connections), to
// price TLS to the origin. go test -run - -bench ProxyOrigin ./gateway/
func BenchmarkProxyOrigin(b *testing.B) {
	ca := testcert.NewCASpec(b, testcert.Spec{CN: "bench CA"})
	_, _, cert := upIssue(b, ca, "origin", false, "localhost")
	for _, scheme := range []string{"http", "https"} {
		b.Run(scheme, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			oln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if scheme == "https" {
				oln = tls.NewListener(oln, &tls.Config{Certificates: []tls.Certificate{cert}})
			}
			origin := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) { c.SetBodyString("ok\n") }}
			wg.Add(1)
			go func() { defer wg.Done(); _ = serveUntil(ctx, origin, oln) }()
			_, port, _ := net.SplitHostPort(oln.Addr().String())
			dir := b.TempDir()
			edge := `upstream = "http://127.0.0.1:` + port + `"`
			if scheme == "https" {
				edge = `upstream = "https://localhost:` + port + `"
  upstream_tls {
    ca_file = "ca.pem"
  }`
			}
			path := upPolicy(b, dir, edge, map[string][]byte{"ca.pem": ca.PEM})
			p, diags := builtin.LoadFile(path)
			if diags.HasErrors() {
				b.Fatal(diags.Error())
			}
			st, _ := memstore.New(memstore.Options{MaxKeys: 1000})
			defer st.Close()
			srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Registry: prometheus.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
			hc := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: 64}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				req.SetRequestURI("http://app.example.com/bench") // no rule: the proxy alone
				for pb.Next() {
					if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
						b.Errorf("%v %d", err, resp.StatusCode())
						return
					}
				}
			})
		})
	}
}
