package gateway

import (
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// The queue of queue = true rules (docs/policy.md, "Queue"): a request a
// leaky_bucket rule admits within its burst is held for Decision.Delay (the
// time the bucket takes to drain the level ahead of it, NGINX limit_req's
// delay) and then forwarded, so the origin sees the rule's rate. Requests of
// one key are released in arrival order, since each one's release time is
// its predecessor's plus its own cost at the rate.
//
// Bounds: a key holds at most burst requests (the bucket refuses beyond
// it), no request waits past its rule's max_delay (refused at arrival by the
// engine), and the node holds at most Options.QueueMaxHeld requests at once
// (DefaultQueueMaxHeld), answering 503 beyond them. A held request whose
// client has closed its connection is dropped when its time comes, never
// forwarded; its unit stays charged (it arrived, and a client that could
// free its slot by hanging up could refill a queue it does not wait in).

// DefaultQueueMaxHeld is how many requests a node holds in rule queues at
// once unless Options.QueueMaxHeld says otherwise: each is a parked
// goroutine and a connection (a few KB), so 10000 is tens of MB at most.
const DefaultQueueMaxHeld = 10000

// holdResult is what became of a held request.
type holdResult uint8

const (
	holdForward holdResult = iota // its time came: forward it
	holdGone                      // its client closed the connection: drop it
	holdFull                      // the node holds QueueMaxHeld already, or is shutting down: 503
)

// timers are the pooled timers of queue waits: a held request allocates no
// timer of its own (Go 1.23 timers: Stop then Reset leaves no stale tick).
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// hold waits out delay for ctx's request, on the pooled timer or the test
// hook (Options.QueueAfter), then checks that its client is still there.
func (s *Server) hold(ctx *fasthttp.RequestCtx, delay time.Duration) holdResult {
	if s.queueHeld.Add(1) > s.queueMaxHeld {
		s.queueHeld.Add(-1)
		s.m.queueFull.Inc()
		return holdFull
	}
	defer s.queueHeld.Add(-1)
	var fired bool
	if s.queueAfter != nil {
		select {
		case <-s.queueAfter(delay):
			fired = true
		case <-ctx.Done():
		}
	} else {
		t := timers.Get().(*time.Timer)
		t.Reset(delay)
		select {
		case <-t.C:
			fired = true
		case <-ctx.Done():
		}
		t.Stop()
		timers.Put(t)
	}
	switch {
	case !fired: // the server is shutting down
		s.m.queueFull.Inc()
		return holdFull
	case clientGone(ctx.Conn()):
		s.m.queueDropped.Inc()
		return holdGone
	}
	return holdForward
}

// clientGone reports whether the client closed (or reset) conn, by peeking
// at its socket without taking data and without waiting: a read of 0 bytes
// is its FIN. A pipelined request waiting to be read, or a connection that
// is not a socket (an in-memory listener), reads as still there.
func clientGone(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) { gone = peekClosed(fd) })
	return gone
}

// registerQueue registers the queue's metrics.
func (m *metrics) registerQueue(reg *prometheus.Registry, s *Server) {
	m.queueDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_queue_dropped_total",
		Help: "Requests held by a queue = true rule whose client had gone when their time came: dropped, never forwarded.",
	})
	m.queueFull = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_queue_full_total",
		Help: "Requests a queue = true rule admitted that the node answered 503 instead of holding: it held its most already (or was shutting down).",
	})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edge_queue_held",
		Help: "Requests the node holds in queue = true rules now.",
	}, func() float64 { return float64(s.queueHeld.Load()) })
	reg.MustRegister(m.queueDropped, m.queueFull, held)
}
