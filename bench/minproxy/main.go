// Command minproxy is the floor of what Go can do as a reverse proxy: a
// fasthttp server that hands every request to a fasthttp client of the
// origin and the answer back, with no rules, no client-address handling
// and no header hygiene. bench/run.sh measures the edge against it (issue
// 16): the edge ÷ minproxy ratio is what the edge's proxy core and its
// rules cost over fasthttp's defaults. It is a benchmark target, not a
// proxy to deploy: it listens on loopback only.
//
// Usage:
//
//	go run ./bench/minproxy -listen 127.0.0.1:18090 -upstream 127.0.0.1:19000
package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18090", "listener HOST:PORT, loopback only")
	upstream := flag.String("upstream", "127.0.0.1:19000", "origin HOST:PORT")
	flag.Parse()
	host, _, err := net.SplitHostPort(*listen)
	if a, perr := netip.ParseAddr(host); err != nil || perr != nil || !a.IsLoopback() {
		fmt.Fprintf(os.Stderr, "minproxy: -listen %q: want a loopback HOST:PORT such as 127.0.0.1:18090\n", *listen)
		os.Exit(2)
	}

	origin := &fasthttp.HostClient{Addr: *upstream}
	srv := &fasthttp.Server{
		Name: "minproxy",
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Request.Header.Del("Connection") // hop-by-hop: the client's, not the origin's
			if err := origin.Do(&ctx.Request, &ctx.Response); err != nil {
				ctx.Error("bad gateway", fasthttp.StatusBadGateway)
			}
		},
	}
	if err := srv.ListenAndServe(*listen); err != nil {
		fmt.Fprintf(os.Stderr, "minproxy: %v\n", err)
		os.Exit(1)
	}
}
