package gateway

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Passive health of the origin (docs/deploying.md, "The origin over HTTPS,
// and its health"): every forwarded request is a probe. A failure is an
// answer 502, 503 or 504, or no answer (timeout, connect, tls, error:
// upstreamFailure). The origin is unhealthy after unhealthyAfter failures
// in a row and healthy again at its first answer that is not a failure.
// Nothing is refused or rerouted for it: the edge has one origin. It is
// reported on /readyz (without failing strict readiness: admin.go) and in
// edge_upstream_healthy, edge_upstream_consecutive_failures and
// edge_upstream_failures_total{reason}.

// unhealthyAfter is how many failures in a row make the origin unhealthy.
// Five: one or two failures are an origin's ordinary bad moment (a deploy,
// one slow query); five requests in a row, with no success between them
// from any client, is an origin that is down or overloaded.
const unhealthyAfter = 5

// failReason is a failure's kind: edge_upstream_failures_total's reason.
type failReason uint8

const (
	failStatus502 failReason = iota
	failStatus503
	failStatus504
	failTimeout
	failConnect
	failTLS
	failOther
	numFailReasons
)

var failReasonNames = [numFailReasons]string{
	failStatus502: "status_502",
	failStatus503: "status_503",
	failStatus504: "status_504",
	failTimeout:   "timeout",
	failConnect:   "connect",
	failTLS:       "tls",
	failOther:     "error",
}

// statusFailure reports whether an origin's status is a failure, and its
// reason: 502, 503 and 504 say the origin (or a proxy in front of it)
// cannot serve; every other status, 500 included, is the application's
// answer.
func statusFailure(status int) (failReason, bool) {
	switch status {
	case 502:
		return failStatus502, true
	case 503:
		return failStatus503, true
	case 504:
		return failStatus504, true
	}
	return 0, false
}

// upstreamHealth is one origin client's passive health, lock-free: an
// answer that is not a failure, the usual case, costs one atomic load.
// Times are the caller's (time.Now in production, a test's clock in
// tests): it reads no clock of its own.
type upstreamHealth struct {
	consecutive    atomic.Int64  // failures since the last success
	lastFailure    atomic.Int64  // Unix nanoseconds; 0: none yet
	lastReason     atomic.Uint32 // failReason of the last failure
	unhealthySince atomic.Int64  // Unix nanoseconds of the failure that made it unhealthy
}

// failed records a failure at now. turned is true for the failure that
// made the origin unhealthy (the unhealthyAfter-th in a row), once per
// spell.
func (h *upstreamHealth) failed(now time.Time, r failReason) (turned bool) {
	h.lastReason.Store(uint32(r))
	h.lastFailure.Store(now.UnixNano())
	if h.consecutive.Add(1) == unhealthyAfter {
		h.unhealthySince.Store(now.UnixNano())
		return true
	}
	return false
}

// answered records an answer that is not a failure. recovered is true
// when it ended an unhealthy spell, after failures failures in a row.
func (h *upstreamHealth) answered() (recovered bool, failures int64) {
	if h.consecutive.Load() == 0 {
		return false, 0
	}
	n := h.consecutive.Swap(0)
	return n >= unhealthyAfter, n
}

// healthy reports whether fewer than unhealthyAfter failures are in a row.
func (h *upstreamHealth) healthy() bool { return h.consecutive.Load() < unhealthyAfter }

// upstreamStatus is /readyz's "upstream" field. Times are RFC 3339 in
// UTC (rfc3339).
type upstreamStatus struct {
	Healthy             bool   `json:"healthy"`
	ConsecutiveFailures int64  `json:"consecutive_failures"`
	UnhealthyAfter      int    `json:"unhealthy_after"`
	LastFailure         string `json:"last_failure,omitempty"`
	LastFailureReason   string `json:"last_failure_reason,omitempty"`
	UnhealthySince      string `json:"unhealthy_since,omitempty"`
}

func (h *upstreamHealth) status() upstreamStatus {
	n := h.consecutive.Load()
	st := upstreamStatus{Healthy: n < unhealthyAfter, ConsecutiveFailures: n, UnhealthyAfter: unhealthyAfter}
	if t := h.lastFailure.Load(); t != 0 {
		st.LastFailure = rfc3339(time.Unix(0, t))
		st.LastFailureReason = failReasonNames[failReason(h.lastReason.Load())%numFailReasons]
	}
	if !st.Healthy {
		if t := h.unhealthySince.Load(); t != 0 {
			st.UnhealthySince = rfc3339(time.Unix(0, t))
		}
	}
	return st
}

// upstreamFailed counts a failure of the installed origin client: the
// metric, the health, and a warning when it turns the origin unhealthy
// (one line per spell, not one per request: a dead origin behind a busy
// edge would write thousands a second); each failure is logged at debug.
// err is nil for a 502, 503 or 504 answer.
func (s *Server) upstreamFailed(uc *upstreamClient, r failReason, err error) {
	s.m.upstreamFailures[r].Inc()
	if uc.health.failed(s.now(), r) {
		attrs := []slog.Attr{slog.String("reason", failReasonNames[r]), slog.Int("consecutive_failures", unhealthyAfter)}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "upstream unhealthy", attrs...)
	} else if s.log.Enabled(context.Background(), slog.LevelDebug) {
		attrs := []slog.Attr{slog.String("reason", failReasonNames[r])}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		s.log.LogAttrs(context.Background(), slog.LevelDebug, "upstream failed", attrs...)
	}
}

// upstreamAnswered records the origin's answer status: a 502, 503 or 504
// is a failure, anything else a success.
func (s *Server) upstreamAnswered(uc *upstreamClient, status int) {
	if r, ok := statusFailure(status); ok {
		s.upstreamFailed(uc, r, nil)
		return
	}
	if recovered, n := uc.health.answered(); recovered {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "upstream healthy again", slog.Int64("failures", n))
	}
}

// upstreamStatus is the installed origin client's health, for /readyz.
func (s *Server) upstreamStatus() upstreamStatus {
	return s.state.Load().origin.health.status()
}

// registerUpstream registers the origin's metrics; the reasons' handles
// are resolved here, once.
func (m *metrics) registerUpstream(reg *prometheus.Registry, s *Server) {
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_upstream_failures_total",
		Help: "Forwarded requests the origin failed, by reason: status_502, status_503, status_504 (its answer), timeout, connect, tls, error (no answer).",
	}, []string{"reason"})
	for r, name := range failReasonNames {
		m.upstreamFailures[r] = failures.WithLabelValues(name)
	}
	origin := func() *upstreamHealth {
		if st := s.state.Load(); st != nil && st.origin != nil {
			return st.origin.health
		}
		return nil
	}
	reg.MustRegister(failures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_upstream_healthy",
			Help: "1 while the origin is healthy, 0 after 5 failures in a row (502, 503, 504, no answer) until its next other answer.",
		}, func() float64 {
			if h := origin(); h != nil && !h.healthy() {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_upstream_consecutive_failures",
			Help: "Failures of the origin since its last answer that was not one.",
		}, func() float64 {
			if h := origin(); h != nil {
				return float64(h.consecutive.Load())
			}
			return 0
		}),
	)
}
