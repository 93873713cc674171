package gateway

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// Connection budgets (docs/policy.md, "Connections"; docs/attacks.md,
// "Connections"). The listener counts what it accepted and has not closed:
// the node's connections (max_conns) and, on the public listener, each
// untrusted socket peer's, by address (max_conns_per_ip), by IPv6 prefix
// (max_conns_per_ipv6_prefix, at the policy's ipv6_prefix) and by client
// network (max_conns_per_network: the address masked to the store's
// network prefixes, a /24 or a /48, which hold 256 addresses and 65,536
// /64s, each under its own cap, that could fill max_conns together). The
// forwarding header is not known when a connection is accepted, so the
// client is the peer: a trusted proxy, which carries many clients, is held
// to max_conns alone (docs/deploying.md, "Connection budgets behind a load
// balancer"). A connection over a cap is answered and closed in Accept,
// before fasthttp sees it:
//
//   - over its client's cap: the bare 429 (bare429), "you are over your
//     budget";
//   - over the node's: the edge's 503 (unavailable), "we are in trouble"
//     (RFC 6585, RFC 9110 §15.6.4);
//
// each with Connection: close, and counted in
// edge_connections_refused_total{reason}. On a TLS listener it is closed
// without an answer: an HTTP answer would need the handshake, the very
// work the cap refuses to do.
//
// fasthttp's own connection cap (Server.Concurrency) is set past anything
// max_conns allows (fasthttpConcurrency), so that its refusal, which
// writes fasthttp's text, is never reached.
//
// The caps are read from the policy in force at each accept, so a reload
// applies them to the connections that open after it; a connection is
// released under the keys it was counted under.

// fasthttpConcurrency is fasthttp's Server.Concurrency: twice the highest
// max_conns, so that the connections closing (counted out by the listener
// a moment before fasthttp's worker is free) never make fasthttp refuse
// one itself.
const fasthttpConcurrency = 2 * nodecfg.MaxConnsLimit

// Reasons for refusing a connection, edge_connections_refused_total's
// reason label: a fixed set, never an address.
const (
	refusedIP         = iota // the peer's address holds max_conns_per_ip
	refusedIPv6Prefix        // the peer's IPv6 prefix holds max_conns_per_ipv6_prefix
	refusedNetwork           // the peer's network holds max_conns_per_network
	refusedMaxConns          // the node holds max_conns
	numRefusedReasons
)

var refusedReasonNames = [numRefusedReasons]string{
	refusedIP:         "max_conns_per_ip",
	refusedIPv6Prefix: "max_conns_per_ipv6_prefix",
	refusedNetwork:    "max_conns_per_network",
	refusedMaxConns:   "max_conns",
}

// connCounts is the connections of one listener: the node's, and the
// per-client counts of the public listener.
type connCounts struct {
	mu      sync.Mutex
	open    atomic.Int64           // accepted and not closed (written under mu)
	byIP    map[netip.Addr]int32   // per counted peer address; absent at 0
	byIPv6  map[netip.Prefix]int32 // per IPv6 prefix; absent at 0
	byNet   map[netip.Prefix]int32 // per client network (an IPv4 /24, an IPv6 /48); absent at 0
	refused [numRefusedReasons]prometheus.Counter
	// logAt is the Unix second of the last "connection refused" log line,
	// and unlogged the refusals since then it did not log.
	logAt    atomic.Int64
	unlogged atomic.Int64
}

// registerConns registers the connection metrics: the refusals of the
// public and the decision-only listener, by reason, the public listener's
// open connections, and the requests answered 408.
func registerConns(reg *prometheus.Registry, s *Server) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_connections_refused_total",
		Help: "Connections the public (or decision-only) listener answered and closed at accept, by reason: max_conns_per_ip, max_conns_per_ipv6_prefix and max_conns_per_network (a bare 429: one client's or one client network's cap), max_conns (503: the node's).",
	}, []string{"reason"})
	for i, n := range refusedReasonNames {
		s.conns.refused[i] = vec.WithLabelValues(n)
		s.decideConns.refused[i] = s.conns.refused[i]
	}
	admin := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_admin_connections_refused_total",
		Help: "Connections the admin listener answered 503 and closed at accept: it held its 64 (adminMaxConns).",
	})
	for i := range s.adminConns.refused {
		s.adminConns.refused[i] = admin
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edge_connections_open",
		Help: "Connections open on the public listener now (accepted and not closed), which max_conns bounds.",
	}, func() float64 { return float64(s.conns.open.Load()) })
	s.m.timeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_request_timeouts_total",
		Help: "Requests answered 408 and their connections closed: a header not read within header_timeout (from the connection's opening, or the request's first byte on a kept-alive one) or a body not within body_timeout.",
	})
	reg.MustRegister(vec, admin, open, s.m.timeouts)
}

