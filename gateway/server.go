package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/gateway/ext"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
)

// Server limits (docs/architecture.md, "A request's path", step 1). Headers
// past ReadBufferSize answer 431 and bodies past the policy's max_body_bytes
// answer 413. The public listener's read deadlines and connection caps are
// the policy's (node.Conns: header_timeout, body_timeout, max_conns and
// the per-client caps; conns.go), and the TLS handshake is part of
// header_timeout (tls.go); readTimeout is the admin listener's.
const (
	readTimeout     = 10 * time.Second
	writeTimeout    = 10 * time.Second
	idleTimeout     = 60 * time.Second
	readBufferSize  = 8 << 10 // bytes: the cap on a request's header
	maxUpstreamBody = 8 << 20 // bytes
)

// Options configures a Server. Policy and Store are required; the zero value
// of the rest works.
type Options struct {
	// Policy is the policy to serve; Reload swaps it later.
	Policy *rules.Policy
	// Store holds the counters; the Server does not close it.
	Store rules.Store
	// KeySecret keys the hash of counter keys (empty: random).
	KeySecret []byte
	// PreviousKeySecret, when set, is the key secret before KeySecret,
	// read in a key-secret rotation window (rules.KeyFormats.RotateUntil,
	// set on the Engine; docs/operations.md, "Rotating the key secret").
	PreviousKeySecret []byte
	// DryRun starts the node in dry-run (the -dry-run flag).
	DryRun bool
	// Listen and AdminListen override the policy's listeners.
	Listen, AdminListen string
	// Upstream overrides the policy's upstream ("http://HOST:PORT" or
	// "https://HOST:PORT"; an https:// one takes the policy's
	// upstream_tls, if any).
	Upstream string
	// Logger receives JSON logs (default: discard).
	Logger *slog.Logger
	// Registry receives the metrics (default: a new registry).
	Registry *prometheus.Registry
	// Health, when set, tells /readyz whether the store is degraded (a
	// failclosed.Store does).
	Health Health
	// Collectors are more metrics the node exports with its own: its
	// store's (a failure-handling store's counters and breaker,
	// nodestore.StoreMetrics; a Redis store's client counters,
	// nodestore.RedisMetrics).
	Collectors []prometheus.Collector
	// Fleet, when set, is the store under Store that the fleet's nodes
	// share (a Redis store): the admin API's dry-run toggles and forgive's
	// exemptions are then fleet-wide (admin_dryrun.go).
	Fleet Fleet
	// AdminToken is the admin API's bearer token ($EDGE_ADMIN_TOKEN);
	// empty turns its mutating endpoints off (docs/operations.md).
	AdminToken string
	// Clock replaces the request time (fasthttp's ctx.Time()) for tests
	// that script time; nil in production.
	Clock rules.Clock
	// RetryJitterRand replaces the random source of retry_after_jitter
	// (tests): one uniform 64-bit draw per informative refusal, called
	// concurrently. nil: math/rand/v2's runtime source (retry_jitter.go).
	RetryJitterRand func() uint64
	// QueueAfter replaces the timer a queue = true rule's held request
	// waits on (tests release holds in their own order): it returns a
	// channel that delivers once the delay is over. nil: pooled timers
	// (queue.go).
	QueueAfter func(delay time.Duration) <-chan time.Time
	// QueueMaxHeld is the most requests the node holds in queues at once
	// (0: DefaultQueueMaxHeld); beyond it a request a queue admits is
	// answered 503.
	QueueMaxHeld int
	// Reload, when set, reloads the node's policy file for POST
	// /admin/reload (cmd/edge's one reload path, which SIGHUP and a change
	// of the file also take); nil answers 501 (docs/operations.md, "Reload").
	Reload func() ReloadResult
	// Observe, when set, is called with each decision and the rules that
	// matched, on the request's goroutine, before the edge answers; both
	// are the request's pooled memory, not to be kept past the call. For
	// `edge test` (policytest); nil in production.
	Observe func(d *rules.Decision, matches []rules.Match)
	// Extensions are the HTTP halves of the features (package gateway/ext:
	// builtin.Extensions lists this build's), opened for every policy the
	// server installs, their hooks run in this order. One list per Server:
	// an extension may keep state across reloads. Without a feature's
	// extension, the gateway does nothing for it: a visitor block's cookie
	// is neither read nor minted (every client is cookieless), no
	// fingerprint is taken, no bot score reaches the origin. So the list
	// is required: New refuses a nil one, and a gateway meant to have none
	// says so with an empty, non-nil list.
	Extensions []ext.Extension
}

