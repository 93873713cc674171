package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// drainServer serves a trivial handler on a loopback listener through a
// drainer whose quiet window is quiet, and returns the listener's address,
// the drainer, and a function that drains the server and reports how long
// it took.
func drainServer(t *testing.T, quiet time.Duration) (string, *drainer, func() (time.Duration, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{
		Handler:         func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") },
		CloseOnShutdown: true,
		IdleTimeout:     time.Minute,
	}
	d := &drainer{quiet: quiet}
	d.install(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stop := func() (time.Duration, error) {
		start := time.Now()
		err := d.drain(srv, ln, served)
		return time.Since(start), err
	}
	return ln.Addr().String(), d, stop
}

// keepAlive is a raw HTTP/1.1 client connection, so the test decides when
// each request is written.
type keepAlive struct {
	c net.Conn
	r *bufio.Reader
}

func dialKeepAlive(t *testing.T, addr string) *keepAlive {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	return &keepAlive{c: c, r: bufio.NewReader(c)}
}

func (k *keepAlive) post(t *testing.T) (*http.Response, error) {
	t.Helper()
	if _, err := io.WriteString(k.c, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na=1"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// TestDrainAnswersRequestsOnIdleConnections: a POST sent on an idle
// keep-alive connection after the server stopped accepting is answered,
// with Connection: close, not reset (fasthttp's Shutdown alone closes idle
// connections at once); the drain ends as soon as its connections are
// closed, not after its quiet window.
func TestDrainAnswersRequestsOnIdleConnections(t *testing.T) {
	addr, d, stop := drainServer(t, time.Hour)
	k := dialKeepAlive(t, addr)
	if resp, err := k.post(t); err != nil || resp.Close {
		t.Fatalf("before the drain: %v, close %v; want a keep-alive answer", err, resp != nil && resp.Close)
	}
	drained := make(chan error, 1)
	go func() { _, err := stop(); drained <- err }()
	// The drain has begun once the listener is closed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		if err == nil {
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener was not closed within 30s")
		}
		time.Sleep(time.Millisecond)
	}
	if !d.closing.Load() {
		t.Fatal("the drainer is not closing")
	}
	resp, err := k.post(t)
	if err != nil {
		t.Fatalf("a POST on the idle connection during the drain: %v, want an answer", err)
	}
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("got %d, Connection: close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	if _, err := k.r.ReadByte(); err != io.EOF {
		t.Errorf("after the last answer: %v, want the server to close the connection", err)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Errorf("drain: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the drain did not end once its one connection closed (it waits for the quiet window of an hour?)")
	}
}

// TestDrainClosesQuietConnections: a keep-alive connection that sends
// nothing is closed once no request started for the quiet window, and the
// drain returns without error.
func TestDrainClosesQuietConnections(t *testing.T) {
	addr, _, stop := drainServer(t, 20*time.Millisecond)
	k := dialKeepAlive(t, addr)
	if _, err := k.post(t); err != nil {
		t.Fatal(err)
	}
	if _, err := stop(); err != nil {
		t.Errorf("drain: %v", err)
	}
	if _, err := k.r.ReadByte(); err == nil {
		t.Error("the idle connection is still open after the drain")
	}
	if _, err := k.post(t); err == nil {
		t.Error("a request after the drain was answered")
	}
}

// TestDrainWithoutConnections returns at once with nothing open.
func TestDrainWithoutConnections(t *testing.T) {
	_, _, stop := drainServer(t, time.Hour)
	done := make(chan error, 1)
	go func() { _, err := stop(); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("drain: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the drain of a server without connections waits (for its quiet window of an hour?)")
	}
}
