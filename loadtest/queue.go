package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"
)

// The queue scenario (README, "queue"; docs/policy.md, "Queue"): a burst of
// burst + 1 requests on one key of a queue = true leaky_bucket rule
// (testdata/queue.hcl: a burst of 20 at 5 a second) through the real edge,
// to the scenario's own origin, which records when each one reaches it.
// Each request is sent once the edge has decided the one before (its
// edge_requests_total has counted it), so the edge's arrival order is the
// send order and "in order" at the origin means what it says. The report
// gives the spacing of the releases at the origin (mean, min and max gap,
// each arrival's lateness against the ideal schedule), whether they came
// in arrival order, and the last request's refusal.
//
// What it can judge without trusting this machine's timing:
//
//   - order: the origin must receive the burst in the order sent;
//   - never early: the edge releases request i when the bucket has drained
//     the i units ahead of it, at the earliest i intervals after it decided
//     the first, which was after T0 (taken before the first was sent), so
//     an arrival before T0 + i × interval is the queue's error;
//   - the last one's refusal: the bucket is full (burst units) once the
//     burst is in, and frees its first unit an interval after the first
//     decision, so an answer to the last request that came back before T0 +
//     interval must be 429. A later answer (a slow machine took longer than
//     an interval to send the burst) is reported, not judged.
//
// The gaps themselves are this machine's timer and scheduling accuracy:
// reported, never a pass or fail.

const (
	queueDuration  = 60 * time.Second // -duration default
	queueMaxBurst  = 1000
	queueMaxRate   = 1000                   // per second
	queuePath      = "/queue/burst"         // the route of testdata/queue.hcl's rule
	queueRunHeader = "X-Queue-Run"          // the rule's key: one bucket per run
	queueSeqHeader = "X-Queue-Seq"          // the request's place in the burst, from 0
	queuePoll      = 200 * time.Microsecond // between scrapes while waiting for a decision
	// queueMetricsBody bounds a scraped metrics page, bytes.
	queueMetricsBody = 16 << 20
	// queueHeldMetric is the gauge of requests the node holds in queues
	// (gateway/queue.go).
	queueHeldMetric = "edge_queue_held"
)

// queueParams are the queue scenario's flags.
type queueParams struct {
	origin string // the recording origin's listen address: the policy's upstream
	rate   int    // the rule's rate, per second
	burst  int    // the rule's burst
}

var defaultQueueParams = queueParams{origin: "127.0.0.1:19010", rate: 5, burst: 20}

func (q *queueParams) check() error {
	switch {
	case q.rate < 1 || q.rate > queueMaxRate:
		return fmt.Errorf("-queue-rate must be in [1, %d], got %d", queueMaxRate, q.rate)
	case q.burst < 1 || q.burst > queueMaxBurst:
		return fmt.Errorf("-queue-burst must be in [1, %d], got %d", queueMaxBurst, q.burst)
	}
	host, _, err := net.SplitHostPort(q.origin)
	if err != nil || !isLoopback(host) {
		return fmt.Errorf("-queue-origin %q: want a loopback host:port such as 127.0.0.1:19010", q.origin)
	}
	return nil
}

// interval is the time the rule's bucket takes to drain one unit.
func (q queueParams) interval() time.Duration { return time.Second / time.Duration(q.rate) }

// queueArrival is one request's arrival at the origin.
type queueArrival struct {
	seq int
	at  time.Time
}

// queueOrigin is the scenario's origin: it records the arrival of each
// request of its run, in the order they arrive.
type queueOrigin struct {
	run      string
	mu       sync.Mutex
	arrivals []queueArrival
	others   int // requests of no run or of another run
}

func (o *queueOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	seq, err := strconv.Atoi(r.Header.Get(queueSeqHeader))
	o.mu.Lock()
	if err != nil || seq < 0 || r.Header.Get(queueRunHeader) != o.run {
		o.others++
	} else {
		o.arrivals = append(o.arrivals, queueArrival{seq: seq, at: at})
	}
	o.mu.Unlock()
	_, _ = io.WriteString(w, "ok\n")
}

