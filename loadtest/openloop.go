package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The load engine of the plain and mixed scenarios (issue 16): a closed
// loop (cfg.connections clients, each sending its next request as soon as
// the previous one is answered, as the throughput scenario does) or an
// open loop (a fixed arrival rate, -rate), over a pool of senders, one
// connection each.
//
// Open loop: request k of the schedule is due at t0 + k ÷ rate, whatever
// happened to the ones before it. A free sender takes the next request,
// waits until it is due (never sends early), sends it, and its latency is
// measured from when it was due, not from when it was sent. When every
// sender is busy, because the target stalls, the requests that fall due
// wait for a free sender and that wait is in their latency: a stall shows
// in the percentiles as the clients of a real service would feel it,
// instead of the few requests that were in flight (coordinated omission,
// as wrk2 corrects it and wrk does not). A request that times out counts
// at its lower bound (from due to the timeout); one still unsent when the
// window's drain ends (the window's end plus -timeout) is missed, and
// counts at its lower bound too (from due to the drain's end), so a
// target that stops answering cannot empty the percentiles.
//
// Both loops are bounded: the measured window (-warmup then -duration),
// the -requests cap, and the drain.

// genSpec is one run of the engine.
type genSpec struct {
	rate     float64       // open loop: requests per second; 0: closed loop
	warmup   time.Duration // unmeasured load before the window
	duration time.Duration // the measured window
	timeout  time.Duration // per request; open loop: also the drain after the window
	limit    int64         // most requests sent, opening requests included
	kinds    int           // request kinds (mixed); 1 for plain
	// kindOf returns request n's kind, in [0, kinds); nil: kind 0.
	kindOf func(n int64) int
}

// open reports whether s is an open loop.
func (s genSpec) open() bool { return s.rate > 0 }

// genSender sends requests on its own connection, from one goroutine.
type genSender interface {
	// do sends request n and returns its answer's status, or why there
	// is none.
	do(n int64) (status int, err error)
}

// kindTally is what one kind of request got.
type kindTally struct {
	statuses [600]int64              // by status; 0 for codes outside 100-599
	errs     int64                   // no answer
	hist     *hdrhistogram.Histogram // latency µs, at 2 significant digits
}

// genTally is one sender's counts, merged after the run.
type genTally struct {
	statuses [600]int64 // by status; 0 for codes outside 100-599
	errs     [numErrKinds]int64
	firstErr [numErrKinds]error
	missed   int64 // open loop: due in the window, never sent before the drain ended
	bounded  int64 // open loop: latencies recorded at a lower bound (timeouts and missed)
	// hist is the latency, µs: closed loop from the send to the end of
	// the answer, answered requests only; open loop from when the request
	// was due, timeouts and missed requests at their lower bounds.
	hist *hdrhistogram.Histogram
	// service (open loop): from the actual send to the end of the answer.
	service *hdrhistogram.Histogram
	// lag (open loop): from when the request was due to its send, the
	// wait for a free sender plus the tool's own timer lateness.
	lag   *hdrhistogram.Histogram
	kinds []kindTally // per kind, when there are several
	last  time.Time   // the last measured request's end
}

func newGenTally(s genSpec) *genTally {
	t := &genTally{hist: newLatencyHistogram(s.timeout + s.duration)}
	if s.open() {
		t.service = newLatencyHistogram(s.timeout)
		t.lag = newLatencyHistogram(s.timeout + s.duration)
	}
	if s.kinds > 1 {
		t.kinds = make([]kindTally, s.kinds)
		for i := range t.kinds {
			t.kinds[i].hist = hdrhistogram.New(1, latencyCeiling(s.timeout+s.duration), 2)
		}
	}
	return t
}

// record adds a value to h, clamped to its range.
func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(d.Microseconds(), 1)
	_ = h.RecordValue(min(us, h.HighestTrackableValue())) // cannot fail: within range
}

// genResult is a run's merged counts.
type genResult struct {
	genTally
	spec    genSpec
	due     int64         // open loop: requests due in the window
	capped  bool          // the -requests cap ended the run early
	elapsed time.Duration // from the window's start to the last measured answer
}

// answered returns the measured requests that got an answer.
func (r *genResult) answered() int64 { return sumCounts(r.statuses[:]) }

// failed returns the measured requests that got no answer (missed
// excluded).
func (r *genResult) failed() int64 { return sumCounts(r.errs[:]) }

// sumCounts adds up counts by status or by error kind.
func sumCounts(counts []int64) int64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// rate returns answered requests per second over the elapsed time.
func (r *genResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.answered()) / r.elapsed.Seconds()
}