// Fleet is a store through which the nodes of a fleet share small hashes
// (rules/redisstore's SharedGetAll and SharedSet, under the store's
// prefix): name's fields and their values.
type Fleet interface {
	SharedGetAll(ctx context.Context, name string) (map[string]string, error)
	SharedSet(ctx context.Context, name, field, value string) error
}

// Health reports the store's state to /readyz (a failclosed.Store
// implements it).
type Health interface {
	// Degraded reports a store that does not answer (its breaker open),
	// with a human reason: each rule answers by its on_store_error, and
	// the node stays ready.
	Degraded() (degraded bool, reason string)
	// Refused reports a store that refuses this node (its credentials or
	// permissions: WRONGPASS, NOAUTH, NOPERM), with a human reason: a
	// configuration error, under which the node is not ready when it has
	// rules that fail closed (docs/operations.md, "Health and readiness").
	Refused() (refused bool, reason string)
}

// Server is an edge node: the public handler, the reverse proxy and the
// admin listener. It is safe for concurrent use.
type Server struct {
	state  atomic.Pointer[policyState]
	engine *rules.Engine
	log    *slog.Logger
	m      *metrics
	reg    *prometheus.Registry
	pool   sync.Pool // *reqState
	clock  rules.Clock
	health Health
	fleet  *fleetDryRuns // nil without Redis (admin_dryrun.go)
	synced atomic.Bool   // the fleet's toggles are being polled

	jitterRand func() uint64 // Options.RetryJitterRand (retry_jitter.go)

	queueAfter   func(time.Duration) <-chan time.Time // Options.QueueAfter (queue.go)
	queueMaxHeld int64
	queueHeld    atomic.Int64

	// shedLogAt is the Unix second of the last "shed" log line, and
	// shedLogSkipped the sheds since then it did not log (shed.go).
	shedLogAt      atomic.Int64
	shedLogSkipped atomic.Int64

	observeHook func(d *rules.Decision, matches []rules.Match)
	reload      func() ReloadResult

	listen, adminListen string
	adminToken          []byte // SHA-256 of Options.AdminToken; nil without one

	ext extensions // Options.Extensions (extensions.go)

	metricsOnce sync.Once
	metricsH    fasthttp.RequestHandler

	allowsSeen atomic.Uint64  // allowed requests, for the log's sampling (sampleAllow)
	refused    refusedTracker // the top refused keys per rule (refused.go)

	listenerTLS listenerTLS // the public listener's certificate and handshake counters (tls.go)

	conns         connCounts    // the public listener's connections (conns.go)
	decideConns   connCounts    // the decision-only listener's
	adminConns    connCounts    // the admin listener's (adminMaxConns)
	headerTimeout time.Duration // header_timeout of the policy New got (HeaderTimeout)
	// writeTimeout is the public listener's fasthttp WriteTimeout:
	// writeTimeout, or shorter in tests (set before Serve).
	writeTimeout time.Duration

	upstreamMu sync.Mutex
	upstream   *upstreamClient // the installed policy's origin client (upstream.go)
	upOverride string
}