// limitConns returns ln counting its connections in cc, refusing those
// over the policy's caps: the node's, and, when perClient, each untrusted
// peer's. answer says whether a refused connection gets an HTTP answer
// (plain HTTP) or is closed without one (TLS).
func (s *Server) limitConns(ln net.Listener, cc *connCounts, perClient, answer bool) net.Listener {
	return &connListener{Listener: ln, s: s, cc: cc, perClient: perClient, answer: answer}
}

// limitAdminConns returns the admin listener ln holding at most
// adminMaxConns connections, the next answered the edge's 503 and closed;
// its peers are operators and scrapers, held to no per-client cap.
func (s *Server) limitAdminConns(ln net.Listener) net.Listener {
	return &connListener{Listener: ln, s: s, cc: &s.adminConns, answer: true, max: adminMaxConns}
}

// connListener is a listener that holds its connections to the caps.
type connListener struct {
	net.Listener
	s         *Server
	cc        *connCounts
	perClient bool
	answer    bool
	max       int       // the node's cap instead of the policy's max_conns; 0: max_conns
	errLogAt  time.Time // the last "accept failed" log line (Accept's goroutine only)
}

// Accept returns the next connection within the caps; those over one are
// answered and closed here. An accept that fails for want of a resource
// (file descriptors, kernel memory: EMFILE, ENFILE, ENOBUFS, ENOMEM) is
// retried after a pause, from 5ms doubling to 1s, as net/http does, where
// fasthttp would stop serving: a flood that exhausts the descriptors for a
// moment must not end the listener.
func (l *connListener) Accept() (net.Conn, error) {
	var pause time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !resourceShortage(err) {
				return nil, err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			if time.Since(l.errLogAt) > time.Minute {
				l.errLogAt = time.Now()
				l.s.log.Warn("accepting a connection failed; retrying", "error", err.Error(), "pause", pause.String())
			}
			time.Sleep(pause)
			continue
		}
		pause = 0
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// resourceShortage reports whether an accept failed for want of a
// resource that frees as connections close.
func resourceShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// admit counts c and returns it wrapped, or answers it, closes it and
// returns nil when it is over a cap: its client's first (the client's own
// budget, 429), then the node's (503).
func (l *connListener) admit(c net.Conn) net.Conn {
	p := l.s.state.Load().policy
	cs := &nodecfg.Of(p).Conns
	lc := &limitedConn{Conn: c, cc: l.cc}
	if l.perClient {
		if a, ok := connPeer(c); ok && !p.Client.Trusted(a) {
			lc.ip = p.Client.Counted(a) // a 6to4 or NAT64 spelling is its IPv4 host
			if lc.ip.Is6() {
				lc.net, _ = lc.ip.Prefix(p.IPv6Prefix)
				lc.wide, _ = lc.ip.Prefix(cmp.Or(cs.NetworkIPv6Prefix, rules.DefaultNetworkIPv6Prefix))
			} else {
				lc.wide, _ = lc.ip.Prefix(cmp.Or(cs.NetworkIPv4Prefix, rules.DefaultNetworkIPv4Prefix))
			}
		}
	}
	perIP := cmp.Or(cs.PerIP, nodecfg.DefaultMaxConnsPerClient)
	perPrefix := cmp.Or(cs.PerIPv6Prefix, nodecfg.DefaultMaxConnsPerClient)
	perNet := cmp.Or(cs.PerNetwork, nodecfg.DefaultMaxConnsPerNetwork)
	maxConns := int64(cmp.Or(l.max, cs.Max, nodecfg.DefaultMaxConns))

	cc := l.cc
	reason := -1
	cc.mu.Lock()
	switch {
	case lc.ip.IsValid() && int(cc.byIP[lc.ip]) >= perIP:
		reason = refusedIP
	case lc.net.IsValid() && int(cc.byIPv6[lc.net]) >= perPrefix:
		reason = refusedIPv6Prefix
	case lc.wide.IsValid() && int(cc.byNet[lc.wide]) >= perNet:
		reason = refusedNetwork
	case cc.open.Load() >= maxConns:
		reason = refusedMaxConns
	default:
		cc.open.Add(1)
		if lc.ip.IsValid() {
			if cc.byIP == nil {
				cc.byIP, cc.byIPv6, cc.byNet = map[netip.Addr]int32{}, map[netip.Prefix]int32{}, map[netip.Prefix]int32{}
			}
			cc.byIP[lc.ip]++
			if lc.net.IsValid() {
				cc.byIPv6[lc.net]++
			}
			if lc.wide.IsValid() {
				cc.byNet[lc.wide]++
			}
		}
	}
	cc.mu.Unlock()
	if reason < 0 {
		return lc
	}
	cc.refused[reason].Inc()
	l.logRefusal(reason, lc.ip)
	if l.answer {
		status := fasthttp.StatusServiceUnavailable
		if reason != refusedMaxConns {
			status = fasthttp.StatusTooManyRequests
		}
		writeRefusal(c, status)
	}
	_ = c.Close()
	return nil
}

// logRefusal logs a refused connection, at most one line a second,
// naming how many it stands for (edge_connections_refused_total counts
// every one): the reason and the client's keyed hash, never its address.
func (l *connListener) logRefusal(reason int, ip netip.Addr) {
	cc := l.cc
	sec := time.Now().Unix()
	if last := cc.logAt.Load(); last >= sec || !cc.logAt.CompareAndSwap(last, sec) {
		cc.unlogged.Add(1)
		return
	}
	attrs := []slog.Attr{slog.String("reason", refusedReasonNames[reason]), slog.Int64("refused_unlogged", cc.unlogged.Swap(0))}
	if ip.IsValid() {
		h := l.s.engine.HashClient(ip)
		attrs = append(attrs, slog.String("client", hex.EncodeToString(h[:])))
	}
	l.s.log.LogAttrs(context.Background(), slog.LevelInfo, "connection refused", attrs...)
}

// connPeer is c's socket peer, unmapped; ok is false for a connection
// that is not TCP (an in-memory listener), which only max_conns holds.
func connPeer(c net.Conn) (netip.Addr, bool) {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	return a.Unmap(), ok
}

// release counts c out, once.
func (cc *connCounts) release(c *limitedConn) {
	cc.mu.Lock()
	cc.open.Add(-1)
	if c.ip.IsValid() {
		if n := cc.byIP[c.ip] - 1; n > 0 {
			cc.byIP[c.ip] = n
		} else {
			delete(cc.byIP, c.ip)
		}
		if c.net.IsValid() {
			if n := cc.byIPv6[c.net] - 1; n > 0 {
				cc.byIPv6[c.net] = n
			} else {
				delete(cc.byIPv6, c.net)
			}
		}
		if c.wide.IsValid() {
			if n := cc.byNet[c.wide] - 1; n > 0 {
				cc.byNet[c.wide] = n
			} else {
				delete(cc.byNet, c.wide)
			}
		}
	}
	cc.mu.Unlock()
}

// limitedConn is an admitted connection: closing it gives its place back.
type limitedConn struct {
	net.Conn
	cc     *connCounts
	ip     netip.Addr   // the counted peer; invalid when no per-client cap holds it
	net    netip.Prefix // its IPv6 prefix; invalid for IPv4
	wide   netip.Prefix // its client network (max_conns_per_network); invalid when ip is
	closed atomic.Bool
}

// Close gives the connection's place back (once), then closes it: a peer
// that sees the connection end may open another at once.
func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.cc.release(c)
	}
	return c.Conn.Close()
}

var errNotSocket = errors.New("gateway: not a socket")

// SyscallConn is the socket's, for the queue's look at whether the client
// is gone (clientGone).
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNotSocket
}

// refusalWriteTimeout bounds the write of a refusal: a fresh connection's
// send buffer takes it at once, but Accept must never wait on a client.
const refusalWriteTimeout = 100 * time.Millisecond

// refusals are the responses writeRefusal renders, pooled: a flood of
// connections over a cap must not become an allocation storm.
var refusals = sync.Pool{New: func() any { return new(fasthttp.Response) }}

// writeRefusal writes the edge's answer of status to a connection it
// refuses (the bare 429, or the 503 that unavailable answers: the very
// bytes a request would get, but for its Date), with Connection: close,
// then drops what the client already sent, so that closing sends it a FIN
// after the answer rather than a reset that could discard it
// (discardPending).
func writeRefusal(c net.Conn, status int) {
	r := refusals.Get().(*fasthttp.Response)
	if status == fasthttp.StatusTooManyRequests {
		setBare429(r)
	} else {
		setPlain(r, status)
	}
	r.SetConnectionClose()
	_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
	_, _ = r.WriteTo(c)
	discardPending(c)
	refusals.Put(r)
}
