package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/demo"
)

// The adaptive scenario (README, "adaptive"; docs/policy.md, "Adaptive
// concurrency"): an open loop of GET /api/search at -adaptive-rate a second
// through the real edge running testdata/adaptive.hcl (an adaptive rule on
// that route), to a demo origin the scenario serves itself and whose
// latency on the route it sets (demo.Origin.SetLatency, the Go form of
// POST /__origin/latency): -adaptive-fast for a phase, -adaptive-slow for a
// phase, then -adaptive-fast for two. Every -adaptive-sample it reads the
// rule's limit and in-flight count from the edge's metrics
// (edge_adaptive_limit, edge_adaptive_in_flight) and the origin's own
// in-flight count and peak, and counts the answers: 200 (the origin's), 503
// (shed), anything else.
//
// It judges what does not rest on this machine's timing: no answer is 429
// (an adaptive limit sheds with 503: the system, not the caller), nothing
// but 200 and 503 comes back, and the slowdown, ten times the latency by
// default, lowers the limit (its value at the end of the slow phase below
// its value at the end of the first fast phase). The limit's path, the
// origin's in-flight count and the latencies are reported, never judged.

const (
	adaptivePath = "/api/search"     // testdata/adaptive.hcl's route
	adaptiveRule = "adaptive-search" // and its rule
	// adaptiveLimitMetric and adaptiveInFlightMetric are the rule's
	// gauges (gateway/adaptive_metrics.go).
	adaptiveLimitMetric    = "edge_adaptive_limit"
	adaptiveInFlightMetric = "edge_adaptive_in_flight"
	adaptiveMaxRate        = 5000
	adaptiveMaxLatency     = 5 * time.Second // below the policy's upstream_timeout
	adaptiveMaxInFlight    = 4096            // the scenario's own senders at once
)

// adaptiveParams are the adaptive scenario's flags.
type adaptiveParams struct {
	origin string        // the demo origin's listen address: the policy's upstream
	rate   int           // requests a second
	fast   time.Duration // the route's latency in the fast phases
	slow   time.Duration // and in the slow one
	phase  time.Duration // each phase's length (the last fast one is two)
	sample time.Duration // between two readings
}

var defaultAdaptiveParams = adaptiveParams{
	origin: "127.0.0.1:19011", rate: 300, fast: 20 * time.Millisecond, slow: 200 * time.Millisecond,
	phase: 10 * time.Second, sample: time.Second,
}

func (p *adaptiveParams) register(fs *flag.FlagSet) {
	fs.StringVar(&p.origin, "adaptive-origin", p.origin, "adaptive: listen address of the scenario's demo origin, the edge's upstream (loadtest/testdata/adaptive.hcl); loopback only")
	fs.IntVar(&p.rate, "adaptive-rate", p.rate, fmt.Sprintf("adaptive: requests a second, an open loop (at most %d)", adaptiveMaxRate))
	fs.DurationVar(&p.fast, "adaptive-fast", p.fast, "adaptive: the origin's latency on the route in the fast phases")
	fs.DurationVar(&p.slow, "adaptive-slow", p.slow, "adaptive: the origin's latency in the slow phase (more than -adaptive-fast)")
	fs.DurationVar(&p.phase, "adaptive-phase", p.phase, "adaptive: each phase's length: fast, slow, then fast for twice as long")
	fs.DurationVar(&p.sample, "adaptive-sample", p.sample, "adaptive: between two readings of the limit and the origin")
}

func (p *adaptiveParams) check() error {
	host, _, err := net.SplitHostPort(p.origin)
	switch {
	case err != nil || !isLoopback(host):
		return fmt.Errorf("-adaptive-origin %q: want a loopback host:port such as 127.0.0.1:19011", p.origin)
	case p.rate < 1 || p.rate > adaptiveMaxRate:
		return fmt.Errorf("-adaptive-rate must be in [1, %d], got %d", adaptiveMaxRate, p.rate)
	case p.fast < 0 || p.slow <= p.fast || p.slow > adaptiveMaxLatency:
		return fmt.Errorf("-adaptive-fast %v and -adaptive-slow %v: want 0 ≤ fast < slow ≤ %v", p.fast, p.slow, adaptiveMaxLatency)
	case p.sample < 10*time.Millisecond || p.sample > time.Minute:
		return fmt.Errorf("-adaptive-sample must be in [10ms, 1m], got %v", p.sample)
	case p.phase < p.sample || p.phase > time.Hour:
		return fmt.Errorf("-adaptive-phase must be in [-adaptive-sample, 1h], got %v", p.phase)
	}
	return nil
}

// total is the run's length: four phases.
func (p adaptiveParams) total() time.Duration { return 4 * p.phase }

