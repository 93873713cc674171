package main

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/valyala/fasthttp"
)

// The retry-storm scenario (README, "retry-storm"; docs/headers.md,
// "Retry-After jitter"): N clients refused at once by one ordinary rule
// come back when its answer tells them to, and the arrivals per 100 ms
// after that mass refusal show whether they come back together (the 429
// storm) or spread: naive clients that retry exactly at Retry-After, the
// same against a rule with retry_after_jitter, and pacing clients that
// honour RateLimit and Retry-After with full-jitter exponential backoff,
// with and without a retry budget.

const (
	stormDuration    = 3 * time.Minute // -duration default
	stormRequests    = 100_000         // -requests default
	stormMaxClients  = 5000
	stormBin         = 100 * time.Millisecond
	stormWindows     = 3                     // the windows each mode is watched for after its mass refusal
	stormMargin      = 50 * time.Millisecond // the mass refusal's lateness into its window
	stormBackoffCap  = 30 * time.Second      // full jitter's cap
	stormBudgetRatio = 0.1                   // retries a budget allows per first request
	stormBudgetFloor = 10                    // retries a budget allows whatever the requests
)

// stormMode is one kind of client, against the route of its own rule in
// testdata/retry-storm.hcl.
type stormMode struct {
	name   string
	path   string
	pacing bool // full-jitter backoff on top of the edge's waits; else retry exactly at Retry-After
	budget bool // a retry budget (retryBudget)
}

var stormModes = []stormMode{
	{name: "naive", path: "/storm/naive"},
	{name: "naive, retry_after_jitter 100%", path: "/storm/jitter"},
	{name: "pacing", path: "/storm/pacing", pacing: true},
	{name: "pacing, retry budget 10%", path: "/storm/budget", pacing: true, budget: true},
}

// stormAnswer is what a client reads from one answer.
type stormAnswer struct {
	status     int
	retryAfter time.Duration // Retry-After in seconds; 0: absent
	rateLimitT time.Duration // the longest t of the RateLimit members with r=0
	window     time.Duration // the first RateLimit-Policy member's w
	at         time.Time     // when the answer came
}

// parseStormAnswer reads status and headers.
func parseStormAnswer(status int, retryAfter, rateLimit, policy string) stormAnswer {
	a := stormAnswer{status: status}
	if n, err := strconv.ParseInt(strings.TrimSpace(retryAfter), 10, 64); err == nil && n > 0 {
		a.retryAfter = time.Duration(n) * time.Second
	}
	for member := range strings.SplitSeq(rateLimit, ",") {
		var r, t int64 = -1, -1
		for _, p := range strings.Split(member, ";")[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "r":
				r = n
			case "t":
				t = n
			}
		}
		if r == 0 && t > 0 {
			a.rateLimitT = max(a.rateLimitT, time.Duration(t)*time.Second)
		}
	}
	first, _, _ := strings.Cut(policy, ",")
	for _, p := range strings.Split(first, ";")[1:] {
		if v, ok := strings.CutPrefix(strings.TrimSpace(p), "w="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				a.window = time.Duration(n) * time.Second
			}
		}
	}
	return a
}

// retryDelay is how long a client of mode m waits after refusal a, its
// attempt-th (0 for the first refusal), u uniform in [0, 1). A naive
// client waits Retry-After exactly. A pacing client waits the longest of
// Retry-After and the exhausted limits' RateLimit t, and then a full
// jitter on top (AWS Architecture Blog, "Exponential Backoff And Jitter",
// 2015): uniform in [0, min(cap, base × 2^attempt)), base that wait (at
// least 1 s), so it is never earlier than the edge said.
func (m stormMode) retryDelay(a stormAnswer, attempt int, u float64) time.Duration {
	wait := a.retryAfter
	if !m.pacing {
		return wait
	}
	wait = max(wait, a.rateLimitT)
	base := max(wait, time.Second)
	ceil := stormBackoffCap
	if attempt < 16 {
		ceil = min(ceil, base<<attempt)
	}
	return wait + time.Duration(u*float64(ceil))
}

