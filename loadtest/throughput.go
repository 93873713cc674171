package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// runThroughput puts a closed-loop load on the target: cfg.connections
// clients, each on its own connection, each sending its next request as
// soon as the previous one is answered, for cfg.warmup (not measured) and
// then cfg.duration. With cfg.compare set, it does the same to the second
// target right after the first, and reports both side by side.
//
// With several levels (cfg.levels) or repetitions (cfg.repeat), it does
// that for each level in turn, and the whole set of levels cfg.repeat
// times (repetition 1: level A's target, level A's compare, level B's
// target, …; then repetition 2), so a machine that drifts, shared with
// other jobs, weighs on both targets alike. Each level's report is printed
// as soon as it is measured, and a summary (medians per level over the
// repetitions, and the peak of each target) after the last.
//
// With a target's metrics (-target-metrics, -compare-metrics), each run
// of it also counts the rule decisions its store made and its
// on_store_error fallbacks, and the summary's peaks leave out the levels
// where a target fell back (see capacityLevels).
//
// Closed loop means the latencies are service times under the load the
// target let through: a slow answer delays the next request rather than
// queueing behind it, so they understate what an open-loop (fixed-rate)
// client would see once the target saturates (coordinated omission).
func runThroughput(ctx context.Context, cfg config) error {
	targets := []target{cfg.target}
	if cfg.compare.addr != "" {
		targets = append(targets, cfg.compare)
	}
	levels := cfg.levels
	if len(levels) == 0 {
		levels = []int{cfg.connections}
	}
	repeat := max(cfg.repeat, 1)
	// The -requests cap is per measured run (one target at one level in
	// one repetition), shared evenly between the targets of a level, so
	// both get the same chance to reach it; with one level and no
	// repetition, it is the whole run's cap, as it always was.
	limit := int64(cfg.requests / len(targets))
	if most := slices.Max(levels); limit < int64(most) {
		return fmt.Errorf("-requests %d leaves %d per target, fewer than -connections %d", cfg.requests, limit, most)
	}
	runs := len(levels) * repeat * len(targets)
	if load := time.Duration(runs) * (cfg.warmup + cfg.duration); load > maxThroughputLoad {
		return fmt.Errorf("%d levels × %d repetitions × %d targets × (-warmup %v + -duration %v) is %v of load, over %v: shorten -duration or measure fewer levels or repetitions",
			len(levels), repeat, len(targets), cfg.warmup, cfg.duration, load, maxThroughputLoad)
	}
	// Dial every target first, and read the metrics of those that have
	// them, so a wrong -compare or -compare-metrics fails now rather than
	// after the first target's whole run.
	for _, tg := range targets {
		if err := probe(ctx, tg, cfg.timeout); err != nil {
			return err
		}
	}
	for _, tg := range targets {
		if tg.metrics.url == "" {
			continue
		}
		sc := newScraper(tg.metrics, cfg.timeout)
		_, err := sc.scrape(ctx)
		sc.close()
		if err != nil {
			return err
		}
	}

	if len(levels) == 1 && repeat == 1 {
		h := newThroughputHeader(cfg, levels[0])
		results, err := measureLevel(ctx, cfg, targets, levels[0], limit)
		if err != nil {
			if len(results) > 0 {
				// Keep what was measured; the run still failed.
				_ = writeThroughputReport(cfg.stdout, h, results)
			}
			return err
		}
		if err := writeThroughputReport(cfg.stdout, h, results); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		return nil
	}

	sum := make([]levelResults, len(levels))
	for i, n := range levels {
		sum[i] = levelResults{connections: n, runs: make([][]*loadResult, 0, repeat)}
	}
	for rep := 1; rep <= repeat; rep++ {
		for i, n := range levels {
			h := newThroughputHeader(cfg, n)
			h.repetition, h.repetitions = rep, repeat
			h.level, h.levels = i+1, len(levels)
			results, err := measureLevel(ctx, cfg, targets, n, limit)
			if err != nil {
				if len(results) > 0 {
					_ = writeThroughputRun(cfg.stdout, h, results)
				}
				return err
			}
			if err := writeThroughputRun(cfg.stdout, h, results); err != nil {
				return fmt.Errorf("writing report: %w", err)
			}
			sum[i].runs = append(sum[i].runs, results)
		}
	}
	sh := summaryHeader{
		method:      cfg.method,
		path:        cfg.path,
		clients:     cfg.clients,
		warmup:      cfg.warmup,
		duration:    cfg.duration,
		levels:      len(levels),
		repetitions: repeat,
		bases:       make([]string, len(targets)),
	}
	for i, tg := range targets {
		sh.bases[i] = tg.base
	}
	if err := writeThroughputSummary(cfg.stdout, sh, summarize(sum)); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}