func (o *queueOrigin) snapshot() ([]queueArrival, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]queueArrival(nil), o.arrivals...), o.others
}

// queueResult is one burst's record.
type queueResult struct {
	params   queueParams
	t0       time.Time      // taken before the first request was sent
	sent     time.Duration  // from t0 until the edge had decided the last request
	status   []int          // per request, burst + 1
	answered []time.Time    // when each answer came back
	arrivals []queueArrival // at the origin, in the order they came
	others   int            // requests of no or another run at the origin
	held     int64          // edge_queue_held once the last request was decided
	// fallbacks counts the run's store_error decisions: requests the store
	// could not decide within its budget, answered by on_store_error
	// (forwarded at once, unqueued, or refused).
	fallbacks int64
}

// queueStats is what the report says of a result.
type queueStats struct {
	fallbacks   int64 // the run's store_error decisions (queueResult.fallbacks)
	admitted    int   // of the burst, answered 200
	badStatus   []string
	reached     int           // of the burst, at the origin
	missing     []int         // of the burst, never at the origin
	duplicates  int           // arrivals of a request already there
	inOrder     bool          // the burst reached the origin in the order sent
	outOfOrder  []int         // the origin's order, when not
	early       []int         // requests at the origin before t0 + seq × interval
	lastStatus  int           // the last request's answer
	lastAt      time.Duration // its answer after t0
	lastJudged  bool          // its answer came before t0 + interval: it must be 429
	lastReached bool          // it reached the origin
	gaps        int           // between consecutive arrivals of the burst
	mean        time.Duration
	minGap      time.Duration
	maxGap      time.Duration
	minLate     time.Duration // arrival i − (arrival 0 + i × interval), least
	maxLate     time.Duration // and most
	minAfter    time.Duration // arrival i − (t0 + i × interval), after the earliest release: least
	maxAfter    time.Duration // and most
	firstWait   time.Duration // the first request's arrival after t0
}

// stats judges r.
func (r *queueResult) stats() queueStats {
	n, iv := r.params.burst, r.params.interval()
	s := queueStats{fallbacks: r.fallbacks}
	for i := range n {
		if r.status[i] == fasthttp.StatusOK {
			s.admitted++
		} else {
			s.badStatus = append(s.badStatus, fmt.Sprintf("%d:%d", i, r.status[i]))
		}
	}
	s.lastStatus = r.status[n]
	s.lastAt = r.answered[n].Sub(r.t0)
	s.lastJudged = s.lastAt < iv
	seen := make(map[int]bool, n+1)
	var order []int
	at := make([]time.Time, n)
	for _, a := range r.arrivals {
		if seen[a.seq] {
			s.duplicates++
			continue
		}
		seen[a.seq] = true
		if a.seq == n {
			s.lastReached = true
			continue
		}
		if a.seq > n {
			s.duplicates++ // not one the scenario sent: count it as wrong
			continue
		}
		order = append(order, a.seq)
		at[a.seq] = a.at
		if a.at.Before(r.t0.Add(time.Duration(a.seq) * iv)) {
			s.early = append(s.early, a.seq)
		}
	}
	s.reached = len(order)
	for i := range n {
		if !seen[i] {
			s.missing = append(s.missing, i)
		}
	}
	s.inOrder = true
	for i, seq := range order {
		if seq != i {
			s.inOrder = false
			s.outOfOrder = order
			break
		}
	}
	if !s.inOrder || len(s.missing) > 0 {
		return s
	}
	s.firstWait = at[0].Sub(r.t0)
	s.minAfter, s.maxAfter = s.firstWait, s.firstWait
	for i := 1; i < n; i++ {
		d := at[i].Sub(r.t0.Add(time.Duration(i) * iv))
		s.minAfter, s.maxAfter = min(s.minAfter, d), max(s.maxAfter, d)
	}
	s.gaps = n - 1
	for i := 1; i < n; i++ {
		g := at[i].Sub(at[i-1])
		if i == 1 || g < s.minGap {
			s.minGap = g
		}
		if i == 1 || g > s.maxGap {
			s.maxGap = g
		}
		late := at[i].Sub(at[0].Add(time.Duration(i) * iv))
		if i == 1 || late < s.minLate {
			s.minLate = late
		}
		if i == 1 || late > s.maxLate {
			s.maxLate = late
		}
	}
	if s.gaps > 0 {
		s.mean = at[n-1].Sub(at[0]) / time.Duration(s.gaps)
	}
	return s
}

