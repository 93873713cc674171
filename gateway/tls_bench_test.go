package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkTLSHandshake is one new TLS connection (a full handshake, ECDSA
// P-256, TLS 1.3 with Go's client) and one GET through the edge to the
// demo origin per op, client and node on this machine's cores; the
// number to compare is with BenchmarkTLSKeepAlive (the same GET on an open
// connection). BENCHMARKS.md has no budget for it: a handshake is the
// client's cost as much as the node's.
func BenchmarkTLSHandshake(b *testing.B) {
	n := startTLSNode(b, loginFixture, "edge.example", 0, false)
	cfg := n.clientConfig()
	cfg.ClientSessionCache = nil // a full handshake each time
	for b.Loop() {
		c, err := tls.Dial("tcp", n.addr, cfg)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprint(c, "GET /api/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		c.Close()
	}
}

// BenchmarkTLSKeepAlive is one GET per op on one open TLS connection.
func BenchmarkTLSKeepAlive(b *testing.B) {
	n := startTLSNode(b, loginFixture, "edge.example", 0, false)
	c, err := tls.Dial("tcp", n.addr, n.clientConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for b.Loop() {
		fmt.Fprint(c, "GET /api/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
}

// BenchmarkPlainKeepAlive is BenchmarkTLSKeepAlive without TLS.
func BenchmarkPlainKeepAlive(b *testing.B) {
	n := startTLSNode(b, loginFixture, "edge.example", 0, true)
	raw, err := net.Dial("tcp", n.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	br := bufio.NewReader(raw)
	for b.Loop() {
		fmt.Fprint(raw, "GET /api/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
}
