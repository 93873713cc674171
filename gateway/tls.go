package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// TLS on the public listener (docs/deploying.md, "TLS on the public
// listener"). The policy's tls block (node.ListenerTLS) names the
// certificate; compile has loaded and checked it, and install stores it in
// an atomic pointer that every handshake reads (tls.Config.GetCertificate),
// so a reload swaps the certificate for the connections that start after
// it while those already open keep theirs, and none is dropped.
// SetCertificate swaps it the same way without a policy: the certificate
// reload, which a broken policy file does not hold back.
//
// The listener speaks TLS 1.2 and 1.3 with Go's default cipher suites and
// curves, and offers only "http/1.1" by ALPN: fasthttp serves HTTP/1.x and
// has no HTTP/2, so a client that offers h2 and http/1.1 (every browser,
// curl) gets HTTP/1.1, and one that offers only h2 is refused at the
// handshake.
//
// Whether the public listener is TLS is fixed by the policy the node
// started with (the one New got): a reload that adds or removes the tls
// block cannot turn a bound listener into another (the reload says so in
// its warnings); a reload without a tls block keeps the last certificate
// serving on a TLS listener.

// Handshake failure reasons, edge_tls_handshake_errors_total's `reason`
// label: a fixed set, so that no scanner can grow the series.
const (
	hsClosed  = iota // the client closed or reset the connection before finishing (a bare TCP probe, a health check)
	hsTimeout        // no complete handshake within the handshake timeout (a silent connection)
	hsNotTLS         // the first bytes are not a TLS handshake record (plain HTTP to the TLS port, garbage)
	hsVersion        // the client offers no version from TLS 1.2 up (SSLv3, TLS 1.0, TLS 1.1)
	hsOther          // anything else: no shared cipher suite, curve or ALPN protocol, a malformed ClientHello
	numHSReasons
)

var hsReasonNames = [numHSReasons]string{
	hsClosed:  "closed",
	hsTimeout: "timeout",
	hsNotTLS:  "not_tls",
	hsVersion: "version",
	hsOther:   "other",
}

// listenerTLS is the Server's TLS state.
type listenerTLS struct {
	cert atomic.Pointer[tls.Certificate] // the policy in force's; nil until a policy with tls is installed

	once    sync.Once
	enabled bool // the first policy installed (New's) has a tls block: Serve serves TLS

	// timeout bounds each handshake; 0 means the node's header_timeout
	// (Server.HeaderTimeout), which the handshake is part of. Set before
	// Serve (tests shorten it).
	timeout time.Duration

	errs [numHSReasons]prometheus.Counter
	// handshaking counts the handshakes in progress (tests wait on it).
	handshaking atomic.Int64
}

// register registers the TLS metrics on reg (gateway/ops_metrics.go): the
// counters exist, at 0, on a node without TLS too.
func (t *listenerTLS) register(reg *prometheus.Registry) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_tls_handshake_errors_total",
		Help: "TLS handshakes on the public listener that failed, by reason: closed (the client closed first), timeout, not_tls (plain HTTP or garbage), version (below TLS 1.2, such as SSLv3), other.",
	}, []string{"reason"})
	for i, n := range hsReasonNames {
		t.errs[i] = vec.WithLabelValues(n)
	}
	expiry := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edge_tls_certificate_expiry_timestamp_seconds",
		Help: "When the certificate the public listener serves expires (its leaf's NotAfter), in Unix seconds; 0 without TLS.",
	}, func() float64 {
		c := t.cert.Load()
		if c == nil || c.Leaf == nil {
			return 0
		}
		return float64(c.Leaf.NotAfter.Unix())
	})
	reg.MustRegister(vec, expiry)
}

// install takes the certificate of p, if it has one (Server.install, on
// every reload), and logs a certificate it did not serve before. The first
// policy decides whether the listener is TLS.
func (t *listenerTLS) install(p *rules.Policy, log *slog.Logger) {
	lt := nodecfg.Of(p).TLS
	t.once.Do(func() { t.enabled = lt != nil })
	if lt == nil || lt.Certificate == nil || lt.Certificate.Leaf == nil {
		return // compile always loads both; a hand-made policy keeps what serves
	}
	t.swap(lt, log)
}

// swap serves lt's certificate from the next handshake on, and logs it
// if it is not the one that served before.
func (t *listenerTLS) swap(lt *nodecfg.ListenerTLS, log *slog.Logger) {
	c := lt.Certificate
	if old := t.cert.Swap(c); old == nil || !bytes.Equal(old.Certificate[0], c.Certificate[0]) {
		log.Info("tls certificate installed", "cert_file", lt.CertFile, "subject", c.Leaf.Subject.String(),
			"serial", c.Leaf.SerialNumber.Text(16), "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
}

// SetCertificate serves lt's certificate on the public TLS listener from
// the next handshake on, without touching the policy in force: the
// certificate reload's (cmd/edge, reload.go), which follows the files on
// disk whatever the state of the policy file. Connections already open
// keep the certificate they shook hands with. lt comes from
// node.LoadListenerTLS (its Certificate and Leaf set); a node whose
// listener is plain HTTP ignores it, and so does a later reload's policy
// replace it with its own (compiled from the same files). Safe for
// concurrent use with handshakes and reloads.
func (s *Server) SetCertificate(lt *nodecfg.ListenerTLS) {
	if !s.ServesTLS() || lt == nil || lt.Certificate == nil || lt.Certificate.Leaf == nil {
		return
	}
	s.listenerTLS.swap(lt, s.log)
}

// ServesTLS reports whether the public listener serves TLS: the policy the
// node started with has a tls block.
func (s *Server) ServesTLS() bool { return s.listenerTLS.enabled }

var errNoCertificate = errors.New("gateway: no certificate installed")

// tlsConfig is the public listener's TLS configuration.
func (s *Server) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// fasthttp has no HTTP/2: never offer h2.
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.listenerTLS.cert.Load(); c != nil {
				return c, nil
			}
			return nil, errNoCertificate
		},
	}
}