// retryBudget is a token bucket of retries (as Finagle's RetryBudget and
// gRPC's retry throttling): every first request deposits ratio tokens, a
// retry takes one, and a client with none left gives up rather than
// retry, so retries stay under ratio of the requests plus the floor.
type retryBudget struct {
	tokens, ratio float64
}

func newRetryBudget() *retryBudget {
	return &retryBudget{tokens: stormBudgetFloor, ratio: stormBudgetRatio}
}

func (b *retryBudget) deposit() { b.tokens += b.ratio }

func (b *retryBudget) take() bool {
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// stormEvent is a client's next request, due at due.
type stormEvent struct {
	due    time.Time
	client int
}

type stormQueue []stormEvent

func (q stormQueue) Len() int { return len(q) }
func (q stormQueue) Less(i, j int) bool {
	return q[i].due.Before(q[j].due) || q[i].due.Equal(q[j].due) && q[i].client < q[j].client
}
func (q stormQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *stormQueue) Push(x any)   { *q = append(*q, x.(stormEvent)) }
func (q *stormQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// stormClock is the driver's time: the wall clock, or a virtual one
// (tests) that jumps to the next request's due time once every answer is
// in, so a run is the same whatever the machine's speed.
type stormClock struct {
	virtual bool
	now     func() time.Time
	set     func(time.Time) // virtual only
}

// stormSend sends mode's request as client and reads the answer.
type stormSend func(ctx context.Context, path string, client int) (stormAnswer, error)

// stormRun is one mode's run.
type stormRun struct {
	mode             stormMode
	clients          int
	refused          int             // in the mass refusal
	raValues         map[int64]int   // the mass refusal's Retry-After values, seconds → clients
	retries          []time.Duration // every retry's send time after the mass refusal
	firstRetries     []time.Duration // the same for each refused client's first retry
	early            int             // retries sent before the true retry time
	minAfterTrue     time.Duration   // the earliest retry's lead over the true retry time
	admitted, gaveUp int             // admitted in the end; gave up (budget)
	requests         int
	window           time.Duration
}

// peak returns the most retries in one 100 ms bin after the mass
// refusal, and the bins with any.
func (r *stormRun) peak() (peak, bins int) { return stormPeak(r.retries) }

// stormPeak returns the most of ds in one 100 ms bin, and the bins with
// any.
func stormPeak(ds []time.Duration) (peak, bins int) {
	count := map[int64]int{}
	for _, d := range ds {
		b := int64(d / stormBin)
		count[b]++
		peak = max(peak, count[b])
	}
	return peak, len(count)
}

// runStormMode runs mode: n clients at once right after a window start
// (the mass refusal: all but the limit refused), then every client's
// retries until it is admitted or gives up, for stormWindows windows. The
// true retry time is the end of the mass refusal's window: the rule is a
// fixed window of period, one counter for the route.
func runStormMode(ctx context.Context, m stormMode, n int, period time.Duration, maxRequests int, clk stormClock, send stormSend, rng *rand.Rand) (*stormRun, error) {
	run := &stormRun{mode: m, clients: n, raValues: map[int64]int{}, minAfterTrue: -1, window: period}
	now := clk.now()
	// Fixed windows start at multiples of the period since the Unix epoch.
	windowStart := time.Unix(0, now.UnixNano()-now.UnixNano()%int64(period))
	start := windowStart.Add(period + stormMargin)
	trueRetry := start.Add(period - stormMargin)
	stop := start.Add(stormWindows * period)

	var q stormQueue
	for i := range n {
		q = append(q, stormEvent{due: start, client: i})
	}
	heap.Init(&q)
	attempts := make([]int, n)
	var budget *retryBudget
	if m.budget {
		budget = newRetryBudget()
	}

	type result struct {
		client int
		sent   time.Time
		a      stormAnswer
		err    error
	}
	answers := make(chan result, n)
	inflight := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()

	fire := func(now time.Time) error {
		for q.Len() > 0 && !q[0].due.After(now) {
			e := heap.Pop(&q).(stormEvent)
			if run.requests >= maxRequests {
				return fmt.Errorf("retry-storm %s: the run would send more than -requests %d", m.name, maxRequests)
			}
			run.requests++
			sent := now
			if !clk.virtual {
				sent = clk.now()
			}
			if attempts[e.client] == 0 {
				if budget != nil {
					budget.deposit()
				}
			} else {
				d := sent.Sub(start)
				run.retries = append(run.retries, d)
				if attempts[e.client] == 1 {
					run.firstRetries = append(run.firstRetries, d)
				}
				if lead := sent.Sub(trueRetry); lead < 0 {
					run.early++
				} else if run.minAfterTrue < 0 || lead < run.minAfterTrue {
					run.minAfterTrue = lead
				}
			}
			inflight++
			wg.Add(1)
			go func(client int, sent time.Time) {
				defer wg.Done()
				a, err := send(ctx, m.path, client)
				if clk.virtual {
					a.at = sent
				} else {
					a.at = clk.now()
				}
				answers <- result{client, sent, a, err}
			}(e.client, sent)
		}
		return nil
	}

	for q.Len() > 0 || inflight > 0 {
		if clk.virtual {
			if inflight == 0 {
				clk.set(q[0].due)
				if err := fire(q[0].due); err != nil {
					return run, err
				}
				continue
			}
			select {
			case res := <-answers:
				inflight--
				if err := run.answer(res.client, res.a, res.err, attempts, budget, &q, start, stop, rng); err != nil {
					return run, err
				}
			case <-ctx.Done():
				return run, ctx.Err()
			}
			continue
		}
		var tick <-chan time.Time
		if q.Len() > 0 {
			timer.Reset(max(q[0].due.Sub(clk.now()), 0))
			tick = timer.C
		}
		select {
		case res := <-answers:
			inflight--
			if err := run.answer(res.client, res.a, res.err, attempts, budget, &q, start, stop, rng); err != nil {
				return run, err
			}
		case now := <-tick:
			_ = now
			if err := fire(clk.now()); err != nil {
				return run, err
			}
		case <-ctx.Done():
			return run, ctx.Err()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
	return run, nil
}

// answer takes client's answer a: admitted, or refused and scheduled again
// (unless past the run's end, or out of budget).
func (r *stormRun) answer(client int, a stormAnswer, err error, attempts []int, budget *retryBudget, q *stormQueue, start, stop time.Time, rng *rand.Rand) error {
	if err != nil {
		return fmt.Errorf("retry-storm %s: %w", r.mode.name, err)
	}
	first := attempts[client] == 0
	if first && a.window > 0 && a.window != r.window {
		return fmt.Errorf("retry-storm %s: the rule's window is %v (RateLimit-Policy w), -period says %v: run the edge on loadtest/testdata/retry-storm.hcl or match -period to it", r.mode.name, a.window, r.window)
	}
	if a.status != fasthttp.StatusTooManyRequests {
		r.admitted++ // any answer but 429 is the edge's admission (the demo origin's 404 too)
		return nil
	}
	if a.retryAfter <= 0 {
		return fmt.Errorf("retry-storm %s: a 429 without Retry-After: is the route sensitive?", r.mode.name)
	}
	if first {
		r.refused++
		r.raValues[int64(a.retryAfter/time.Second)]++
	}
	due := a.at.Add(r.mode.retryDelay(a, attempts[client], rng.Float64()))
	attempts[client]++
	if !due.Before(stop) {
		return nil
	}
	if budget != nil && !budget.take() {
		r.gaveUp++
		return nil
	}
	heap.Push(q, stormEvent{due: due, client: client})
	return nil
}

// stormSender sends requests over one connection per client.
func stormSender(cfg config, n int) stormSend {
	hc := &fasthttp.HostClient{
		Addr:                      cfg.target.addr,
		Name:                      "edge-loadtest",
		MaxConns:                  n,
		MaxIdemponentCallAttempts: 1, // the scenario's clients do their own retrying
		ReadTimeout:               cfg.timeout,
		WriteTimeout:              cfg.timeout,
		DisablePathNormalizing:    true,
	}
	return func(ctx context.Context, path string, client int) (stormAnswer, error) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(cfg.target.base + path)
		// Distinct clients of 198.18.0.0/15; the rule counts the route, so
		// they share one counter.
		req.Header.Set("X-Forwarded-For", "198.18."+strconv.Itoa(client>>8)+"."+strconv.Itoa(client&0xff))
		if err := hc.DoTimeout(req, resp, cfg.timeout); err != nil {
			return stormAnswer{}, err
		}
		return parseStormAnswer(resp.StatusCode(), string(resp.Header.Peek("Retry-After")),
			string(resp.Header.Peek("RateLimit")), string(resp.Header.Peek("RateLimit-Policy"))), nil
	}
}

// runRetryStorm runs every mode in turn against the edge.
func runRetryStorm(ctx context.Context, cfg config) error {
	n, period := cfg.clients, cfg.storm.period
	if n < 2 || n > stormMaxClients {
		return fmt.Errorf("retry-storm: -clients %d must be 2 to %d", n, stormMaxClients)
	}
	if period < time.Second || period > time.Minute || period%time.Second != 0 {
		return fmt.Errorf("retry-storm: -period %v must be whole seconds, 1s to 1m", period)
	}
	if need := time.Duration(len(stormModes)) * (stormWindows + 2) * period; need > cfg.duration {
		return fmt.Errorf("retry-storm: the modes need about %v, more than -duration %v", need, cfg.duration)
	}
	clk := stormClock{now: time.Now}
	send := stormSender(cfg, n)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	var runs []*stormRun
	left := cfg.requests
	for _, m := range stormModes {
		r, err := runStormMode(ctx, m, n, period, left, clk, send, rng)
		if err != nil {
			return err
		}
		left -= r.requests
		runs = append(runs, r)
	}
	writeStormReport(cfg, runs)
	for _, r := range runs {
		if r.early > 0 {
			return fmt.Errorf("%w: %s: %d retries came before the true retry time, so the edge's Retry-After was early", errMismatch, r.mode.name, r.early)
		}
	}
	return nil
}

// writeStormReport prints one row per mode.
func writeStormReport(cfg config, runs []*stormRun) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(cfg.stdout, "retry-storm: %d clients at once on one counter of a fixed window of %v, watched for %d windows after the mass refusal; arrivals in 100 ms bins from it\n",
		runs[0].clients, runs[0].window, stormWindows)
	tw := tabwriter.NewWriter(cfg.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\trefused\tRetry-After (s: clients)\tretries\tpeak/100ms\tbins with retries\tfirst retries' peak/100ms\tfirst retry after true time\tearly\tadmitted\tgave up")
	for _, r := range runs {
		peak, bins := r.peak()
		var ras []string
		for s := int64(0); s <= 120; s++ {
			if c := r.raValues[s]; c > 0 {
				ras = append(ras, fmt.Sprintf("%d:%d", s, c))
			}
		}
		first := "-"
		if r.minAfterTrue >= 0 {
			first = "+" + r.minAfterTrue.Round(time.Millisecond).String()
		}
		fpeak, _ := stormPeak(r.firstRetries)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\n", r.mode.name, r.refused, strings.Join(ras, " "), len(r.retries), peak, bins, fpeak, first, r.early, r.admitted, r.gaveUp)
	}
	_ = tw.Flush()
}

// stormParams are retry-storm's flags.
type stormParams struct {
	period time.Duration // the rules' fixed window
}