// adaptiveBudget is the run's deadline: its phases and the answers' time.
func adaptiveBudget(cfg config) time.Duration {
	return cfg.adaptive.total() + 2*cfg.timeout + 10*time.Second
}

// adaptiveSample is one reading.
type adaptiveSample struct {
	at            time.Duration // since the start
	phase         int           // 0 fast, 1 slow, 2 fast again
	latency       time.Duration // the origin's latency setting then
	limit         int64         // edge_adaptive_limit
	edgeInFlight  int64         // edge_adaptive_in_flight
	originNow     int64         // the origin's in flight now
	originPeak    int64         // and its peak since the reading before
	ok, shed      int64         // answers 200 and 503 since the reading before
	refused       int64         // 429
	other, failed int64         // any other status; no answer (transport error, timeout)
	okRTT         time.Duration // the 200s' mean time, request to answer
	overrun       int64         // requests not sent: adaptiveMaxInFlight senders were busy
}

// adaptiveResult is one run's record.
type adaptiveResult struct {
	params  adaptiveParams
	samples []adaptiveSample
	sent    int64
	// otherCodes counts the answers neither 200, 503 nor 429, by status.
	otherCodes map[int]int64
}

// adaptiveTally counts answers between two readings.
type adaptiveTally struct {
	ok, shed, refused, other, failed, overrun atomic.Int64
	okNanos                                   atomic.Int64

	mu    sync.Mutex
	codes map[int]int64 // the other statuses, by code, over the run
}

func runAdaptive(ctx context.Context, cfg config) error {
	ln, err := net.Listen("tcp", cfg.adaptive.origin)
	if err != nil {
		return fmt.Errorf("adaptive: the demo origin: %w", err)
	}
	_, err = adaptiveRunOn(ctx, cfg, ln)
	return err
}

// adaptiveRunOn is runAdaptive on the origin's listener ln (closed on
// return): the run, its report on cfg.stdout and its judgement.
func adaptiveRunOn(ctx context.Context, cfg config, ln net.Listener) (*adaptiveResult, error) {
	r, err := adaptiveLoad(ctx, cfg, ln)
	if err != nil {
		return r, err
	}
	writeAdaptiveReport(cfg.stdout, cfg, r)
	return r, r.mismatch()
}

