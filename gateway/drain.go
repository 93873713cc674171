package gateway

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Draining (docs/deploying.md, "Graceful restarts and binary upgrades"). A
// server that stops (SIGTERM, or a binary upgrade handing its sockets to
// the new process) first stops accepting and answers every request still
// coming on its open keep-alive connections with Connection: close, so
// that each client learns from a response that the connection ends, and
// only then closes the connections left idle. fasthttp's Shutdown alone
// closes idle connections at once, and a client that had just sent its
// next request on one (a POST to /login, which no client may resend on its
// own: RFC 9110 §9.2.2) gets a reset instead of an answer.

const (
	// drainQuiet is how long no request may start on the open connections
	// before the ones left are taken for idle and closed: over the time a
	// client takes to send its next request once it has read a response
	// (a round trip: well under a millisecond from a load balancer, tens
	// of milliseconds from most browsers), so that that request is
	// answered, with Connection: close, instead of reset. It is most of a
	// binary upgrade's accept gap.
	drainQuiet = 100 * time.Millisecond
	// drainPoll is how often a drain looks at its connections.
	drainPoll = 2 * time.Millisecond
)

// drainer counts a server's connections and the requests that start while
// it drains.
type drainer struct {
	quiet   time.Duration // drainQuiet when 0 (tests set it)
	closing atomic.Bool
	open    atomic.Int64  // connections accepted and not closed
	started atomic.Uint64 // requests started since closing
}

// install hooks d into srv before it serves: its handler marks every
// response Connection: close once d is closing, and its ConnState counts.
func (d *drainer) install(srv *fasthttp.Server) {
	h := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		if d.closing.Load() {
			// After the handler: the proxy replaces the whole response.
			ctx.SetConnectionClose()
		}
	}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, st fasthttp.ConnState) {
		switch st {
		case fasthttp.StateNew:
			d.open.Add(1)
		case fasthttp.StateActive:
			if d.closing.Load() {
				d.started.Add(1)
			}
		case fasthttp.StateClosed, fasthttp.StateHijacked:
			d.open.Add(-1)
		}
		if prev != nil {
			prev(c, st)
		}
	}
}

// drain stops srv, which serves ln and reports on served when Serve
// returns: it closes ln, waits (within shutdownGrace) until the open
// connections are closed or quiet for drainQuiet, then shuts srv down,
// which answers the requests in flight and closes what is left.
func (d *drainer) drain(srv *fasthttp.Server, ln net.Listener, served <-chan error) error {
	deadline := time.Now().Add(shutdownGrace)
	d.closing.Store(true)
	_ = ln.Close() // Serve returns; the connections are still served
	select {
	case <-served:
	case <-time.After(shutdownGrace):
	}
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	quiet := d.quiet
	if quiet == 0 {
		quiet = drainQuiet
	}
	seen, quietSince := d.started.Load(), time.Now()
	for d.open.Load() > 0 && time.Now().Before(deadline) {
		<-t.C
		if n := d.started.Load(); n != seen {
			seen, quietSince = n, time.Now()
			continue
		}
		if time.Since(quietSince) >= quiet {
			break
		}
	}
	if d.open.Load() == 0 {
		return nil
	}
	// Shutdown answers the requests in flight and closes the idle rest; it
	// looks at its connections every 100ms, so d's count, which sees them
	// close at once, says when it is done (cancelling it returns it).
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.ShutdownWithContext(sctx) }()
	for {
		select {
		case err := <-done:
			if errors.Is(err, net.ErrClosed) {
				err = nil // the listener drain closed
			}
			return err
		case <-t.C:
			if d.open.Load() == 0 {
				cancel()
				<-done
				return nil
			}
		}
	}
}