// measureLevel loads each of targets in turn with connections clients and
// returns their results, in the same order. On an error it returns the
// results measured before it.
func measureLevel(ctx context.Context, cfg config, targets []target, connections int, limit int64) ([]*loadResult, error) {
	cfg.connections = connections
	results := make([]*loadResult, 0, len(targets))
	for _, tg := range targets {
		res, err := measure(ctx, cfg, tg, limit)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

// newThroughputHeader describes a run of cfg at one level.
func newThroughputHeader(cfg config, connections int) throughputHeader {
	return throughputHeader{
		method:      cfg.method,
		path:        cfg.path,
		connections: connections,
		clients:     cfg.clients,
		warmup:      cfg.warmup,
		duration:    cfg.duration,
	}
}

// parseLevels parses -connections: one number, or a comma-separated list
// of distinct numbers (spaces around them allowed), each in
// [1, maxConnections], at most maxLevels of them, kept in the order given.
// Duplicates are refused: a level is measured again with -repeat, and the
// summary has one row per level.
func parseLevels(s string) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) > maxLevels {
		return nil, fmt.Errorf("-connections %q: at most %d levels, got %d", s, maxLevels, len(parts))
	}
	levels := make([]int, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			if len(parts) == 1 {
				return nil, errors.New("-connections is empty: want a number such as 32 or a list such as 32,128,256")
			}
			return nil, fmt.Errorf("-connections %q: element %d is empty", s, i+1)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("-connections %q: %q is not a whole number in [1, %d]", s, p, maxConnections)
		}
		if n < 1 || n > maxConnections {
			if len(parts) == 1 {
				return nil, fmt.Errorf("-connections must be in [1, %d], got %d", maxConnections, n)
			}
			return nil, fmt.Errorf("-connections must be in [1, %d], got %d in %q", maxConnections, n, s)
		}
		if slices.Contains(levels, n) {
			return nil, fmt.Errorf("-connections %q: %d is listed twice (-repeat measures a level again)", s, n)
		}
		levels = append(levels, n)
	}
	return levels, nil
}

// throughputBudget is the throughput scenario's deadline: per measured
// run (a target at a level in a repetition), the time to open the
// connections (a dial and a request), the warm-up, the measured time, the
// last answers, and a second of slack; for a target with metrics, also
// its two scrapes per run and the one before the first run, each at most
// -timeout.
func throughputBudget(cfg config) time.Duration {
	per := 2*cfg.timeout + cfg.warmup + cfg.duration + cfg.timeout + time.Second
	runs := time.Duration(max(len(cfg.levels), 1) * max(cfg.repeat, 1))
	targets := []target{cfg.target}
	if cfg.compare.addr != "" {
		targets = append(targets, cfg.compare)
	}
	var budget time.Duration
	for _, tg := range targets {
		budget += runs * per
		if tg.metrics.url != "" {
			budget += (2*runs + 1) * cfg.timeout
		}
	}
	return budget
}

// probe dials tg once and hangs up.
func probe(ctx context.Context, tg target, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", tg.addr)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", tg.base, err)
	}
	return c.Close()
}

// clientAddr returns address i of 198.18.0.0/15, the benchmarking range
// (RFC 2544), which no real client uses: 198.18.0.0 for 0, 198.18.1.0 for
// 256, 198.19.0.0 for 65536. It is meaningful for 0 ≤ i < maxClients.
func clientAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)})
}

// clientAddrStrings returns the first k client addresses as strings, ready
// for the X-Forwarded-For header.
func clientAddrStrings(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = clientAddr(i).String()
	}
	return out
}

// Error kinds, in report order.
const (
	errTimeout = iota // no answer within -timeout, dialling included
	errRefused        // nothing listening: the run is void
	errClosed         // the target closed or reset the connection
	errOther
	numErrKinds
)

