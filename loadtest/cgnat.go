package main

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The cgnat-crowd scenario (issue 4): a crowd of visitors behind one
// public address, each with its own visitor ID (the edge's signed cookie)
// and each at a share of its own limit, must all be served; one attacker
// behind the same address that drops its cookie on every request must be
// held to what the IP's cookieless bucket and what is left of the IP's
// mint budget allow.
//
// The scenario knows the policy only through its flags (cgnatParams),
// whose defaults are the numbers of loadtest/testdata/cgnat-crowd.hcl.

// mintPath is what each visitor fetches in phase 1 to get its ID: a path
// no rule of cgnat-crowd.hcl limits, so fetching 500 IDs spends no /api/*
// budget (the edge mints on any forwarded answer), and one the demo origin
// answers 200.
const mintPath = warmupPath

// Bounds on the cgnat-crowd flags.
const (
	maxVisitors       = 10_000
	maxCgnatPeriod    = time.Minute
	maxAttackRequests = 10_000
)

// clockAllowance is added to the measured spans before computing the
// attacker's bounds. The tool measures with its monotonic clock from
// before its first request was sent to after its last answer arrived, so
// the edge's decisions lie inside that span; but the edge reads the wall
// clock, which NTP may slew, and this covers that.
const clockAllowance = 5 * time.Millisecond

// cgnatParams are the policy's numbers as the scenario assumes them, and
// the shape of the crowd and the attack.
type cgnatParams struct {
	visitors   int           // visitors in the crowd, one ID each
	share      float64       // of its limit each visitor sends in the period
	limit      int64         // the /api/* rule's limit per period (and burst) per visitor, and of the cookieless bucket
	period     time.Duration // the rule's period; phase 2 lasts one
	ipCeiling  int64         // the rule's ip_ceiling
	mintLimit  int64         // visitor { mint_limit }
	mintPeriod time.Duration // visitor { mint_period }
	attacks    int           // requests the attacker sends, spread over the period
	cookie     string        // visitor { cookie }
}

// defaultCgnatParams matches loadtest/testdata/cgnat-crowd.hcl.
var defaultCgnatParams = cgnatParams{
	visitors:   500,
	share:      0.8,
	limit:      10,
	period:     10 * time.Second,
	ipCeiling:  4500,
	mintLimit:  600,
	mintPeriod: time.Minute,
	attacks:    200,
	cookie:     "__edge_vid",
}

// perVisitor is what each visitor sends in phase 2: ⌊share × limit⌋.
func (p cgnatParams) perVisitor() int64 {
	return int64(math.Floor(p.share*float64(p.limit) + 1e-9))
}

// crowdRequests is the crowd's phase 2: visitors × perVisitor.
func (p cgnatParams) crowdRequests() int64 { return int64(p.visitors) * p.perVisitor() }

// requests is every request the scenario sends.
func (p cgnatParams) requests() int64 {
	return int64(p.visitors) + p.crowdRequests() + int64(p.attacks)
}

// check reports a flag out of range, naming it.
func (p cgnatParams) check() error {
	switch {
	case p.visitors < 1 || p.visitors > maxVisitors:
		return fmt.Errorf("-visitors must be in [1, %d], got %d", maxVisitors, p.visitors)
	case math.IsNaN(p.share) || p.share <= 0 || p.share > 1:
		return fmt.Errorf("-visitor-share must be in (0, 1], got %v", p.share)
	case p.limit < 1 || p.limit > 1_000_000:
		return fmt.Errorf("-limit must be in [1, 1000000], got %d", p.limit)
	case p.perVisitor() < 1:
		return fmt.Errorf("-visitor-share %v of -limit %d is less than one request", p.share, p.limit)
	case p.period < time.Millisecond || p.period > maxCgnatPeriod:
		return fmt.Errorf("-period must be in [1ms, %v], got %v", maxCgnatPeriod, p.period)
	case p.period.Microseconds()/p.limit < 1:
		return fmt.Errorf("-limit %d per -period %v is more than one per microsecond", p.limit, p.period)
	case p.ipCeiling < p.limit:
		return fmt.Errorf("-ip-ceiling must be at least -limit %d, got %d", p.limit, p.ipCeiling)
	case p.mintLimit < 1:
		return fmt.Errorf("-mint-limit must be at least 1, got %d", p.mintLimit)
	case p.mintPeriod <= 0 || p.mintPeriod.Microseconds()/p.mintLimit < 1:
		return fmt.Errorf("-mint-period must be positive and at least -mint-limit microseconds, got %v", p.mintPeriod)
	case p.attacks < 0 || p.attacks > maxAttackRequests:
		return fmt.Errorf("-attacker-requests must be in [0, %d], got %d", maxAttackRequests, p.attacks)
	case !validCookieName(p.cookie):
		return fmt.Errorf("-cookie %q is not a cookie name", p.cookie)
	}
	return nil
}