// policyState is a policy with what the server precomputes for it.
type policyState struct {
	policy   *rules.Policy
	upstream *fasthttp.HostClient              // origin.hc
	origin   *upstreamClient                   // the client and its health (upstream.go)
	counters [][numOutcomes]prometheus.Counter // per rule, per outcome
	routes   routeCounters                     // edge_http_responses_total, per route and status class
	hooks    policyHooks                       // its extensions' instances (extensions.go)
	names    []rateLimitName                   // its rules' RateLimit names, by Rule.Index (respond.go)
	// upstreamHost and upstreamAuthority are the upstream's address in
	// rules.AppendHost's forms: the host of an HTTP/1.0 request without
	// one (requestHost).
	upstreamHost, upstreamAuthority []byte
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	if opts.Policy == nil {
		return nil, errors.New("gateway: no policy")
	}
	if err := checkExtensions(opts.Extensions); err != nil {
		return nil, err
	}
	var timed *timedStore // the Engine's store, timed (edge_store_call_duration_seconds)
	if opts.Store != nil {
		timed = newTimedStore(opts.Store)
	}
	eng, err := rules.NewEngine(rules.EngineOptions{Store: storeOf(timed), Secret: opts.KeySecret, PreviousSecret: opts.PreviousKeySecret, DryRun: opts.DryRun})
	if err != nil {
		return nil, fmt.Errorf("creating engine: %w", err)
	}
	s := &Server{
		engine:      eng,
		log:         opts.Logger,
		reg:         opts.Registry,
		listen:      opts.Listen,
		adminListen: opts.AdminListen,
		upOverride:  opts.Upstream,
		clock:       opts.Clock,
		jitterRand:  opts.RetryJitterRand,
		queueAfter:  opts.QueueAfter,
		observeHook: opts.Observe,
		reload:      opts.Reload,
		health:      opts.Health,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.queueMaxHeld = int64(cmp.Or(opts.QueueMaxHeld, DefaultQueueMaxHeld))
	if opts.Fleet != nil {
		s.fleet = &fleetDryRuns{rs: opts.Fleet}
	}
	if opts.AdminToken != "" {
		sum := sha256.Sum256([]byte(opts.AdminToken))
		s.adminToken = sum[:]
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.m = newMetrics(s.reg, s)
	s.ext = newExtensions(opts.Extensions, s.reg)
	registerConns(s.reg, s)
	if timed != nil {
		s.reg.MustRegister(timed.vec)
	}
	s.reg.MustRegister(opts.Collectors...)
	if kb, ok := opts.Store.(KeyBudgets); ok {
		s.reg.MustRegister(newBudgetCollector(s, kb))
	}
	s.pool.New = func() any { return newReqState() }
	s.headerTimeout = cmp.Or(nodecfg.Of(opts.Policy).Conns.HeaderTimeout, nodecfg.DefaultHeaderTimeout)
	s.writeTimeout = writeTimeout
	if err := s.install(opts.Policy); err != nil {
		return nil, err
	}
	return s, nil
}

// Policy returns the policy being served.
func (s *Server) Policy() *rules.Policy { return s.state.Load().policy }

// Engine returns the server's engine.
func (s *Server) Engine() *rules.Engine { return s.engine }

// Reload swaps in p. Requests in flight finish on the old policy.
func (s *Server) Reload(p *rules.Policy) error { return s.install(p) }

func (s *Server) install(p *rules.Policy) error {
	up := nodecfg.Of(p).Upstream
	if s.upOverride != "" {
		up = s.upOverride
	}
	uc, err := s.hostClient(p, up)
	if err != nil {
		return err
	}
	hc := uc.hc
	st := &policyState{policy: p, upstream: hc, origin: uc, counters: make([][numOutcomes]prometheus.Counter, len(p.Rules)), routes: s.m.routeHandles(p), names: rateLimitNames(p)}
	var ok bool
	if st.upstreamAuthority, st.upstreamHost, ok = route.AppendHost(nil, nil, []byte(hc.Addr)); !ok {
		return fmt.Errorf("gateway: upstream address %q is not HOST:PORT", hc.Addr)
	}
	if st.hooks, err = s.openExtensions(p); err != nil {
		return err
	}
	for i, r := range p.Rules {
		for o := range numOutcomes {
			name := metricOutcome(rules.Outcome(o))
			if name == "" {
				continue
			}
			st.counters[i][o] = s.m.decisions.WithLabelValues(r.Name, name)
		}
	}
	s.listenerTLS.install(p, s.log) // the next handshakes serve p's certificate (tls.go)
	s.state.Store(st)
	s.useUpstream(uc)
	return nil
}

// ListenAddr is the public listener address in use (flag or policy).
func (s *Server) ListenAddr() string {
	if s.listen != "" {
		return s.listen
	}
	return nodecfg.Of(s.Policy()).Listen
}

// AdminAddr is the admin listener address in use (flag or policy).
func (s *Server) AdminAddr() string {
	if s.adminListen != "" {
		return s.adminListen
	}
	return nodecfg.Of(s.Policy()).AdminListen
}

// HeaderTimeout is the public listener's header deadline: header_timeout
// of the policy the node started with (New's). It is fasthttp's
// ReadTimeout, fixed when the server is made, so a reload that changes it
// takes effect at the next restart (cmd/edge names it in the reload's
// warnings).
func (s *Server) HeaderTimeout() time.Duration { return s.headerTimeout }

// NewHTTPServer returns the fasthttp server for the public handler, with
// the timeouts and size caps above (writeTimeout, readBufferSize, …) and
// the policy's read deadlines: HeaderTimeout is fasthttp's ReadTimeout,
// armed when the connection opens (its first request) or at a request's
// first byte (the next ones); body_timeout is armed once a header
// announcing a body is read (headerReceived). Its connection cap
// (Concurrency) is past max_conns, which Serve's listener enforces with the
// edge's own answers (conns.go).
func (s *Server) NewHTTPServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                       s.Handler,
		ErrorHandler:                  s.errorHandler,
		HeaderReceived:                s.headerReceived,
		Logger:                        quietLogger{s.log},
		Name:                          "",
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		ReadTimeout:                   s.headerTimeout,
		WriteTimeout:                  s.writeTimeout,
		IdleTimeout:                   idleTimeout,
		ReadBufferSize:                readBufferSize,
		MaxRequestBodySize:            nodecfg.Of(s.Policy()).MaxBodyBytes,
		Concurrency:                   fasthttpConcurrency,
		DisablePreParseMultipartForm:  true,
		DisableHeaderNamesNormalizing: false,
		ReduceMemoryUsage:             false,
		CloseOnShutdown:               true,
		StreamRequestBody:             false,
	}
}