var errKindNames = [numErrKinds]string{"timeout", "refused", "closed", "other"}

// errorKind classifies a failed request.
func errorKind(err error) int {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRefused
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout),
		errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return errClosed
	default:
		return errOther
	}
}

// loadResult is one target's measured load.
type loadResult struct {
	base     string
	elapsed  time.Duration           // from the end of the warm-up to the last measured answer
	statuses map[int]int64           // answered requests by status; statuses outside 100-599 under 0
	errs     [numErrKinds]int64      // failed requests by kind
	firstErr [numErrKinds]string     // the first error of each kind
	hist     *hdrhistogram.Histogram // latency of the answered requests, µs
	dials    int64                   // connections opened, warm-up included
	sent     int64                   // requests sent, warm-up included
	capped   bool                    // the -requests cap ended the run early

	// decisions are the node's rule decisions from a scrape of its
	// metrics as the warm-up ended to one after the last measured answer
	// (-target-metrics, -compare-metrics); nil when not scraped.
	decisions *decisionCounts
}

// answered returns the number of measured requests that got an answer.
func (r *loadResult) answered() int64 {
	var n int64
	for _, c := range r.statuses {
		n += c
	}
	return n
}

// failed returns the number of measured requests that got no answer.
func (r *loadResult) failed() int64 {
	var n int64
	for _, c := range r.errs {
		n += c
	}
	return n
}

// total returns the number of measured requests.
func (r *loadResult) total() int64 { return r.answered() + r.failed() }

// rate returns answered requests per second: failed requests are not
// throughput.
func (r *loadResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.answered()) / r.elapsed.Seconds()
}

// otherStatuses returns the answers whose status is not 200, 429 or 503.
func (r *loadResult) otherStatuses() int64 {
	return r.answered() - r.statuses[200] - r.statuses[429] - r.statuses[503]
}

// loadRun is the state the connections of one target's run share.
type loadRun struct {
	cfg   config
	url   string
	addrs []string
	limit int64 // most requests to send, warm-up included

	sent   atomic.Int64 // requests sent; also picks each request's client address
	dials  atomic.Int64
	capped atomic.Bool
	stop   atomic.Bool

	mu   sync.Mutex
	fail error // the first error that voids the run
}

// next returns the index of the next request, or false once the cap is
// spent.
func (r *loadRun) next() (int64, bool) {
	n := r.sent.Add(1) - 1
	if n >= r.limit {
		r.capped.Store(true)
		return 0, false
	}
	return n, true
}

// abort stops every connection; the first err is the run's.
func (r *loadRun) abort(err error) {
	r.mu.Lock()
	if r.fail == nil {
		r.fail = err
	}
	r.mu.Unlock()
	r.stop.Store(true)
}