// wrapTLS returns ln serving TLS when the node's policy has a tls block,
// ln itself otherwise.
func (s *Server) wrapTLS(ln net.Listener) net.Listener {
	if !s.ServesTLS() {
		return ln
	}
	to := s.listenerTLS.timeout
	if to <= 0 {
		to = s.headerTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &tlsListener{Listener: ln, cfg: s.tlsConfig(), s: s, timeout: to, ctx: ctx, cancel: cancel}
}

// tlsListener accepts TCP connections and returns them as TLS server
// connections whose handshake runs on the connection's own goroutine at
// its first read or write (never in Accept, which a slow client would
// hold up for every other). Closing it (the server's shutdown) also
// interrupts the handshakes in progress, so that a shutdown neither waits
// for a scanner's silent connection nor leaves its goroutine behind.
type tlsListener struct {
	net.Listener
	cfg     *tls.Config
	s       *Server
	timeout time.Duration
	ctx     context.Context // the handshakes' parent: done once the listener is closed
	cancel  context.CancelFunc
}

// Close closes the listener and interrupts the handshakes in progress.
func (l *tlsListener) Close() error {
	l.cancel()
	return l.Listener.Close()
}

func (l *tlsListener) Accept() (net.Conn, error) {
	raw, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	// The extensions' wrappers sit under TLS and see the ClientHello as
	// the handshake reads it (ja4 records it): tls.Conn's NetConn is the
	// outermost.
	c := raw
	for _, w := range l.s.ext.conns {
		c = w.WrapConn(c)
	}
	return &tlsConn{Conn: tls.Server(c, l.cfg), l: l}, nil
}

// tlsConn is a connection of the public TLS listener. It embeds *tls.Conn,
// so fasthttp's RequestCtx.IsTLS and TLSConnectionState see it, and so do
// the extensions (its NetConn is their wrapper, ext.ConnWrapper).
type tlsConn struct {
	*tls.Conn
	l *tlsListener

	once  sync.Once
	hsErr error
}

// Handshake does nothing: the handshake runs at the connection's first
// read or write (see handshake). fasthttp calls Handshake first thing on a
// connection that has it, under a read deadline of header_timeout, and
// then arms header_timeout again for the first request's header, so a
// handshake run here would give a client the handshake's time over and
// above the header's: a TLS client that dawdled through its handshake
// for 9.9 s had another 10 s for its header. Run at the first read, the
// handshake and the first header share one header_timeout, armed when
// the connection opens, as docs/policy.md says. (Handshake must exist:
// fasthttp's RequestCtx.IsTLS and TLSConnectionState look for it.)
func (c *tlsConn) Handshake() error { return nil }

// Read completes the handshake first (see handshake), then reads.
func (c *tlsConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// Write completes the handshake first (see handshake), then writes.
func (c *tlsConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// handshake runs the TLS handshake once, within the listener's timeout
// (on expiry the connection is closed, so a silent client holds its
// goroutine no longer), and counts a failure by reason. A failure costs
// the connection, a counter and a debug log line: scanners knock all day,
// and an info line per knock would drown the log.
func (c *tlsConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(c.l.ctx, c.l.timeout)
		defer cancel()
		c.l.s.listenerTLS.handshaking.Add(1)
		err := c.Conn.HandshakeContext(ctx)
		c.l.s.listenerTLS.handshaking.Add(-1)
		if err == nil {
			return
		}
		c.hsErr = err
		if c.l.ctx.Err() != nil {
			return // the server is shutting down: not the client's failure
		}
		r := handshakeReason(err)
		c.l.s.listenerTLS.errs[r].Inc()
		c.l.s.log.Debug("tls handshake failed", "reason", hsReasonNames[r], "error", err.Error())
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			// As net/http does: a person who typed http:// learns why.
			_ = re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			_ = re.Conn.Close()
		}
	})
	return c.hsErr
}

// handshakeReason classifies a failed handshake into one of the fixed
// reasons. crypto/tls reports a version the server does not take only in
// its error text ("client offered only unsupported versions"), hence the
// string match; TestScannerHandshakes pins every reason.
func handshakeReason(err error) int {
	var re tls.RecordHeaderError
	var ne net.Error
	switch {
	case errors.As(err, &re):
		return hsNotTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return hsTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return hsClosed
	case strings.Contains(err.Error(), "unsupported versions"), strings.Contains(err.Error(), "protocol version"):
		return hsVersion
	}
	return hsOther
}

// looksLikeHTTP reports whether a record header is the start of a plain
// HTTP request (as net/http's tlsRecordHeaderLooksLikeHTTP).
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE":
		return true
	}
	return false
}
