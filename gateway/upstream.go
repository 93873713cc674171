package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// The client to the origin: http:// or https:// with the policy's
// upstream_tls (docs/deploying.md, "The origin over HTTPS, and its
// health"). Its passive health is upstream_health.go.

// upstreamClient is the origin's HostClient and its health. A reload that
// changes nothing about the origin keeps it, with its pooled connections.
type upstreamClient struct {
	key    upstreamKey
	hc     *fasthttp.HostClient
	health *upstreamHealth
}

// upstreamKey is what a client is built from: two equal keys, one client.
// tls is the upstream_tls block's digest (its files' contents, not their
// names), so a reload that rewrote a CA or a client certificate in place
// builds a new client.
type upstreamKey struct {
	scheme, authority string
	tls               [32]byte
	timeout           time.Duration
}

// hostClient returns the client for upstream ("http://HOST:PORT" or
// "https://HOST:PORT", checked by node.ParseUpstream, as the compiler
// checks the policy's: the -upstream flag bypasses the compiler) with p's
// upstream_tls and upstream_timeout. It is the installed client when the
// key is unchanged, else a new one (useUpstream installs it). The -upstream
// flag carries no TLS settings: an https:// flag takes the policy's
// upstream_tls, if any, else the system's CA pool; an http:// flag ignores
// the block.
func (s *Server) hostClient(p *rules.Policy, upstream string) (*upstreamClient, error) {
	scheme, authority, err := nodecfg.ParseUpstream(upstream)
	if err != nil {
		return nil, fmt.Errorf("gateway: upstream: %w", err)
	}
	key := upstreamKey{scheme: scheme, authority: authority, timeout: p.UpstreamTimeout}
	if key.timeout <= 0 {
		key.timeout = rules.DefaultUpstreamTimeout
	}
	var ut *nodecfg.UpstreamTLS
	if scheme == "https" {
		ut = nodecfg.Of(p).UpstreamTLS
		if ut != nil {
			key.tls = ut.Digest
		}
	}
	s.upstreamMu.Lock()
	defer s.upstreamMu.Unlock()
	if cur := s.upstream; cur != nil && cur.key == key {
		return cur, nil
	}
	hc := &fasthttp.HostClient{
		// The authority as written: fasthttp adds :80 or :443 to dial, and
		// an HTTP/1.0 request without Host is forwarded under this Host
		// (requestHost).
		Addr:                          authority,
		ReadTimeout:                   key.timeout,
		WriteTimeout:                  key.timeout,
		MaxResponseBodySize:           maxUpstreamBody,
		MaxConns:                      4096,
		MaxIdleConnDuration:           30 * time.Second,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: false,
		RetryIfErr:                    retryUpstream,
		Transport:                     upstreamTransport{},
	}
	var cfg *tls.Config
	if scheme == "https" {
		hc.IsTLS = true
		cfg = upstreamTLSConfig(authority, ut)
		// The dialer below does the handshake with cfg (fasthttp then
		// leaves the connection as it is); TLSConfig only documents it.
		hc.TLSConfig = cfg
	}
	hc.DialTimeout = upstreamDialer(cfg, key.timeout)
	return &upstreamClient{key: key, hc: hc, health: &upstreamHealth{}}, nil
}

// upstreamDialer dials the origin: TCP within connectTimeout (or the
// upstream timeout, if shorter), then for https the TLS handshake within
// the upstream timeout. Its TLS connections remember a TLS alert read after
// the handshake (upstreamTransport).
func upstreamDialer(cfg *tls.Config, timeout time.Duration) fasthttp.DialFuncWithTimeout {
	connect := min(connectTimeout, timeout)
	return func(addr string, _ time.Duration) (net.Conn, error) {
		raw, err := fasthttp.DialTimeout(fasthttp.AddMissingPort(addr, cfg != nil), connect)
		if err != nil || cfg == nil {
			return raw, err
		}
		tc := tls.Client(raw, cfg)
		if err := tc.SetDeadline(time.Now().Add(timeout)); err != nil {
			raw.Close()
			return nil, err
		}
		if err := tc.Handshake(); err != nil {
			raw.Close()
			if isTimeout(err) {
				return nil, fasthttp.ErrTLSHandshakeTimeout
			}
			return nil, err
		}
		if err := tc.SetDeadline(time.Time{}); err != nil {
			raw.Close()
			return nil, err
		}
		c := &upstreamTLSConn{Conn: tc}
		c.raddr = upstreamAddr{Addr: tc.RemoteAddr(), conn: c}
		return c, nil
	}
}

// connectTimeout bounds the TCP connect to the origin: fasthttp's default
// dial timeout.
const connectTimeout = fasthttp.DefaultDialTimeout