// warnings lists what makes the expected outcome impossible with these
// numbers, so that a refusal is not blamed on the edge.
func (p cgnatParams) warnings() []string {
	var out []string
	if int64(p.visitors) > p.mintLimit {
		out = append(out, fmt.Sprintf("%d visitors need more IDs than -mint-limit %d gives at once: some may get none", p.visitors, p.mintLimit))
	}
	// The attacker can pass at most its burst and one period of refill.
	if need := p.crowdRequests() + 2*p.limit; need > p.ipCeiling {
		out = append(out, fmt.Sprintf("the crowd's %d requests and the attacker's up to %d passes exceed -ip-ceiling %d: some crowd requests may be refused",
			p.crowdRequests(), 2*p.limit, p.ipCeiling))
	}
	return out
}

// validCookieName reports whether s is an RFC 6265 cookie name (a token).
func validCookieName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// gcraAllowance is the most requests a GCRA bucket of limit per period
// with a burst of burst lets through within elapsed of the first of them,
// when it was empty before: burst + ⌊elapsed / T⌋, with the emission
// interval T = period / limit in whole microseconds, as the edge computes
// it. (A request is allowed when the bucket's theoretical arrival time,
// pushed T further, is at most burst × T ahead of now; after n allowed
// requests from an empty bucket at s it is at least s + n×T, so
// n ≤ burst + (now − s) / T.)
func gcraAllowance(limit, burst int64, period, elapsed time.Duration) int64 {
	t := max(period.Microseconds()/max(limit, 1), 1)
	return burst + max(elapsed.Microseconds(), 0)/t
}

// emission is a GCRA bucket's emission interval, as gcraAllowance uses it.
func emission(limit int64, period time.Duration) time.Duration {
	return time.Duration(max(period.Microseconds()/max(limit, 1), 1)) * time.Microsecond
}

// attackerBound is what the cookie-cycling attacker can get at most.
type attackerBound struct {
	passSpan  time.Duration // the attack's span, clock allowance included
	passes    int64         // the cookieless bucket's allowance over passSpan
	mintSpan  time.Duration // from the crowd's first ID request to the attack's end, allowance included
	mintTotal int64         // the mint budget's allowance over mintSpan
	crowdIDs  int64         // IDs the crowd was given
	mintLeft  int64         // mintTotal − crowdIDs, at least 0
	cookies   int64         // min(passes, mintLeft): an ID is minted only on a forwarded answer
}

// attackerBounds computes the attacker's bounds from the policy's numbers.
// Every attacker request goes to the limited path without a cookie, so it
// is decided by the IP's cookieless bucket (the rule's own limit and
// burst), empty when the attack starts (phase 1 fetched IDs from a path no
// rule limits); an ID can be minted only on a request that is forwarded,
// and only while the IP's mint budget, of which the crowd took its IDs,
// allows. attackSpan is the attack's first send to its last answer,
// mintSpan the crowd's first ID request to the same.
func attackerBounds(p cgnatParams, attackSpan, mintSpan time.Duration, crowdIDs int64) attackerBound {
	b := attackerBound{
		passSpan: attackSpan + clockAllowance,
		mintSpan: mintSpan + clockAllowance,
		crowdIDs: crowdIDs,
	}
	b.passes = gcraAllowance(p.limit, p.limit, p.period, b.passSpan)
	b.mintTotal = gcraAllowance(p.mintLimit, p.mintLimit, p.mintPeriod, b.mintSpan)
	b.mintLeft = max(b.mintTotal-crowdIDs, 0)
	b.cookies = min(b.passes, b.mintLeft)
	return b
}

// phase1Result is the visitors' ID fetch.
type phase1Result struct {
	sent     int64
	cookies  int64         // visitors that got an ID
	statuses map[int]int64 // answers by status
	elapsed  time.Duration
}

