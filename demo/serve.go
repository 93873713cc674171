package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// newServer returns the fasthttp server for o.
func newServer(o *Origin) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      o.Handler,
		ReadBufferSize:               16 << 10, // above the edge's 8 KiB header cap
		ReadTimeout:                  10 * time.Second,
		WriteTimeout:                 10 * time.Second,
		IdleTimeout:                  60 * time.Second,
		MaxRequestBodySize:           maxBodyBytes,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		CloseOnShutdown:              true,
	}
}

// Serve serves o on ln until ctx is done, then shuts down: it stops
// holding and releases every held request (StopHolding), then waits up to
// shutdownTimeout (5s) for requests in flight. It closes ln. It returns nil
// after a shutdown caused by ctx, and the listener's error otherwise.
func (o *Origin) Serve(ctx context.Context, ln net.Listener) error {
	srv := newServer(o)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		if err == nil {
			return nil
		}
		return fmt.Errorf("serving demo origin: %w", err)
	case <-ctx.Done():
	}

	// Held requests would keep their connections open for the whole
	// grace period: let them be answered first.
	o.StopHolding()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := shutdownErr(srv.ShutdownWithContext(sctx))
	// Shutdown before Serve registered ln leaves ln open; closing it here
	// makes Serve return either way.
	_ = ln.Close()
	<-errc
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("shutting down demo origin: %w", err)
	}
	return nil
}

// ListenAndServe listens on addr (TCP HOST:PORT) and serves o until ctx is
// done, as Serve does. It returns an error when it cannot listen.
func (o *Origin) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for demo origin: %w", err)
	}
	return o.Serve(ctx, ln)
}

// shutdownErr is what a shutdown's error means to the caller: a grace
// period that ran out is not one. fasthttp waits for every open connection,
// and one that was accepted but never sent a request stays open until its
// read timeout, longer than the grace; the origin stops waiting for it.
// (gateway's server has its own copy: demo imports nothing from gateway.)
func shutdownErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