// upstreamTLSConn is a TLS connection to the origin that keeps the TLS
// alert, if any, that ended a read. An origin that refuses the edge's
// client certificate (or its lack of one) does so after a TLS 1.3 client
// has finished its handshake and sent the request: the alert comes as the
// answer, and fasthttp reports any error on a response's first byte as
// "connection closed", which would hide it.
type upstreamTLSConn struct {
	*tls.Conn
	raddr upstreamAddr
	alert atomic.Pointer[error]
}

func (c *upstreamTLSConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && upstreamFailure(err) == failTLS {
		c.alert.CompareAndSwap(nil, &err)
	}
	return n, err
}

// RemoteAddr is how upstreamTransport finds the connection a response was
// read from: fasthttp records it in the response (Response.RemoteAddr).
func (c *upstreamTLSConn) RemoteAddr() net.Addr { return c.raddr }

// upstreamAddr is the origin's address, carrying its connection.
type upstreamAddr struct {
	net.Addr
	conn *upstreamTLSConn
}

// upstreamTransport is fasthttp's transport, except that a request whose
// connection ended in a TLS alert fails with that alert, and is not sent
// again (the origin refused the edge; it would again).
type upstreamTransport struct{}

func (upstreamTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (retry bool, err error) {
	retry, err = fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
	if err != nil {
		if a, ok := resp.RemoteAddr().(upstreamAddr); ok && a.conn != nil {
			if alert := a.conn.alert.Load(); alert != nil {
				return false, *alert
			}
		}
	}
	return retry, err
}

// useUpstream records uc as the installed policy's client. The client it
// replaces closes its idle connections now; those in use by requests still
// running on the old policy close when idle, within MaxIdleConnDuration.
func (s *Server) useUpstream(uc *upstreamClient) {
	s.upstreamMu.Lock()
	old := s.upstream
	s.upstream = uc
	s.upstreamMu.Unlock()
	if old != nil && old != uc {
		old.hc.CloseIdleConnections()
	}
}

// upstreamTLSConfig is the TLS client configuration for the origin at
// authority: TLS 1.2 at least, Go's default cipher suites, no ALPN (the
// edge speaks HTTP/1.1 to the origin), SNI and verified name the URL's
// host unless server_name says otherwise (an IP address is verified
// against the certificate's IP SANs and sent as no SNI, RFC 6066 §3).
func upstreamTLSConfig(authority string, ut *nodecfg.UpstreamTLS) *tls.Config {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         (&url.URL{Host: authority}).Hostname(),
		ClientSessionCache: tls.NewLRUClientSessionCache(64),
	}
	if ut == nil {
		return cfg // RootCAs nil: the system's pool
	}
	cfg.RootCAs = ut.RootCAs
	if ut.Certificate != nil {
		cfg.Certificates = []tls.Certificate{*ut.Certificate}
	}
	if ut.ServerName != "" {
		cfg.ServerName = ut.ServerName
	}
	return cfg
}

// retryUpstream decides whether fasthttp sends a request again after an
// error: only an idempotent one (GET, HEAD, PUT, QUERY, as fasthttp's
// default), and only when the connection was closed or reset under it, the
// race of a pooled keep-alive connection the origin closed as the edge
// reused it. Never after a timeout: the origin had the request for the
// whole upstream_timeout, and sending it again would hold the client up to
// five timeouts (fasthttp's MaxIdemponentCallAttempts) and load a slow
// origin five times over. Never after a TLS failure or a refused
// connection: the next attempt fails alike.
func retryUpstream(req *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	h := &req.Header
	if !h.IsGet() && !h.IsHead() && !h.IsPut() && !h.IsQuery() {
		return false, false
	}
	return false, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, fasthttp.ErrConnectionClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrTLSHandshakeTimeout) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// upstreamFailure names the failure of an origin that did not answer
// (edge_upstream_failures_total's reason): timeout (no answer within
// upstream_timeout, a TLS handshake that did not finish), connect (no TCP
// connection: refused, unreachable, the dial timed out), tls (the
// handshake failed: a certificate that does not verify, an origin that
// refused the edge's certificate or asked for one it lacks, an origin not
// speaking TLS) or error (anything else: a connection closed before the
// answer, a malformed or oversized answer).
func upstreamFailure(err error) failReason {
	var op *net.OpError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.Is(err, fasthttp.ErrDialTimeout):
		return failConnect
	case isTimeout(err):
		return failTimeout
	case errors.As(err, &verify), errors.As(err, &record), errors.As(err, &alert),
		errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return failTLS
	case errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error"):
		// crypto/tls reports alerts, the peer's and its own, as these.
		return failTLS
	case errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return failConnect
	}
	return failOther
}
