package main

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/edge-gateway/edge/gateway"
)

// serveAdmin serves srv's admin listener on a free loopback port until the
// test ends (its cleanup stops it and waits for it to return) and returns
// its HOST:PORT.
func serveAdmin(t *testing.T, srv *gateway.Server) string {
	t.Helper()
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.ServeAdmin(ctx, aln) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return aln.Addr().String()
}
