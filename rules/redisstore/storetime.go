package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Store time. The client's read deadline is meant to catch a server that
// does not answer within the budget; but Go notices a socket's readiness
// through its network poller, which a node whose every core is busy runs
// late (when a processor runs out of goroutines, or every 10 ms from the
// runtime's monitor), while it runs timers on time. Under that load a
// deadline can fire with the reply already waiting in the socket: the
// store answered in time and the node was too busy to look. A timeout
// then would apply each rule's on_store_error to a healthy store, which
// for "allow" lets the very flood that saturates the node through
// uncounted.
//
// So the connections to Redis are storeTimeConns: a read that times out
// before it got a byte looks, without waiting, whether the socket holds
// data (recv with MSG_PEEK|MSG_DONTWAIT), and if it does reads it under a
// fresh deadline. A server that has not answered is still a timeout, at
// the same moment as before.

// maxLateReads bounds the reads one Read retries after a deadline that
// found the reply already there.
const maxLateReads = 3

// lateReads counts reads retried by every storeTimeConn (Stats.LateReads).
type lateReads = atomic.Uint64

// storeTimeConn is a connection to Redis whose read deadline, once it has
// fired, is taken back when the reply was already in the socket.
type storeTimeConn struct {
	net.Conn
	raw   syscall.RawConn // nil: the connection cannot be peeked, deadlines stand
	grace time.Duration   // the fresh deadline of a retried read
	late  *lateReads
}

func newStoreTimeConn(c net.Conn, grace time.Duration, late *lateReads) *storeTimeConn {
	sc := &storeTimeConn{Conn: c, grace: grace, late: late}
	if s, ok := c.(syscall.Conn); ok {
		if raw, err := s.SyscallConn(); err == nil {
			sc.raw = raw
		}
	}
	return sc
}

// Read is the connection's Read, retried (at most maxLateReads times) when
// it timed out before reading a byte while the server's reply was there.
func (c *storeTimeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	for i := 0; i < maxLateReads && n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && c.answered(); i++ {
		c.late.Add(1)
		n, err = c.Conn.Read(b)
	}
	return n, err
}

// answered reports whether the socket holds data to read, after a read
// deadline fired. When it does, the read deadline is moved grace ahead;
// when it does not, the deadline stays passed.
func (c *storeTimeConn) answered() bool {
	if c.raw == nil || c.Conn.SetReadDeadline(time.Now().Add(c.grace)) != nil {
		return false
	}
	var ready bool
	err := c.raw.Read(func(fd uintptr) bool {
		ready = peek(fd)
		return true // never wait: the deadline has passed
	})
	if err != nil || !ready {
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0)) // passed, as the caller found it
		return false
	}
	return true
}

// SyscallConn exposes the socket, as go-redis' pool health check expects
// of a direct connection.
func (c *storeTimeConn) SyscallConn() (syscall.RawConn, error) {
	if c.raw == nil {
		return nil, errors.New("redisstore: connection has no socket")
	}
	return c.raw, nil
}

// keepAlive is go-redis' default dialers' TCP keep-alive: probe after 30s
// idle, 3 probes 5s apart.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}

// storeTimeDialer returns a dialer like go-redis' default (dial timeout,
// keep-alive, TLS when tlsConfig is set) whose connections are
// storeTimeConns; TLS runs on top of one, so that its reads are retried
// the same way. dialTimeout bounds the TCP connect and the TLS handshake
// together; grace is a late read's fresh deadline (the call's budget).
//
// A dial that fails returns a deadConn carrying the error, not the error:
// go-redis' pool counts failed dials over its whole life, and once they
// reach its PoolSize it stops dialing and fails every call with the last
// dial error, trying one dial a second in the background until one
// succeeds (internal/pool/pool.go, dialErrorsNum and tryDial, v9.23). An
// outage long enough to fail PoolSize dials (four seconds of the breaker's
// probes, or fewer across several outages) would then keep the node
// degraded for up to a second after Redis is back, past the one second
// the node promises. The call on a deadConn fails with the dial's own
// error, at the same moment, and the pool drops the connection.
func storeTimeDialer(dialTimeout, grace time.Duration, tlsConfig *tls.Config, late *lateReads) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		// One deadline for the TCP connect and the TLS handshake together:
		// dialTimeout is the budget of establishing a connection
		// (Options.DialTimeout), not of each step.
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		d := net.Dialer{KeepAliveConfig: keepAlive}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return deadConn{err: err}, nil
		}
		sc := newStoreTimeConn(c, grace, late)
		if tlsConfig == nil {
			return sc, nil
		}
		cfg := tlsConfig.Clone()
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(sc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return deadConn{err: err}, nil
		}
		return tc, nil
	}
}

// deadConn is a connection whose dial failed: every read and write fails
// with the dial's error (storeTimeDialer says why it is not returned).
type deadConn struct{ err error }

func (c deadConn) Read([]byte) (int, error)       { return 0, c.err }
func (c deadConn) Write([]byte) (int, error)      { return 0, c.err }
func (deadConn) Close() error                     { return nil }
func (deadConn) LocalAddr() net.Addr              { return deadAddr{} }
func (deadConn) RemoteAddr() net.Addr             { return deadAddr{} }
func (deadConn) SetDeadline(time.Time) error      { return nil }
func (deadConn) SetReadDeadline(time.Time) error  { return nil }
func (deadConn) SetWriteDeadline(time.Time) error { return nil }

// deadAddr is a deadConn's address.
type deadAddr struct{}

func (deadAddr) Network() string { return "tcp" }
func (deadAddr) String() string  { return "dial failed" }