// adaptiveLoad serves the demo origin on ln and runs the phases.
func adaptiveLoad(ctx context.Context, cfg config, ln net.Listener) (*adaptiveResult, error) {
	defer ln.Close()
	p := cfg.adaptive
	if cfg.target.metrics.url == "" {
		return nil, errors.New("adaptive: give -target-metrics, the edge's admin /metrics (e.g. http://127.0.0.1:19901/metrics): the scenario reads edge_adaptive_limit from it")
	}
	origin := demo.New()
	octx, ocancel := context.WithCancel(context.Background())
	odone := make(chan struct{})
	go func() { defer close(odone); _ = origin.Serve(octx, ln) }()
	defer func() { ocancel(); <-odone }()
	origin.SetLatency(adaptivePath, p.fast)

	mc := &fasthttp.HostClient{
		Addr: cfg.target.metrics.addr, Name: "edge-loadtest", MaxConns: 1,
		ReadTimeout: cfg.timeout, WriteTimeout: cfg.timeout, MaxResponseBodySize: maxMetricsBody, DisablePathNormalizing: true,
	}
	defer mc.CloseIdleConnections()
	read := func() (limit, inFlight int64, err error) {
		limit, inFlight, err = adaptiveScrape(mc, cfg.target.metrics.url, cfg.timeout)
		if err != nil {
			err = fmt.Errorf("adaptive: scraping -target-metrics %s: %w", cfg.target.metrics.url, err)
		}
		return limit, inFlight, err
	}
	if _, _, err := read(); err != nil {
		return nil, err
	}

	hc := &fasthttp.HostClient{
		Addr: cfg.target.addr, Name: "edge-loadtest", MaxConns: adaptiveMaxInFlight,
		MaxIdemponentCallAttempts: 1, ReadTimeout: cfg.timeout, WriteTimeout: cfg.timeout, DisablePathNormalizing: true,
	}
	defer hc.CloseIdleConnections()
	tally := adaptiveTally{codes: map[int]int64{}}
	var senders sync.WaitGroup
	busy := make(chan struct{}, adaptiveMaxInFlight)
	send := func() {
		defer senders.Done()
		defer func() { <-busy }()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(cfg.target.base + adaptivePath)
		start := time.Now()
		err := hc.DoTimeout(req, resp, cfg.timeout)
		switch code := resp.StatusCode(); {
		case err != nil:
			tally.failed.Add(1)
		case code == fasthttp.StatusOK:
			tally.ok.Add(1)
			tally.okNanos.Add(int64(time.Since(start)))
		case code == fasthttp.StatusServiceUnavailable:
			tally.shed.Add(1)
		case code == fasthttp.StatusTooManyRequests:
			tally.refused.Add(1)
		default:
			tally.other.Add(1)
			tally.mu.Lock()
			tally.codes[code]++
			tally.mu.Unlock()
		}
	}

	r := &adaptiveResult{params: p}
	t0 := time.Now()
	end := t0.Add(p.total())
	phaseOf := func(d time.Duration) int { return min(int(d/p.phase), 2) }
	latencyOf := func(ph int) time.Duration {
		if ph == 1 {
			return p.slow
		}
		return p.fast
	}
	// The sampler and the phase changes, on their own goroutine.
	samplerDone := make(chan error, 1)
	go func() {
		phase := 0
		next := t0.Add(p.sample)
		for {
			if err := sleepUntil(ctx, next); err != nil {
				samplerDone <- err
				return
			}
			at := time.Since(t0)
			s := adaptiveSample{at: at, phase: phase, latency: latencyOf(phase)}
			rep := origin.InFlight()
			origin.ResetPeak()
			s.originNow, s.originPeak = rep.InFlight, rep.Peak
			var err error
			if s.limit, s.edgeInFlight, err = read(); err != nil {
				samplerDone <- err
				return
			}
			s.ok, s.shed, s.refused = tally.ok.Swap(0), tally.shed.Swap(0), tally.refused.Swap(0)
			s.other, s.failed, s.overrun = tally.other.Swap(0), tally.failed.Swap(0), tally.overrun.Swap(0)
			if n := tally.okNanos.Swap(0); s.ok > 0 {
				s.okRTT = time.Duration(n / s.ok)
			}
			r.samples = append(r.samples, s)
			if !next.Before(end) {
				samplerDone <- nil
				return
			}
			if ph := phaseOf(next.Sub(t0)); ph != phase {
				phase = ph
				origin.SetLatency(adaptivePath, latencyOf(ph))
			}
			next = next.Add(p.sample)
		}
	}()

	// The open loop: request k is due at t0 + k ÷ rate.
	interval := time.Second / time.Duration(p.rate)
	var sendErr error
	for k := int64(0); ; k++ {
		due := t0.Add(time.Duration(k) * interval)
		if !due.Before(end) || r.sent >= int64(cfg.requests) {
			break
		}
		if err := sleepUntil(ctx, due); err != nil {
			sendErr = err
			break
		}
		select {
		case busy <- struct{}{}:
			senders.Add(1)
			r.sent++
			go send()
		default:
			tally.overrun.Add(1)
		}
	}
	err := <-samplerDone
	senders.Wait()
	r.otherCodes = tally.codes
	if err == nil {
		err = sendErr
	}
	if err != nil {
		return r, err
	}
	return r, nil
}

// adaptiveScrape reads the rule's limit and in-flight count from an edge
// node's metrics page.
func adaptiveScrape(hc *fasthttp.HostClient, url string, timeout time.Duration) (limit, inFlight int64, err error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.Set(fasthttp.HeaderAccept, "text/plain;version=0.0.4")
	if err := hc.DoTimeout(req, resp, timeout); err != nil {
		return 0, 0, err
	}
	if code := resp.StatusCode(); code != fasthttp.StatusOK {
		return 0, 0, fmt.Errorf("answered %d, want 200", code)
	}
	return parseAdaptiveMetrics(bytes.NewReader(resp.Body()))
}

// parseAdaptiveMetrics reads adaptiveRule's gauges from a metrics page in
// the Prometheus text format; both must be there.
func parseAdaptiveMetrics(rd io.Reader) (limit, inFlight int64, err error) {
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(rd)
	if err != nil {
		return 0, 0, err
	}
	gauge := func(name string) (int64, error) {
		for _, m := range fams[name].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "rule" && lp.GetValue() == adaptiveRule {
					return wholeCount(m.GetGauge().GetValue())
				}
			}
		}
		return 0, fmt.Errorf("no %s{rule=%q}: is the edge running loadtest/testdata/adaptive.hcl?", name, adaptiveRule)
	}
	if limit, err = gauge(adaptiveLimitMetric); err != nil {
		return 0, 0, err
	}
	inFlight, err = gauge(adaptiveInFlightMetric)
	return limit, inFlight, err
}

// adaptivePhase sums a phase's samples.
type adaptivePhase struct {
	name                 string
	latency              time.Duration
	samples              int
	endLimit             int64 // the limit at the phase's last reading
	minLimit, maxLimit   int64
	originPeak           int64
	ok, shed, bad        int64
	okRTT                time.Duration // mean of the 200s
	seconds              float64
	failed, overrun      int64
	refused, otherStatus int64
}

