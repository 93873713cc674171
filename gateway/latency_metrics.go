package gateway

import (
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/valyala/fasthttp"
)

// The fleet's metrics beside the rules' (docs/operations.md, "Metrics and
// alerts"): the Go runtime and the process (client_golang's collectors:
// go_* and process_*), what build the node runs (edge_build_info), and how
// long requests and the origin take (edge_request_duration_seconds,
// edge_upstream_duration_seconds). The histograms' label values are fixed
// lists here, never a request's path, address or key, and their handles
// are resolved at start: observing one allocates nothing.

// latencyBuckets are the request and origin histograms' buckets, in
// seconds: from 0.5ms (a decision answered from the memory store, a
// refusal) to 10s, rules.DefaultUpstreamTimeout, past which the origin's
// answer is a 504 (a longer upstream_timeout lands in +Inf).
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// malformedVerdict is edge_request_duration_seconds' verdict for a request
// refused with 400 before any rule (edge_malformed_requests_total).
const malformedVerdict = "malformed"

// upstreamAnsweredResult is edge_upstream_duration_seconds' result for a
// forwarded request the origin answered, whatever its status; the others
// are the reasons it did not (failReasonNames: timeout, connect, tls,
// error).
const upstreamAnsweredResult = "answered"

// noAnswerReasons are upstreamFailure's reasons: the origin did not answer.
var noAnswerReasons = [...]failReason{failTimeout, failConnect, failTLS, failOther}

// latency are the two histograms' handles.
type latency struct {
	// requests[v] is verdict v's (rules.Verdict, verdictNames), the last
	// malformedVerdict's.
	requests [len(verdictNames) + 1]prometheus.Observer
	// answered is a forwarded request's the origin answered; noAnswer[r]
	// one's it did not, by reason (nil for the status reasons: those are
	// answers).
	answered prometheus.Observer
	noAnswer [numFailReasons]prometheus.Observer
}

// registerRuntime registers the Go runtime's and the process's collectors
// and edge_build_info, and the latency histograms.
func (m *metrics) registerRuntime(reg *prometheus.Registry) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	version, revision, goVersion := buildInfo()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "edge_build_info",
		Help:        "1, labelled with the build the node runs: version (the module's, \"(devel)\" for a build in a checkout), revision (the VCS commit, \"-modified\" appended for a dirty tree; \"unknown\" without VCS information) and goversion (the Go toolchain).",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	})
	build.Set(1)

	requests := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "edge_request_duration_seconds",
		Help:    "Seconds from the request read to its answer ready (the origin's time and a queue's hold included; writing the answer out not), by verdict (forward, refuse_limit, refuse_forbidden, reject_missing_identity, reject_invalid_identity, unavailable, shed, malformed).",
		Buckets: latencyBuckets,
	}, []string{"verdict"})
	for i, n := range verdictNames {
		m.latency.requests[i] = requests.WithLabelValues(n)
	}
	m.latency.requests[len(verdictNames)] = requests.WithLabelValues(malformedVerdict)

	upstream := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "edge_upstream_duration_seconds",
		Help:    "Seconds each forwarded request spent at the origin (connection, request written, answer read), by result: answered (any status) or why it was not (timeout, connect, tls, error).",
		Buckets: latencyBuckets,
	}, []string{"result"})
	m.latency.answered = upstream.WithLabelValues(upstreamAnsweredResult)
	for _, r := range noAnswerReasons {
		m.latency.noAnswer[r] = upstream.WithLabelValues(failReasonNames[r])
	}
	reg.MustRegister(build, requests, upstream)
}

// buildInfo is the running binary's version, VCS revision and Go version
// (runtime/debug.ReadBuildInfo, as `edge version` prints them), "unknown"
// for what the binary does not record.
func buildInfo() (version, revision, goVersion string) {
	version, revision, goVersion = "unknown", "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, revision, goVersion
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				revision = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && revision != "unknown" {
		revision += "-modified"
	}
	return version, revision, goVersion
}

// observeRequest observes the request ctx answers, from its read
// (fasthttp's ctx.Time(), the real clock's even under a test clock) to
// now, under verdict v (len(verdictNames): malformed).
func (m *metrics) observeRequest(ctx *fasthttp.RequestCtx, v int) {
	start := ctx.Time()
	if start.IsZero() || v < 0 || v >= len(m.latency.requests) {
		return
	}
	m.latency.requests[v].Observe(time.Since(start).Seconds())
}

// observeUpstream observes one forwarded request's time at the origin:
// answered, or not for reason r.
func (m *metrics) observeUpstream(took time.Duration, answered bool, r failReason) {
	o := m.latency.answered
	if !answered {
		o = m.latency.noAnswer[r]
	}
	if o != nil {
		o.Observe(took.Seconds())
	}
}
