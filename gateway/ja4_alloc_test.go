//go:build !race

package gateway

import (
	"net"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/rules"
)

// fakeJA4Conn is a connection of the TLS listener as the ja4 extension
// sees it: one that knows its fingerprint (a ja4.Conn under TLS).
type fakeJA4Conn struct {
	net.Conn
	addr net.Addr
	fp   []byte
}

func (c *fakeJA4Conn) RemoteAddr() net.Addr { return c.addr }
func (c *fakeJA4Conn) LocalAddr() net.Addr  { return c.addr }
func (c *fakeJA4Conn) Fingerprint() []byte  { return c.fp }

// TestJA4DecisionPathAllocatesNothing: reading the fingerprint, from a
// trusted proxy's ja4_header or from the connection, and a rule keyed on
// it add no allocation to the decision path.
func TestJA4DecisionPathAllocatesNothing(t *testing.T) {
	src := strings.Replace(benchPolicy, "edge {\n", "edge {\n  ja4_header = \"X-JA4\"\n", 1) + `
rule "per-ja4" {
  paths  = ["/login"]
  key    = ["ja4"]
  limit  = 1000000
  period = "1s"
}
`
	const fromHeader, fromConn = "t13d1516h2_8daaf6152771_e5627efa2ab1", "t13i1311h2_f57a46bbacb6_ab7e3b40a677"
	bs := newBenchSetupWith(t, src, "10.1.2.3", "203.0.113.9, 10.0.0.2", nil)
	bs.ctx.Request.Header.Set("X-JA4", fromHeader)
	check := func(name, want string) {
		t.Helper()
		if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
			t.Errorf("%s: decision path allocates %.1f times per request, want 0", name, n)
		}
		last := bs.rs.sc.Matches[len(bs.rs.sc.Matches)-1]
		if string(bs.rs.req.JA4) != want || last.Rule.Name != "per-ja4" || last.Outcome != rules.OutcomeAllow {
			t.Errorf("%s: JA4 %q, rule %s %v; want %s counted", name, bs.rs.req.JA4, last.Rule.Name, last.Outcome, want)
		}
	}
	check("ja4_header", fromHeader)
	bs.ctx.Request.Header.Del("X-JA4")
	bs.ctx.Init2(&fakeJA4Conn{addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000}, fp: []byte(fromConn)}, nil, false)
	check("connection", fromConn)
}