// measure runs the load against tg and returns what it measured. When tg
// has metrics, it scrapes them as the warm-up ends (while the load goes
// on) and again after the last measured answer, and adds the node's
// decisions between the two; a failed scrape fails the run.
func measure(ctx context.Context, cfg config, tg target, limit int64) (*loadResult, error) {
	r := &loadRun{
		cfg:   cfg,
		url:   tg.base + cfg.path,
		addrs: clientAddrStrings(cfg.clients),
		limit: limit,
	}
	stopOnDone := context.AfterFunc(ctx, func() { r.stop.Store(true) })
	defer stopOnDone()

	ws := make([]*loadWorker, cfg.connections)
	for i := range ws {
		ws[i] = newLoadWorker(r, tg)
		defer ws[i].close()
	}

	// Open every connection with one request before the clock starts, so
	// no measured request pays for a handshake and a target that is not
	// there fails the run now.
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { errs[i] = w.open(r) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("warming up %s: %w", tg.base, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("warming up %s: %w", tg.base, err)
	}

	from := time.Now().Add(cfg.warmup)
	to := from.Add(cfg.duration)
	var sc *scraper
	var before <-chan scrapeResult
	loadDone := make(chan struct{})
	if tg.metrics.url != "" {
		sc = newScraper(tg.metrics, cfg.timeout)
		defer sc.close()
		before = scrapeAt(ctx, sc, from, loadDone, r)
	}
	for _, w := range ws {
		wg.Go(func() { w.loop(r, from, to) })
	}
	wg.Wait()
	close(loadDone)
	var start scrapeResult
	if before != nil {
		start = <-before
	}
	if r.fail != nil {
		return nil, fmt.Errorf("measuring %s: %w", tg.base, r.fail)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("measuring %s: %w", tg.base, err)
	}

	res := &loadResult{
		base:     tg.base,
		statuses: make(map[int]int64),
		hist:     newLatencyHistogram(cfg.timeout),
		dials:    r.dials.Load(),
		sent:     min(r.sent.Load(), r.limit),
		capped:   r.capped.Load(),
	}
	var last time.Time
	for _, w := range ws {
		if w.last.After(last) {
			last = w.last
		}
		for code, n := range w.statuses {
			if n > 0 {
				res.statuses[code] += n
			}
		}
		for k, n := range w.errs {
			res.errs[k] += n
			if res.firstErr[k] == "" && w.firstErr[k] != nil {
				res.firstErr[k] = w.firstErr[k].Error()
			}
		}
		res.hist.Merge(w.hist) // same geometry: nothing is dropped
	}
	if last.IsZero() {
		if res.capped {
			return nil, fmt.Errorf("measuring %s: the -requests cap was spent before the warm-up ended", tg.base)
		}
		return nil, fmt.Errorf("measuring %s: no request completed in the measured time", tg.base)
	}
	res.elapsed = last.Sub(from)
	if res.answered() == 0 {
		return nil, fmt.Errorf("measuring %s: all %d requests failed (first error: %s)", tg.base, res.failed(), firstError(res))
	}
	if sc != nil {
		switch {
		case start.err != nil:
			return nil, fmt.Errorf("measuring %s: %w", tg.base, start.err)
		case start.at.After(last):
			// The goroutine that scrapes was not run until the load was
			// over: the counts would miss the run.
			return nil, fmt.Errorf("measuring %s: scraping %s %s as the warm-up ended took until after the last answer; lengthen -duration", tg.base, tg.metrics.flag, tg.metrics.url)
		}
		end, err := sc.scrape(ctx)
		if err != nil {
			return nil, fmt.Errorf("measuring %s: %w", tg.base, err)
		}
		d, err := end.since(start.counts)
		if err != nil {
			return nil, fmt.Errorf("measuring %s: %s %s: %w", tg.base, tg.metrics.flag, tg.metrics.url, err)
		}
		res.decisions = &d
	}
	return res, nil
}

// scrapeResult is a scrape's counts, or why there are none, and when it
// was answered.
type scrapeResult struct {
	counts decisionCounts
	at     time.Time
	err    error
}

// errScrapeCancelled ends a scrape that a run no longer needs: its load
// ended within the warm-up, before the scrape was due.
var errScrapeCancelled = errors.New("the run's load ended within its warm-up")

// scrapeAt scrapes sc once at, while the load goes on, and sends the
// result on the returned channel. A failed scrape aborts r, so the load
// stops at once. When the load ends (loadDone) before at, as when the
// -requests cap is spent within the warm-up, it does not scrape and sends
// errScrapeCancelled.
func scrapeAt(ctx context.Context, sc *scraper, at time.Time, loadDone <-chan struct{}, r *loadRun) <-chan scrapeResult {
	out := make(chan scrapeResult, 1)
	go func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-loadDone:
			if time.Now().Before(at) {
				out <- scrapeResult{err: errScrapeCancelled}
				return
			}
		}
		c, err := sc.scrape(ctx)
		if err != nil {
			r.abort(err)
		}
		out <- scrapeResult{counts: c, at: time.Now(), err: err}
	}()
	return out
}

// firstError returns the first recorded error message of res, by kind.
func firstError(res *loadResult) string {
	for _, s := range res.firstErr {
		if s != "" {
			return s
		}
	}
	return "none"
}

// newLatencyHistogram returns a histogram of latencies in microseconds,
// from 1µs to somewhat over the request timeout (an answer can arrive a
// little after it), at 3 significant digits.
func newLatencyHistogram(timeout time.Duration) *hdrhistogram.Histogram {
	return hdrhistogram.New(1, latencyCeiling(timeout), 3)
}

// latencyCeiling is the largest latency a histogram records, µs; larger
// ones are recorded as this.
func latencyCeiling(timeout time.Duration) int64 {
	return (timeout + time.Second).Microseconds()
}