// quietLogger receives fasthttp's own messages. They quote the raw request
// (credentials, cookies, the client's address), so only the format string
// is logged, at debug: never the request.
type quietLogger struct{ log *slog.Logger }

func (q quietLogger) Printf(format string, _ ...any) {
	if q.log.Enabled(context.Background(), slog.LevelDebug) {
		q.log.Debug("http server", "event", format)
	}
}

// headerReceived arms the body deadline of a request whose header is
// read: body_timeout of the policy in force from now, when the header
// announces a body (a Content-Length over 0, or chunked: fasthttp's -1); a
// request without one (0, or -2: no Content-Length, which a request reads
// as no body, RFC 9112 §6.3) keeps the header deadline, which has nothing
// left to bound, and costs no deadline of its own.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if cl := h.ContentLength(); cl <= 0 && cl != -1 {
		return fasthttp.RequestConfig{}
	}
	return fasthttp.RequestConfig{ReadTimeout: cmp.Or(nodecfg.Of(s.state.Load().policy).Conns.BodyTimeout, nodecfg.DefaultBodyTimeout)}
}

// errorHandler is the public listener's: errorHandler's answer, a 408
// (a header or body past its deadline) counted.
func (s *Server) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	errorHandler(ctx, err)
	if ctx.Response.StatusCode() == fasthttp.StatusRequestTimeout {
		s.m.timeouts.Inc()
	}
}

// errorAnswerTimeout bounds the write of errorHandler's answer, from the
// moment it is given: a fresh deadline, since the one in force may have
// passed. fasthttp arms a connection's write deadline (WriteTimeout) when
// a TLS connection opens and before each response, and never again
// before the answer to a request it could not read, so a 408 at
// header_timeout on a TLS connection (the write deadline armed when it
// opened, 10 s: as long as the header's), at body_timeout (30 s, past
// it), or on a kept-alive connection whose last answer was written more
// than 10 s before, was written under an expired deadline and never
// reached the client, which saw the connection close with no answer. A
// second is a few round trips of the slowest link for an answer of under
// 200 bytes, which the socket's send buffer takes at once.
const errorAnswerTimeout = time.Second

