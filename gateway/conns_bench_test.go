package gateway

import (
	"net"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules/memstore"
)

// addrConn is a connection whose only part a listener's admission reads
// is its peer's address.
type addrConn struct {
	net.Conn
	peer *net.TCPAddr
}

func (c addrConn) RemoteAddr() net.Addr { return c.peer }
func (addrConn) Close() error           { return nil }

// BenchmarkConnAdmit is what the connection caps add to each connection
// the public listener accepts, on the shipped policy: its admission
// (trusted proxy or not, the counted address, its IPv6 prefix, the caps
// under one lock) and its release at Close. A request on a kept-alive
// connection pays none of it. Its one allocation is the limitedConn.
func BenchmarkConnAdmit(b *testing.B) {
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer ms.Close()
	s, err := New(Options{Extensions: builtin.Extensions(), Policy: loadPolicy(b, "policies.hcl"), Store: ms})
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct{ name, peer string }{
		{"trusted", "127.0.0.1"},
		{"ipv4", "198.51.100.7"},
		{"ipv6", "2001:db8:1:2::9"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			l := &connListener{s: s, cc: &s.conns, perClient: true, answer: true}
			var c net.Conn = addrConn{peer: &net.TCPAddr{IP: net.ParseIP(tt.peer), Port: 40000}}
			b.ReportAllocs()
			for b.Loop() {
				lc := l.admit(c)
				if lc == nil {
					b.Fatal("refused")
				}
				_ = lc.Close()
			}
		})
	}
}