// mismatch returns an error wrapping errMismatch when the edge's queue
// did otherwise than it must, nil otherwise.
func (s queueStats) mismatch(p queueParams) error {
	var why []string
	if len(s.badStatus) > 0 {
		why = append(why, fmt.Sprintf("the burst's answers (request:status) %s, want 200 for all %d", strings.Join(s.badStatus, " "), p.burst))
	}
	if len(s.missing) > 0 {
		why = append(why, fmt.Sprintf("requests %v never reached the origin", s.missing))
	}
	if s.duplicates > 0 {
		why = append(why, fmt.Sprintf("%d arrivals at the origin were repeats or not sent by the scenario", s.duplicates))
	}
	if !s.inOrder {
		why = append(why, fmt.Sprintf("the origin received %v, want the order sent", s.outOfOrder))
	}
	if len(s.early) > 0 {
		why = append(why, fmt.Sprintf("requests %v reached the origin before their earliest release (T0 + seq × %v): is the rule queue = true at -queue-rate %d?", s.early, p.interval(), p.rate))
	}
	if s.lastJudged && s.lastStatus != fasthttp.StatusTooManyRequests {
		why = append(why, fmt.Sprintf("request %d (one over the burst, answered %v after T0, before the bucket frees a unit) answered %d, want 429", p.burst, s.lastAt.Round(time.Microsecond), s.lastStatus))
	}
	if s.lastJudged && s.lastReached {
		why = append(why, fmt.Sprintf("request %d reached the origin", p.burst))
	}
	if s.fallbacks > 0 {
		why = append(why, fmt.Sprintf("%d store calls failed within the store's budget and on_store_error answered them (an ordinary rule's allow forwards at once, unqueued): "+
			"the run did not measure the queue alone; give the store a longer timeout (docs/policy.md, \"store\") or rerun on a quieter machine", s.fallbacks))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", errMismatch, strings.Join(why, "; "))
}

// writeQueueReport prints r's figures.
func writeQueueReport(w io.Writer, cfg config, r *queueResult, s queueStats) {
	p := r.params
	fmt.Fprintf(w, "queue: a burst of %d (the rule's burst %d + 1) on one key at %d/s through %s%s, origin %s\n",
		p.burst+1, p.burst, p.rate, cfg.target.base, queuePath, p.origin)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(v, a...)) }
	row("burst sent", "%v (each request once the edge had decided the one before); held at the edge then: %d", r.sent.Round(time.Microsecond), r.held)
	row("admitted", "%d of %d (200)", s.admitted, p.burst)
	row("at the origin", "%d of %d, in arrival order: %s", s.reached, p.burst, yesNo(s.inOrder && len(s.missing) == 0))
	last := fmt.Sprintf("%d, answered %v after T0", s.lastStatus, s.lastAt.Round(time.Microsecond))
	if s.lastJudged {
		last += fmt.Sprintf(" (before the bucket frees a unit at T0 + %v: judged)", p.interval())
	} else {
		last += fmt.Sprintf(" (not judged: later than T0 + %v, when the bucket may have freed a unit)", p.interval())
	}
	row(fmt.Sprintf("request %d", p.burst), "%s", last)
	row("never early", "%s (arrivals before T0 + seq × %v: %d)", yesNo(len(s.early) == 0), p.interval(), len(s.early))
	if s.gaps > 0 {
		row("first arrival", "%v after T0", s.firstWait.Round(time.Microsecond))
		row("gaps", "%d: mean %v, min %v, max %v (the rule's interval %v)", s.gaps,
			s.mean.Round(time.Microsecond), s.minGap.Round(time.Microsecond), s.maxGap.Round(time.Microsecond), p.interval())
		row("lateness", "arrival i − (arrival 0 + i × %v): %v to %v", p.interval(), s.minLate.Round(time.Microsecond), s.maxLate.Round(time.Microsecond))
		row("after the earliest", "arrival i − (T0 + i × %v): %v to %v", p.interval(), s.minAfter.Round(time.Microsecond), s.maxAfter.Round(time.Microsecond))
	}
	row("store fallbacks", "%d (edge_decisions_total store_error_allow and store_error_deny during the run)", r.fallbacks)
	if r.others > 0 {
		row("other requests", "%d at the origin not of this run (ignored)", r.others)
	}
	_ = tw.Flush()
}