// errorHandler answers requests fasthttp could not read: 431 for an
// oversized header, 413 for an oversized body, 408 on a read timeout, 400
// otherwise, under a fresh write deadline (errorAnswerTimeout). Never a
// 500, and never fasthttp's own text.
func errorHandler(ctx *fasthttp.RequestCtx, err error) {
	// An in-memory or test connection may refuse a deadline: the answer
	// is written all the same.
	_ = ctx.SetWriteDeadline(time.Now().Add(errorAnswerTimeout))
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &small):
		plain(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		plain(ctx, fasthttp.StatusRequestEntityTooLarge)
	case errors.As(err, &netErr) && netErr.Timeout():
		plain(ctx, fasthttp.StatusRequestTimeout)
	default:
		plain(ctx, fasthttp.StatusBadRequest)
	}
}

// Serve runs the public server on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.fleet != nil && s.synced.CompareAndSwap(false, true) {
		// The fleet's dry-run toggles are polled while the node serves.
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.syncDryRuns(pctx) }()
		defer func() { cancel(); <-done }()
	}
	// The caps count TCP connections, under TLS: a refused one costs no
	// handshake.
	return serveUntil(ctx, s.NewHTTPServer(), s.wrapTLS(s.limitConns(ln, &s.conns, true, !s.ServesTLS())))
}

// The admin listener's own budgets (docs/deploying.md, "The admin
// listener"): it is loopback by default and its API needs the token, but
// a listener anyone can reach must not be one a slowloris fills, nor one
// that holds a megabyte per half-sent body.
const (
	// adminMaxConns is the admin listener's open connections; one more is
	// answered the edge's 503 and closed. An operator's browser (6), the
	// CLI, a Prometheus or two and a health checker need a dozen.
	adminMaxConns = 64
	// adminReadTimeout bounds the reading of an admin request, header and
	// body together, from its first byte (from the connection's opening
	// for its first request); past it, the edge's 408 and a close.
	adminReadTimeout = readTimeout
	// adminMaxBody is the admin listener's body cap: the largest body an
	// admin endpoint takes, maxAdminBody (64 KiB of JSON: explain, the
	// dry-run toggles, forgive; POST /admin/reload takes none). A larger
	// Content-Length is answered 413 before a byte of the body is read.
	adminMaxBody = maxAdminBody
)

// ServeAdmin runs the admin server on ln until ctx is done, within the
// admin listener's own budgets (adminMaxConns, adminReadTimeout,
// adminMaxBody).
func (s *Server) ServeAdmin(ctx context.Context, ln net.Listener) error {
	srv := &fasthttp.Server{
		Handler:               s.AdminHandler,
		ErrorHandler:          errorHandler,       // the edge's answers here too, never fasthttp's text
		Logger:                quietLogger{s.log}, // never the raw request: an admin request carries the bearer token
		NoDefaultServerHeader: true,
		ReadTimeout:           adminReadTimeout,
		WriteTimeout:          writeTimeout,
		IdleTimeout:           idleTimeout,
		ReadBufferSize:        readBufferSize,
		MaxRequestBodySize:    adminMaxBody,
		Concurrency:           2 * adminMaxConns, // past the listener's cap, which answers first (conns.go)
		CloseOnShutdown:       true,
	}
	return serveUntil(ctx, srv, s.limitAdminConns(ln))
}

// serveUntil serves ln and, when ctx is done, drains the server (drain.go:
// stop accepting, Connection: close on the requests still coming, then
// close what is idle) and shuts it down.
func serveUntil(ctx context.Context, srv *fasthttp.Server, ln net.Listener) error {
	var d drainer
	d.install(srv)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return shutdownErr(d.drain(srv, ln, errc))
	}
}

// shutdownGrace is how long a server that is shutting down waits for its
// requests in flight.
const shutdownGrace = 5 * time.Second

// shutdownErr is what a shutdown's error means to the caller. A grace
// period that ran out is not one: fasthttp waits for every open connection,
// and one that was accepted but never sent a request (a load balancer's
// TCP check, a slowloris client) stays open until its read timeout, longer
// than the grace; the node stops waiting for it, as intended.
func shutdownErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
