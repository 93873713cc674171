package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testcert"
	"github.com/edge-gateway/edge/rules"
)

// The read deadlines' answers and the TLS handshake's deadline through the
// real server (the tester's F7): a request past header_timeout or
// body_timeout must get the edge's 408, not a close with no answer, and a
// TLS handshake is part of header_timeout, not time over and above it.

// tlsConnsPolicy is the shipped policy over TLS, with loopback untrusted
// and the replacements given (pairs, as loadPolicy's), and the CA its
// certificate chains to.
func tlsConnsPolicy(t testing.TB, replace ...string) (*rules.Policy, *testcert.CA) {
	t.Helper()
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	ca.Issue(t, "127.0.0.1").Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key"))
	path := filepath.Join(repoRoot(t), "policies.hcl")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	replace = append(slices.Clone(untrustedLoopback), replace...)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("policies.hcl has no %q", replace[i])
		}
		s = strings.Replace(s, replace[i], replace[i+1], 1)
	}
	p, diags := builtin.Load(path, []byte(tlsPolicySrc(t, s, dir)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p, ca
}

// TestTimedOutRequestsGetTheEdges408: a request past its read deadline is
// answered the edge's 408 before its connection closes, whatever write
// deadline fasthttp armed before: on a kept-alive connection (armed
// before the last answer), and on TLS (armed when the connection
// opened), for a header and for a body. The write timeout is as short as
// the read deadlines here (1 s, the least they take), as the shipped
// write timeout (10 s) is as long as header_timeout and shorter than
// body_timeout; on the tree before, each connection closed with no
// answer.
func TestTimedOutRequestsGetTheEdges408(t *testing.T) {
	const writeTimeout = time.Second
	short := []string{`header_timeout            = "10s"`, `header_timeout            = "1s"`}
	longHeaderShortBody := []string{holdHeaders[0], holdHeaders[1], `body_timeout              = "30s"`, `body_timeout              = "1s"`}
	const halfBody = "POST /login HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"username\":"

	t.Run("kept-alive header", func(t *testing.T) {
		n := startNode(t, loadPolicy(t, "policies.hcl", append(slices.Clone(untrustedLoopback), short...)...), nodeOptions{writeTimeout: writeTimeout})
		c := dialFrom(t, "127.0.0.1", n.addr)
		_ = c.SetDeadline(time.Now().Add(answerGuard))
		br := bufio.NewReader(c)
		if _, err := io.WriteString(c, "GET /api/first HTTP/1.1\r\nHost: example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || r.Close {
			t.Fatalf("the first request: %d (close %v), want 200 kept alive", r.StatusCode, r.Close)
		}
		// The next request's header never ends.
		_, _ = io.WriteString(c, halfSent)
		rest, _ := io.ReadAll(br)
		if got := dateLine.ReplaceAllString(string(rest), ""); got != wantPlain408 {
			t.Fatalf("a kept-alive connection's half-sent header: %q, want the edge's 408", got)
		}
	})
	for _, tt := range []struct {
		name, req string
		replace   []string
	}{
		{"tls header", halfSent, short},
		{"tls body", halfBody, longHeaderShortBody},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, ca := tlsConnsPolicy(t, tt.replace...)
			n := startNode(t, p, nodeOptions{writeTimeout: writeTimeout})
			c := tls.Client(dialFrom(t, "127.0.0.1", n.addr), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
			if _, err := io.WriteString(c, tt.req); err != nil {
				t.Fatal(err)
			}
			resp := readToClose(t, c)
			if got := dateLine.ReplaceAllString(resp, ""); got != wantPlain408 {
				t.Fatalf("%q over TLS: %q, want the edge's 408", tt.req, got)
			}
			if got := testutil.ToFloat64(n.srv.m.timeouts); got != 1 {
				t.Errorf("edge_request_timeouts_total = %v, want 1", got)
			}
		})
	}
}

// deadlineConn records the order of a connection's reads and read
// deadlines as the server uses them.
type deadlineConn struct {
	net.Conn
	mu     sync.Mutex
	events []string // "read", "deadline"
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if len(c.events) == 0 || c.events[len(c.events)-1] != "read" {
		c.events = append(c.events, "read")
	}
	c.mu.Unlock()
	return c.Conn.Read(b)
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.events = append(c.events, "deadline")
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.events = append(c.events, "deadline")
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

// rearmedAfterRead reports whether a read deadline was set after the
// connection's first read.
func (c *deadlineConn) rearmedAfterRead() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	read := false
	for _, e := range c.events {
		if e == "read" {
			read = true
		} else if read {
			return true, strings.Join(c.events, " ")
		}
	}
	return false, strings.Join(c.events, " ")
}

// deadlineListener wraps each accepted connection in a deadlineConn and
// hands it to the test.
type deadlineListener struct {
	net.Listener
	conns chan *deadlineConn
}

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	dc := &deadlineConn{Conn: c}
	select {
	case l.conns <- dc:
	default:
	}
	return dc, nil
}

// TestTLSHandshakeIsPartOfTheHeaderDeadline: a TLS connection's handshake
// and its first request's header share one header_timeout, armed when the
// connection opens (docs/policy.md, "header_timeout"): a client that
// handshakes and then sends half a header is answered the edge's 408 and
// closed under the deadline armed before the handshake's first read, and
// a client that stalls in its handshake is closed by that deadline
// without an answer, counted as a handshake timeout. On the tree before,
// fasthttp ran the handshake under one header_timeout and then armed a
// second for the header, so a client had the handshake's time over and
// above the header's (the deadline was armed again after the handshake
// read), and its 408 went out under the write deadline armed when the
// connection opened.
func TestTLSHandshakeIsPartOfTheHeaderDeadline(t *testing.T) {
	p, ca := tlsConnsPolicy(t, `header_timeout            = "10s"`, `header_timeout            = "1s"`)
	conns := make(chan *deadlineConn, 4)
	n := startNode(t, p, nodeOptions{writeTimeout: time.Second, wrap: func(ln net.Listener) net.Listener {
		return deadlineListener{ln, conns}
	}})

	t.Run("handshake then half a header", func(t *testing.T) {
		c := tls.Client(dialFrom(t, "127.0.0.1", n.addr), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, halfSent); err != nil {
			t.Fatal(err)
		}
		resp := readToClose(t, c)
		if got := dateLine.ReplaceAllString(resp, ""); got != wantPlain408 {
			t.Errorf("a half-sent header over TLS: %q, want the edge's 408", got)
		}
		if again, events := (<-conns).rearmedAfterRead(); again {
			t.Errorf("the read deadline was armed again after the handshake began (%s): the handshake is not part of header_timeout", events)
		}
	})
	t.Run("stalled handshake", func(t *testing.T) {
		c := dialFrom(t, "127.0.0.1", n.addr)
		hello := sslv3Hello()
		if _, err := c.Write(hello[:20]); err != nil { // half a ClientHello, then nothing
			t.Fatal(err)
		}
		if got := readToCloseOrEmpty(t, c); got != "" {
			t.Errorf("a stalled handshake got %q, want a close without an answer", got)
		}
		if again, events := (<-conns).rearmedAfterRead(); again {
			t.Errorf("the read deadline was armed again during the handshake (%s)", events)
		}
		waitFor(t, func() bool { return testutil.ToFloat64(n.srv.listenerTLS.errs[hsTimeout]) == 1 }, answerGuard, fmt.Sprintf("the stalled handshake counted as %s", hsReasonNames[hsTimeout]))
	})
}