// count2xx returns the answers with a status in 200-299.
func (r *genResult) count2xx() int64 {
	var n int64
	for c := 200; c < 300; c++ {
		n += r.statuses[c]
	}
	return n
}

// genRun is what the senders of one run share.
type genRun struct {
	spec genSpec
	next atomic.Int64 // the next request's number
	stop atomic.Bool
	cap  atomic.Bool

	mu   sync.Mutex
	fail error
}

// take returns the next request's number, or false once the cap is spent
// (which it records: the cap ended the run early).
func (g *genRun) take() (int64, bool) {
	n := g.next.Add(1) - 1
	if n >= g.spec.limit {
		g.cap.Store(true)
		return 0, false
	}
	return n, true
}

func (g *genRun) abort(err error) {
	g.mu.Lock()
	if g.fail == nil {
		g.fail = err
	}
	g.mu.Unlock()
	g.stop.Store(true)
}

// generate runs spec over senders, one goroutine each: it opens each
// connection with one unmeasured request, then loads for the warm-up and
// the window, and returns the merged counts. A refused connection (nothing
// listening) voids the run; so does a run in which no measured request
// got an answer.
func generate(ctx context.Context, spec genSpec, senders []genSender) (*genResult, error) {
	if len(senders) == 0 {
		return nil, errors.New("no connections")
	}
	if spec.kinds < 1 {
		spec.kinds = 1
	}
	g := &genRun{spec: spec}
	stopOnDone := context.AfterFunc(ctx, func() { g.stop.Store(true) })
	defer stopOnDone()

	// Open every connection before the clock starts.
	errs := make([]error, len(senders))
	var wg sync.WaitGroup
	for i, s := range senders {
		wg.Go(func() {
			n, ok := g.take()
			if !ok {
				errs[i] = errors.New("the -requests cap was spent opening connections")
				return
			}
			_, errs[i] = s.do(n)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("opening connections: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("opening connections: %w", err)
	}

	t0 := time.Now()
	from := t0.Add(spec.warmup)
	to := from.Add(spec.duration)
	base := g.next.Load() // the schedule's request 0
	tallies := make([]*genTally, len(senders))
	for i, s := range senders {
		tallies[i] = newGenTally(spec)
		w := &genWorker{g: g, s: s, t: tallies[i]}
		if spec.open() {
			wg.Go(func() { w.openLoop(ctx, t0, from, to, base) })
		} else {
			wg.Go(func() { w.closedLoop(from, to) })
		}
	}
	wg.Wait()
	if g.fail != nil {
		return nil, g.fail
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := &genResult{spec: spec, capped: g.cap.Load()}
	res.genTally = *newGenTally(spec)
	for _, t := range tallies {
		res.merge(t)
	}
	if spec.open() {
		// Requests due in the window: those whose due time is in
		// [from, to), as far as the cap let the schedule go.
		first := firstDueAtOrAfter(spec.rate, spec.warmup)
		end := min(firstDueAtOrAfter(spec.rate, spec.warmup+spec.duration), spec.limit-base)
		res.due = max(end-first, 0)
	}
	if res.last.IsZero() {
		if res.capped {
			return nil, errors.New("the -requests cap was spent before the warm-up ended")
		}
		return nil, errors.New("no request completed in the measured window")
	}
	res.elapsed = res.last.Sub(from)
	if res.answered() == 0 {
		return nil, fmt.Errorf("all %d measured requests failed (first error: %s)", res.failed()+res.missed, res.firstError())
	}
	return res, nil
}

// merge adds t's counts to r's.
func (r *genResult) merge(t *genTally) {
	for c, n := range t.statuses {
		r.statuses[c] += n
	}
	for k, n := range t.errs {
		r.errs[k] += n
		if r.firstErr[k] == nil {
			r.firstErr[k] = t.firstErr[k]
		}
	}
	r.missed += t.missed
	r.bounded += t.bounded
	r.hist.Merge(t.hist)
	if t.service != nil {
		r.service.Merge(t.service)
		r.lag.Merge(t.lag)
	}
	for i := range t.kinds {
		for c, n := range t.kinds[i].statuses {
			r.kinds[i].statuses[c] += n
		}
		r.kinds[i].errs += t.kinds[i].errs
		r.kinds[i].hist.Merge(t.kinds[i].hist)
	}
	if t.last.After(r.last) {
		r.last = t.last
	}
}

// firstError returns the first recorded error, by kind, or "none".
func (r *genResult) firstError() string {
	for _, err := range r.firstErr {
		if err != nil {
			return err.Error()
		}
	}
	return "none"
}

// genWorker is one sender's loop.
type genWorker struct {
	g *genRun
	s genSender
	t *genTally
}

func (w *genWorker) kind(n int64) int {
	if w.g.spec.kindOf == nil {
		return 0
	}
	return w.g.spec.kindOf(n)
}

// closedLoop sends back to back until to, the cap or a stop; requests sent
// from from on are measured, from their send.
func (w *genWorker) closedLoop(from, to time.Time) {
	for !w.g.stop.Load() {
		start := time.Now()
		if !start.Before(to) {
			return
		}
		n, ok := w.g.take()
		if !ok {
			return
		}
		status, err := w.s.do(n)
		end := time.Now()
		if start.Before(from) {
			if err != nil && errorKind(err) == errRefused {
				w.g.abort(fmt.Errorf("connection refused mid-run: %w", err))
				return
			}
			continue
		}
		if !w.answer(n, status, err, end, end.Sub(start), false) {
			return
		}
	}
}

// openLoop sends the schedule's requests (request base+k due at
// t0 + k ÷ rate) until the first one due at or after to, the cap or a
// stop. Those due from from on are measured, from when they were due. A
// request taken after the drain's end (to + timeout) is not sent: it is
// missed.
func (w *genWorker) openLoop(ctx context.Context, t0, from, to time.Time, base int64) {
	rate := w.g.spec.rate
	drain := to.Add(w.g.spec.timeout)
	for !w.g.stop.Load() {
		n := w.g.next.Add(1) - 1
		due := t0.Add(dueOffset(rate, n-base))
		if !due.Before(to) {
			return // the schedule's end: each sender takes one number past it
		}
		if n >= w.g.spec.limit {
			w.g.cap.Store(true) // a request the schedule wanted, over the cap
			return
		}
		// Never early; a timer fires late by up to about a millisecond on
		// a busy machine, and that lateness is in the latency and in the
		// send lag the report shows apart. No spinning: a pool of
		// spinning senders would take the CPU the target needs.
		if err := sleepUntil(ctx, due); err != nil {
			return
		}
		measured := !due.Before(from)
		start := time.Now()
		if !start.Before(drain) {
			if measured {
				w.t.missed++
				w.t.bounded++
				record(w.t.hist, drain.Sub(due))
				if w.t.kinds != nil {
					k := &w.t.kinds[w.kind(n)]
					k.errs++
					record(k.hist, drain.Sub(due))
				}
				if drain.After(w.t.last) {
					w.t.last = drain
				}
			}
			continue
		}
		status, err := w.s.do(n)
		end := time.Now()
		if !measured {
			if err != nil && errorKind(err) == errRefused {
				w.g.abort(fmt.Errorf("connection refused mid-run: %w", err))
				return
			}
			continue
		}
		record(w.t.lag, start.Sub(due))
		if err == nil {
			record(w.t.service, end.Sub(start))
		}
		if !w.answer(n, status, err, end, end.Sub(due), true) {
			return
		}
	}
}

// answer records measured request n's outcome, ending at end, with its
// latency; open says whether a timeout counts at its lower bound. It
// returns false when the run must stop (a refused connection).
func (w *genWorker) answer(n int64, status int, err error, end time.Time, latency time.Duration, open bool) bool {
	var k *kindTally
	if w.t.kinds != nil {
		k = &w.t.kinds[w.kind(n)]
	}
	if err != nil {
		kind := errorKind(err)
		if kind == errRefused {
			w.g.abort(fmt.Errorf("connection refused mid-run: %w", err))
			return false
		}
		w.t.errs[kind]++
		if w.t.firstErr[kind] == nil {
			w.t.firstErr[kind] = err
		}
		if k != nil {
			k.errs++
		}
		if open && kind == errTimeout {
			w.t.bounded++
			record(w.t.hist, latency)
			if k != nil {
				record(k.hist, latency)
			}
		}
		w.t.last = end
		return true
	}
	if status < 100 || status >= len(w.t.statuses) {
		status = 0
	}
	w.t.statuses[status]++
	record(w.t.hist, latency)
	if k != nil {
		k.statuses[status]++
		record(k.hist, latency)
	}
	w.t.last = end
	return true
}

// dueOffset is when request k of the schedule is due, after its start:
// k ÷ rate seconds, truncated to the nanosecond.
func dueOffset(rate float64, k int64) time.Duration {
	return time.Duration(float64(k) / rate * float64(time.Second))
}

// firstDueAtOrAfter returns the first k whose dueOffset is at least d.
func firstDueAtOrAfter(rate float64, d time.Duration) int64 {
	k := int64(math.Ceil(d.Seconds() * rate))
	for k > 0 && dueOffset(rate, k-1) >= d {
		k--
	}
	for dueOffset(rate, k) < d {
		k++
	}
	return k
}