// loadWorker is one client: one connection, used by one goroutine, with
// its own counters, merged after the run.
type loadWorker struct {
	hc   *fasthttp.HostClient
	req  *fasthttp.Request
	resp *fasthttp.Response

	timeout  time.Duration
	ceiling  int64 // latencyCeiling, µs
	hist     *hdrhistogram.Histogram
	statuses [600]int64 // by status code; index 0 for codes outside 100-599
	errs     [numErrKinds]int64
	firstErr [numErrKinds]error
	last     time.Time // when the last measured request ended
}

func newLoadWorker(r *loadRun, tg target) *loadWorker {
	w := &loadWorker{
		hc: &fasthttp.HostClient{
			Addr:                      tg.addr,
			Name:                      "edge-loadtest",
			MaxConns:                  1, // one connection per client
			MaxIdleConnDuration:       r.cfg.duration + r.cfg.warmup + r.cfg.timeout,
			MaxIdemponentCallAttempts: 1, // no retries: a retried request would count twice at the edge
			ReadTimeout:               r.cfg.timeout,
			WriteTimeout:              r.cfg.timeout,
			DisablePathNormalizing:    true,
			Dial: func(addr string) (net.Conn, error) {
				r.dials.Add(1)
				return fasthttp.DialTimeout(addr, r.cfg.timeout)
			},
		},
		req:     fasthttp.AcquireRequest(),
		resp:    fasthttp.AcquireResponse(),
		timeout: r.cfg.timeout,
		ceiling: latencyCeiling(r.cfg.timeout),
		hist:    newLatencyHistogram(r.cfg.timeout),
	}
	w.req.SetRequestURI(r.url)
	w.req.Header.SetMethod(r.cfg.method)
	return w
}

func (w *loadWorker) close() {
	w.hc.CloseIdleConnections()
	fasthttp.ReleaseRequest(w.req)
	fasthttp.ReleaseResponse(w.resp)
}

// do sends the request as client xff and returns the answer's status.
func (w *loadWorker) do(xff string) (int, error) {
	w.req.Header.Set("X-Forwarded-For", xff)
	if err := w.hc.DoTimeout(w.req, w.resp, w.timeout); err != nil {
		return 0, err
	}
	return w.resp.StatusCode(), nil
}

// open sends one unmeasured request, which opens the connection.
func (w *loadWorker) open(r *loadRun) error {
	n, ok := r.next()
	if !ok {
		return errors.New("the -requests cap was spent opening connections")
	}
	_, err := w.do(r.addrs[n%int64(len(r.addrs))])
	return err
}

// loop sends requests back to back until to, the cap, or a stop; those
// sent from from on are measured.
func (w *loadWorker) loop(r *loadRun, from, to time.Time) {
	for !r.stop.Load() {
		start := time.Now()
		if !start.Before(to) {
			return
		}
		n, ok := r.next()
		if !ok {
			return
		}
		status, err := w.do(r.addrs[n%int64(len(r.addrs))])
		end := time.Now()
		if err != nil {
			kind := errorKind(err)
			if kind == errRefused {
				r.abort(fmt.Errorf("connection refused mid-run: %w", err))
				return
			}
			if start.Before(from) {
				continue
			}
			w.last = end
			w.errs[kind]++
			if w.firstErr[kind] == nil {
				w.firstErr[kind] = err
			}
			continue
		}
		if start.Before(from) {
			continue
		}
		w.last = end
		if status < 100 || status >= len(w.statuses) {
			status = 0
		}
		w.statuses[status]++
		us := max(end.Sub(start).Microseconds(), 1)
		// Cannot fail: us is within [1, ceiling].
		_ = w.hist.RecordValue(min(us, w.ceiling))
	}
}

// validMethod reports whether m is an HTTP method token (RFC 9110 §5.6.2)
// of at most 32 characters.
func validMethod(m string) bool {
	if m == "" || len(m) > 32 {
		return false
	}
	for _, c := range []byte(m) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validPath reports whether p is an origin-form request target: it starts
// with "/", is printable ASCII without spaces or a fragment, and is at most
// 4096 bytes.
func validPath(p string) bool {
	if p == "" || p[0] != '/' || len(p) > 4096 {
		return false
	}
	for _, c := range []byte(p) {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}