// crowdResult is the crowd's phase 2.
type crowdResult struct {
	planned         int64
	sent            int64
	served          int64         // 200
	refused         int64         // 429
	other           map[int]int64 // any other status
	reissued        int64         // answers carrying a new ID: the edge did not accept the visitor's cookie
	visitorsRefused int           // visitors refused at least once
	maxLate         time.Duration // the latest send relative to its schedule
	maxLatency      time.Duration // the slowest answer
	elapsed         time.Duration // phase 2's start to the crowd's last answer
}

// otherCount returns the answers with a status other than 200 and 429.
func otherCount(m map[int]int64) int64 {
	var n int64
	for _, c := range m {
		n += c
	}
	return n
}

// attackResult is the attacker's phase 2.
type attackResult struct {
	sent    int64
	passes  int64 // 200
	refused int64 // 429
	other   map[int]int64
	cookies int64         // answers carrying a new ID
	elapsed time.Duration // first send to last answer
	end     time.Time     // the last answer
}

// cgnatResult is a whole run.
type cgnatResult struct {
	p           cgnatParams
	target      string
	client      netip.Addr
	path        string
	connections int
	phase1      phase1Result
	ran2        bool // phase 2 ran (phase 1 gave every visitor an ID)
	crowd       crowdResult
	attack      attackResult
	bound       attackerBound
}

// failures returns why the run fails, empty when it passes: a visitor
// without an ID, a crowd request not served (or given a new ID), an
// attacker above either bound.
func (r *cgnatResult) failures() []string {
	var out []string
	if r.phase1.cookies < int64(r.p.visitors) {
		out = append(out, fmt.Sprintf("only %d of %d visitors got an ID", r.phase1.cookies, r.p.visitors))
	}
	if !r.ran2 {
		return out
	}
	c := &r.crowd
	if c.served != c.planned {
		out = append(out, fmt.Sprintf("%d of %d crowd requests served (%d refused, %d other)", c.served, c.planned, c.refused, otherCount(c.other)))
	}
	if c.reissued > 0 {
		out = append(out, fmt.Sprintf("%d crowd answers carried a new ID: the edge did not accept the visitors' cookies", c.reissued))
	}
	a, b := &r.attack, &r.bound
	if a.passes > b.passes {
		out = append(out, fmt.Sprintf("the attacker passed %d times, over its bound %d", a.passes, b.passes))
	}
	if a.cookies > b.cookies {
		out = append(out, fmt.Sprintf("the attacker got %d IDs, over its bound %d", a.cookies, b.cookies))
	}
	return out
}

// runCgnatCrowd runs the scenario: phase 1 gives each visitor its ID,
// phase 2 loads one period with the crowd and the attacker at once.
func runCgnatCrowd(ctx context.Context, cfg config) error {
	p := cfg.cgnat
	if need := p.requests(); need > int64(cfg.requests) {
		return fmt.Errorf("the scenario needs %d requests (%d IDs, %d crowd, %d attacker), over -requests %d",
			need, p.visitors, p.crowdRequests(), p.attacks, cfg.requests)
	}
	if need := p.period + 3*cfg.timeout; need > cfg.duration {
		return fmt.Errorf("-duration %v leaves no room for one -period %v and the ID fetch (want at least %v)", cfg.duration, p.period, need)
	}
	for _, w := range p.warnings() {
		fmt.Fprintf(cfg.stderr, "loadtest: warning: %s\n", w)
	}
	if err := probe(ctx, cfg.target, cfg.timeout); err != nil {
		return err
	}

	// One public address per run, fresh, so counters an earlier run left
	// (the IP's ceiling, cookieless bucket and mint budget) do not count.
	client := randomClientAddrs(1)[0]
	res := &cgnatResult{
		p:           p,
		target:      cfg.target.base,
		client:      client,
		path:        cfg.path,
		connections: cfg.connections,
	}
	pool := make([]*edgeClient, min(cfg.connections, p.visitors))
	for i := range pool {
		pool[i] = newEdgeClient(cfg, client, p.period+2*cfg.timeout)
		defer pool[i].close()
	}

	start := time.Now()
	ids, err := fetchIDs(ctx, cfg, pool, &res.phase1)
	if err != nil {
		return err
	}
	if res.phase1.cookies == int64(p.visitors) {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < p.period+cfg.timeout+startLead {
			return fmt.Errorf("phase 1 took %v: the -duration budget has no room left for one -period %v; raise -duration",
				res.phase1.elapsed.Round(time.Millisecond), p.period)
		}
		res.ran2 = true
		attacker := newEdgeClient(cfg, client, p.period+2*cfg.timeout)
		defer attacker.close()
		if err := loadPeriod(ctx, cfg, pool, attacker, ids, res); err != nil {
			return err
		}
		end := res.attack.end
		if end.IsZero() { // no attack
			end = time.Now()
		}
		res.bound = attackerBounds(p, res.attack.elapsed, end.Sub(start), res.phase1.cookies+res.crowd.reissued)
	}

	if err := writeCgnatReport(cfg.stdout, res); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if f := res.failures(); len(f) > 0 {
		return fmt.Errorf("%w: %s", errMismatch, strings.Join(f, "; "))
	}
	return nil
}