// runQueue is the scenario: the recording origin on -queue-origin, the
// burst to -target, decisions read from -target-metrics.
func runQueue(ctx context.Context, cfg config) error {
	if err := cfg.queue.check(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.queue.origin)
	if err != nil {
		return fmt.Errorf("queue: listening for the origin (-queue-origin, the policy's upstream): %w", err)
	}
	_, err = queueRun(ctx, cfg, ln)
	return err
}

// queueRun is runQueue on the origin's listener ln: one burst, its report
// on cfg.stdout, and its judgement (an error wrapping errMismatch).
func queueRun(ctx context.Context, cfg config, ln net.Listener) (queueStats, error) {
	r, err := queueBurst(ctx, cfg, ln)
	if err != nil {
		return queueStats{}, err
	}
	s := r.stats()
	writeQueueReport(cfg.stdout, cfg, r, s)
	return s, s.mismatch(r.params)
}

// queueBurst serves the recording origin on ln (closed on return) and
// sends one burst through cfg.target.
func queueBurst(ctx context.Context, cfg config, ln net.Listener) (*queueResult, error) {
	defer ln.Close()
	p := cfg.queue
	n := p.burst + 1
	if cfg.target.metrics.url == "" {
		return nil, errors.New("queue: give -target-metrics, the edge's admin /metrics (e.g. http://127.0.0.1:19901/metrics): the scenario reads edge_requests_total to send each request once the one before is decided")
	}
	if n > cfg.requests {
		return nil, fmt.Errorf("queue: a burst of %d is more than -requests %d", n, cfg.requests)
	}
	drain := time.Duration(p.burst) * p.interval()
	if need := drain + 2*cfg.timeout; need > cfg.duration {
		return nil, fmt.Errorf("queue: the burst needs about %v (burst ÷ rate and two -timeout), more than -duration %v", need, cfg.duration)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	origin := &queueOrigin{run: hex.EncodeToString(id[:])}
	osrv := &http.Server{Handler: origin, ReadHeaderTimeout: cfg.timeout}
	go func() { _ = osrv.Serve(ln) }()
	defer osrv.Close()

	// A held request waits up to burst ÷ rate at the edge before its
	// answer starts.
	wait := drain + cfg.timeout
	hc := &fasthttp.HostClient{
		Addr:                      cfg.target.addr,
		Name:                      "edge-loadtest",
		MaxConns:                  n,
		MaxIdemponentCallAttempts: 1, // a retried request would be a second arrival
		ReadTimeout:               wait,
		WriteTimeout:              cfg.timeout,
		DisablePathNormalizing:    true,
	}
	defer hc.CloseIdleConnections()
	mc := &fasthttp.HostClient{
		Addr:                   cfg.target.metrics.addr,
		Name:                   "edge-loadtest",
		MaxConns:               1,
		ReadTimeout:            cfg.timeout,
		WriteTimeout:           cfg.timeout,
		MaxResponseBodySize:    queueMetricsBody,
		DisablePathNormalizing: true,
	}
	defer mc.CloseIdleConnections()
	scrape := func() (queueCounts, error) {
		c, err := queueScrape(mc, cfg.target.metrics.url, cfg.timeout)
		if err != nil {
			return c, fmt.Errorf("queue: scraping -target-metrics %s: %w", cfg.target.metrics.url, err)
		}
		return c, nil
	}

	base, err := scrape()
	if err != nil {
		return nil, err
	}
	r := &queueResult{params: p, status: make([]int, n), answered: make([]time.Time, n)}
	type answer struct {
		seq, status int
		at          time.Time
		err         error
	}
	answers := make(chan answer, n)
	send := func(seq int) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(cfg.target.base + queuePath)
		req.Header.Set(queueRunHeader, origin.run)
		req.Header.Set(queueSeqHeader, strconv.Itoa(seq))
		err := hc.DoTimeout(req, resp, wait)
		answers <- answer{seq: seq, status: resp.StatusCode(), at: time.Now(), err: err}
	}
	r.t0 = time.Now()
	for i := range n {
		go send(i)
		// Wait until the edge has decided request i, so that i + 1 arrives
		// after it.
		deadline := time.Now().Add(cfg.timeout)
		for {
			c, err := scrape()
			if err != nil {
				return nil, err
			}
			if d := c.decided - base.decided; d > int64(i) {
				if d > int64(i+1) {
					return nil, fmt.Errorf("queue: the edge decided %d requests, more than the %d sent: other traffic reached it; run again on a quiet node", d, i+1)
				}
				r.held = c.held
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("queue: request %d was not decided within -timeout %v (edge_requests_total did not count it)", i, cfg.timeout)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(queuePoll):
			}
		}
	}
	r.sent = time.Since(r.t0)
	for range n {
		select {
		case a := <-answers:
			if a.err != nil {
				return nil, fmt.Errorf("queue: request %d: %w", a.seq, a.err)
			}
			r.status[a.seq], r.answered[a.seq] = a.status, a.at
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// Every answer is in, so every forwarded request has reached the
	// origin (it answered them).
	r.arrivals, r.others = origin.snapshot()
	end, err := scrape()
	if err != nil {
		return nil, err
	}
	r.fallbacks = end.fallbacks - base.fallbacks
	return r, nil
}

// queueCounts is what the scenario reads from the edge's metrics.
type queueCounts struct {
	decided   int64 // edge_requests_total, summed over its verdicts: the requests the node decided
	held      int64 // edge_queue_held
	fallbacks int64 // edge_decisions_total store_error_allow and store_error_deny, summed over the rules
}

// queueScrape reads an edge node's metrics page.
func queueScrape(hc *fasthttp.HostClient, url string, timeout time.Duration) (queueCounts, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.Set(fasthttp.HeaderAccept, "text/plain;version=0.0.4")
	if err := hc.DoTimeout(req, resp, timeout); err != nil {
		return queueCounts{}, err
	}
	if code := resp.StatusCode(); code != fasthttp.StatusOK {
		return queueCounts{}, fmt.Errorf("answered %d, want 200", code)
	}
	return parseQueueMetrics(bytes.NewReader(resp.Body()))
}

// parseQueueMetrics reads queueCounts from a metrics page in the
// Prometheus text format; edge_requests_total and edge_queue_held must be
// there (edge_decisions_total may not be yet, on a node that has decided
// nothing).
func parseQueueMetrics(rd io.Reader) (queueCounts, error) {
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(rd)
	if err != nil {
		return queueCounts{}, err
	}
	var c queueCounts
	sum := func(name string, keep func(*dto.Metric) bool) (int64, error) {
		var total int64
		mf := fams[name]
		for _, m := range mf.GetMetric() {
			if !keep(m) {
				continue
			}
			n, err := wholeCount(metricValue(mf.GetType(), m))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			total += n
		}
		return total, nil
	}
	all := func(*dto.Metric) bool { return true }
	if _, ok := fams[requestsMetric]; !ok {
		return c, fmt.Errorf("no %s: not an edge node's metrics", requestsMetric)
	}
	if h, ok := fams[queueHeldMetric]; !ok || len(h.GetMetric()) != 1 {
		return c, fmt.Errorf("no %s: an edge node without the queue", queueHeldMetric)
	}
	if c.decided, err = sum(requestsMetric, all); err != nil {
		return c, err
	}
	if c.held, err = sum(queueHeldMetric, all); err != nil {
		return c, err
	}
	c.fallbacks, err = sum(decisionsMetric, func(m *dto.Metric) bool {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "decision" {
				return lp.GetValue() == "store_error_allow" || lp.GetValue() == "store_error_deny"
			}
		}
		return false
	})
	return c, err
}

func metricValue(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}