// phases sums r's samples by phase.
func (r *adaptiveResult) phases() []adaptivePhase {
	out := []adaptivePhase{{name: "fast"}, {name: "slow"}, {name: "fast again"}}
	var nanos [3]int64
	for _, s := range r.samples {
		ph := &out[s.phase]
		if ph.samples == 0 {
			ph.minLimit, ph.maxLimit = s.limit, s.limit
		}
		ph.samples++
		ph.latency = s.latency
		ph.endLimit = s.limit
		ph.minLimit, ph.maxLimit = min(ph.minLimit, s.limit), max(ph.maxLimit, s.limit)
		ph.originPeak = max(ph.originPeak, s.originPeak)
		ph.ok += s.ok
		ph.shed += s.shed
		ph.refused += s.refused
		ph.otherStatus += s.other
		ph.failed += s.failed
		ph.overrun += s.overrun
		nanos[s.phase] += int64(s.okRTT) * s.ok
	}
	for i := range out {
		if out[i].ok > 0 {
			out[i].okRTT = time.Duration(nanos[i] / out[i].ok)
		}
		out[i].seconds = float64(out[i].samples) * r.params.sample.Seconds()
	}
	return out
}

// mismatch returns an error wrapping errMismatch when the edge did
// otherwise than it must, nil otherwise.
func (r *adaptiveResult) mismatch() error {
	var why []string
	ph := r.phases()
	var refused, other int64
	for _, p := range ph {
		refused += p.refused
		other += p.otherStatus
	}
	if refused > 0 {
		why = append(why, fmt.Sprintf("%d answers were 429: an adaptive limit sheds with 503 (the system is saturated, not the caller over its budget)", refused))
	}
	if other > 0 {
		why = append(why, fmt.Sprintf("%d answers were neither the origin's 200 nor a shed 503 (by status: %v; a 502 at the start is an edge reused across runs whose pooled connections to the previous run's origin are closed: start a fresh edge)", other, r.otherCodes))
	}
	switch {
	case ph[0].samples == 0 || ph[1].samples == 0:
		why = append(why, "the run ended before the slow phase was read")
	case ph[1].endLimit >= ph[0].endLimit:
		why = append(why, fmt.Sprintf("the limit did not fall with the slowdown: %d at the end of the fast phase, %d at the end of the slow one", ph[0].endLimit, ph[1].endLimit))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", errMismatch, strings.Join(why, "; "))
}

// writeAdaptiveReport prints r's readings and its phases.
func writeAdaptiveReport(w io.Writer, cfg config, r *adaptiveResult) {
	p := r.params
	fmt.Fprintf(w, "adaptive: GET %s%s at %d/s (open loop), demo origin %s: latency %v for %v, %v for %v, %v for %v; %d sent\n",
		cfg.target.base, adaptivePath, p.rate, p.origin, p.fast, p.phase, p.slow, p.phase, p.fast, 2*p.phase, r.sent)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "t\tlatency\tlimit\tedge in flight\torigin in flight\torigin peak\t200/s\t503/s\tother\t200 mean\t\n")
	for _, s := range r.samples {
		per := func(n int64) string { return fmt.Sprintf("%.0f", float64(n)/p.sample.Seconds()) }
		fmt.Fprintf(tw, "%.1fs\t%v\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%v\t\n", s.at.Seconds(), s.latency, s.limit, s.edgeInFlight,
			s.originNow, s.originPeak, per(s.ok), per(s.shed), s.refused+s.other+s.failed+s.overrun, s.okRTT.Round(100*time.Microsecond))
	}
	tw.Flush()
	fmt.Fprintln(w, "phases:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\tlatency\tlimit at end\tlimit min..max\torigin peak\t200/s\t503/s\t200 mean\t429\tother\tno answer\tnot sent\n")
	for _, ph := range r.phases() {
		if ph.samples == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d..%d\t%d\t%.0f\t%.0f\t%v\t%d\t%d\t%d\t%d\n", ph.name, ph.latency, ph.endLimit, ph.minLimit, ph.maxLimit,
			ph.originPeak, float64(ph.ok)/ph.seconds, float64(ph.shed)/ph.seconds, ph.okRTT.Round(100*time.Microsecond),
			ph.refused, ph.otherStatus, ph.failed, ph.overrun)
	}
	tw.Flush()
	ph := r.phases()
	fmt.Fprintf(w, "the limit fell with the slowdown: %s; grew back after it: %s\n",
		yesNo(ph[1].samples > 0 && ph[1].endLimit < ph[0].endLimit), yesNo(ph[2].samples > 0 && ph[2].endLimit > ph[1].endLimit))
}
