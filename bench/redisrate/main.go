// Command redisrate is the peer a Go user would write for a Redis-backed
// rate limit: a fasthttp reverse proxy that calls go-redis/redis_rate
// once per request (GCRA, keyed by the client address the load tool sends
// in X-Forwarded-For) on one Redis, and forwards every allowed request to
// the origin. Issue 16 measures the edge on the Redis store, running
// bench/policy.hcl's five rules, against it. The limit is far above the
// bench load, so it refuses nothing and every request is forwarded, as the
// edge's bench policy does. It is a benchmark target, not a proxy to
// deploy: it listens on loopback only.
//
// It is its own Go module (bench/redisrate/go.mod), so the edge's module
// gains no dependency from it and `go test ./...` at the root skips it.
//
// Usage (from bench/redisrate):
//
//	go build -o /tmp/redisrate . && /tmp/redisrate -listen 127.0.0.1:18091 -upstream 127.0.0.1:19000 -redis 127.0.0.1:6390
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18091", "listener HOST:PORT, loopback only")
	upstream := flag.String("upstream", "127.0.0.1:19000", "origin HOST:PORT")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis HOST:PORT")
	rate := flag.Int("rate", 1_000_000, "requests per second allowed per client address (GCRA rate and burst)")
	flag.Parse()
	host, _, err := net.SplitHostPort(*listen)
	if a, perr := netip.ParseAddr(host); err != nil || perr != nil || !a.IsLoopback() {
		fmt.Fprintf(os.Stderr, "redisrate: -listen %q: want a loopback HOST:PORT such as 127.0.0.1:18091\n", *listen)
		os.Exit(2)
	}

	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		fmt.Fprintf(os.Stderr, "redisrate: redis %s: %v\n", *redisAddr, err)
		os.Exit(1)
	}
	limiter := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: *rate, Burst: *rate, Period: time.Second}
	origin := &fasthttp.HostClient{Addr: *upstream}
	srv := &fasthttp.Server{
		Name: "redisrate",
		Handler: func(ctx *fasthttp.RequestCtx) {
			// The key is what a user would write: a prefix and the client
			// address (the load tool's X-Forwarded-For, else the peer).
			client := string(ctx.Request.Header.Peek("X-Forwarded-For"))
			if client == "" {
				client = ctx.RemoteIP().String()
			}
			res, err := limiter.Allow(ctx, "rl:ip:"+client, limit)
			if err != nil {
				ctx.Error("rate limit store unavailable", fasthttp.StatusServiceUnavailable)
				return
			}
			if res.Allowed == 0 {
				ctx.Error("too many requests", fasthttp.StatusTooManyRequests)
				return
			}
			ctx.Request.Header.Del("Connection") // hop-by-hop: the client's, not the origin's
			if err := origin.Do(&ctx.Request, &ctx.Response); err != nil {
				ctx.Error("bad gateway", fasthttp.StatusBadGateway)
			}
		},
	}
	if err := srv.ListenAndServe(*listen); err != nil {
		fmt.Fprintf(os.Stderr, "redisrate: %v\n", err)
		os.Exit(1)
	}
}