// fetchIDs sends one request without a cookie per visitor, to mintPath,
// over the pool, and returns each visitor's ID ("" for none).
func fetchIDs(ctx context.Context, cfg config, pool []*edgeClient, res *phase1Result) ([]string, error) {
	p := cfg.cgnat
	ids := make([]string, p.visitors)
	url := cfg.target.base + mintPath
	var next atomic.Int64
	var run runErr
	statuses := make([]map[int]int64, len(pool))
	start := time.Now()
	var wg sync.WaitGroup
	for w, c := range pool {
		statuses[w] = make(map[int]int64)
		wg.Go(func() {
			for !run.stopped(ctx) {
				v := next.Add(1) - 1
				if v >= int64(p.visitors) {
					return
				}
				status, id, err := c.get(url, "")
				if err != nil {
					run.fail(fmt.Errorf("phase 1, visitor %d's ID: %w", v+1, err))
					return
				}
				statuses[w][status]++
				ids[v] = id
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if err := run.err(ctx); err != nil {
		return nil, err
	}
	res.statuses = make(map[int]int64)
	for _, m := range statuses {
		for s, n := range m {
			res.statuses[s] += n
			res.sent += n
		}
	}
	for _, id := range ids {
		if id != "" {
			res.cookies++
		}
	}
	return ids, nil
}

// loadPeriod is phase 2: over one period from t0, the crowd's requests go
// out in an even stream (request i at t0 + i × period / n, visitor i mod
// visitors, so each visitor's requests are period / perVisitor apart) over
// the pool, and the attacker's, also evenly spread, on a connection of its
// own, each without a cookie.
func loadPeriod(ctx context.Context, cfg config, pool []*edgeClient, attacker *edgeClient, ids []string, res *cgnatResult) error {
	p := cfg.cgnat
	n := p.crowdRequests()
	url := cfg.target.base + cfg.path
	t0 := time.Now().Add(startLead)
	var run runErr
	var wg sync.WaitGroup

	type tally struct {
		statuses map[int]int64
		reissued int64
		maxLate  time.Duration
		maxLat   time.Duration
		last     time.Time
	}
	tallies := make([]tally, len(pool))
	refusedBy := make([]atomic.Bool, p.visitors)
	var next atomic.Int64
	for w, c := range pool {
		tl := &tallies[w]
		tl.statuses = make(map[int]int64)
		wg.Go(func() {
			for !run.stopped(ctx) {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				v := i % int64(p.visitors)
				due := t0.Add(time.Duration(float64(p.period) * float64(i) / float64(n)))
				if err := sleepUntil(ctx, due); err != nil {
					run.fail(fmt.Errorf("phase 2: %w", err))
					return
				}
				sent := time.Now()
				status, id, err := c.get(url, ids[v])
				if err != nil {
					run.fail(fmt.Errorf("phase 2, visitor %d's request %d: %w", v+1, i/int64(p.visitors)+1, err))
					return
				}
				tl.last = time.Now()
				tl.maxLate = max(tl.maxLate, sent.Sub(due))
				tl.maxLat = max(tl.maxLat, tl.last.Sub(sent))
				tl.statuses[status]++
				if id != "" {
					tl.reissued++
				}
				if status == fasthttp.StatusTooManyRequests {
					refusedBy[v].Store(true)
				}
			}
		})
	}

	a := &res.attack
	a.other = make(map[int]int64)
	wg.Go(func() {
		var first time.Time
		for k := range p.attacks {
			if run.stopped(ctx) {
				return
			}
			due := t0.Add(time.Duration(float64(p.period) * float64(k) / float64(p.attacks)))
			if err := sleepUntil(ctx, due); err != nil {
				run.fail(fmt.Errorf("phase 2: %w", err))
				return
			}
			if k == 0 {
				first = time.Now()
			}
			// Cookie cycling: never send the ID just received.
			status, id, err := attacker.get(url, "")
			if err != nil {
				run.fail(fmt.Errorf("phase 2, attacker's request %d: %w", k+1, err))
				return
			}
			a.end = time.Now()
			a.elapsed = a.end.Sub(first)
			a.sent++
			switch status {
			case fasthttp.StatusOK:
				a.passes++
			case fasthttp.StatusTooManyRequests:
				a.refused++
			default:
				a.other[status]++
			}
			if id != "" {
				a.cookies++
			}
		}
	})
	wg.Wait()
	if err := run.err(ctx); err != nil {
		return err
	}

	c := &res.crowd
	c.planned = n
	c.other = make(map[int]int64)
	var last time.Time
	for _, tl := range tallies {
		for s, k := range tl.statuses {
			c.sent += k
			switch s {
			case fasthttp.StatusOK:
				c.served += k
			case fasthttp.StatusTooManyRequests:
				c.refused += k
			default:
				c.other[s] += k
			}
		}
		c.reissued += tl.reissued
		c.maxLate = max(c.maxLate, tl.maxLate)
		c.maxLatency = max(c.maxLatency, tl.maxLat)
		if tl.last.After(last) {
			last = tl.last
		}
	}
	if !last.IsZero() {
		c.elapsed = last.Sub(t0)
	}
	for i := range refusedBy {
		if refusedBy[i].Load() {
			c.visitorsRefused++
		}
	}
	return nil
}

// runErr is the first error of a run's goroutines; it stops the others.
type runErr struct {
	mu    sync.Mutex
	first error
	stop  atomic.Bool
}

func (r *runErr) fail(err error) {
	r.mu.Lock()
	if r.first == nil {
		r.first = err
	}
	r.mu.Unlock()
	r.stop.Store(true)
}

func (r *runErr) stopped(ctx context.Context) bool { return r.stop.Load() || ctx.Err() != nil }

// err returns the first error, or ctx's.
func (r *runErr) err(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first != nil {
		return r.first
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the -duration budget ran out: %w", err)
	}
	return nil
}

// sleepUntil returns once the clock has reached t, or ctx's error. Unlike
// waitUntil it does not spin: the crowd's timing has slack (a visitor's
// requests fit its burst wherever they fall), and dozens of spinning
// connections would take CPU from the edge on the same machine.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// edgeClient is one connection to the edge, used by one goroutine, always
// speaking as the NAT's public address.
type edgeClient struct {
	hc      *fasthttp.HostClient
	req     *fasthttp.Request
	resp    *fasthttp.Response
	xff     string
	cookie  string
	timeout time.Duration
}

func newEdgeClient(cfg config, client netip.Addr, idle time.Duration) *edgeClient {
	return &edgeClient{
		hc: &fasthttp.HostClient{
			Addr:                      cfg.target.addr,
			Name:                      "edge-loadtest",
			MaxConns:                  1,
			MaxIdleConnDuration:       idle,
			MaxIdemponentCallAttempts: 1, // a retry would count twice at the edge
			ReadTimeout:               cfg.timeout,
			WriteTimeout:              cfg.timeout,
			DisablePathNormalizing:    true,
		},
		req:     fasthttp.AcquireRequest(),
		resp:    fasthttp.AcquireResponse(),
		xff:     client.String(),
		cookie:  cfg.cgnat.cookie,
		timeout: cfg.timeout,
	}
}

func (c *edgeClient) close() {
	c.hc.CloseIdleConnections()
	fasthttp.ReleaseRequest(c.req)
	fasthttp.ReleaseResponse(c.resp)
}

// get sends GET url with the visitor ID id ("" for none) and returns the
// status and the new ID the answer sets, if any.
func (c *edgeClient) get(url, id string) (status int, newID string, err error) {
	c.req.Reset()
	c.req.SetRequestURI(url)
	c.req.Header.SetMethod(fasthttp.MethodGet)
	c.req.Header.Set(fasthttp.HeaderXForwardedFor, c.xff)
	if id != "" {
		c.req.Header.SetCookie(c.cookie, id)
	}
	if err := c.hc.DoTimeout(c.req, c.resp, c.timeout); err != nil {
		return 0, "", err
	}
	ck := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(ck)
	ck.SetKey(c.cookie)
	if c.resp.Header.Cookie(ck) && len(ck.Value()) > 0 {
		newID = string(ck.Value())
	}
	return c.resp.StatusCode(), newID, nil
}
