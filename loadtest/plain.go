package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// The plain scenario (issue 16): one route, many clients, in a closed loop
// (-connections) or an open one (-rate), against one target; the load
// bench/run.sh puts on each of the edge, NGINX, a minimal proxy and the
// origin in turn. Its report ends with one result line that a script can
// read (writeResultLine).

// Bounds of the load engine's flags.
const (
	maxRate      = 1_000_000 // -rate, requests per second
	maxAPIKeys   = 1 << 20   // -api-keys
	maxAttackers = 512       // -attackers: 256 IPv4 and 256 IPv6 (mixed.go)
)

// genParams are the flags of the plain and mixed scenarios.
type genParams struct {
	rate      float64 // -rate: open loop at this many requests per second; 0: closed loop
	apiKeys   int     // -api-keys: distinct X-Api-Key values, in turn; 0: no header
	attackers int     // -attackers (mixed): attacking addresses
}

var defaultGenParams = genParams{apiKeys: 100, attackers: 8}

// register defines the flags on fs, writing into p.
func (p *genParams) register(fs *flag.FlagSet) {
	fs.Float64Var(&p.rate, "rate", p.rate, fmt.Sprintf("plain, mixed, goodput (the flood): an open loop at this many requests per second over the -connections pool, latency measured from each request's due time "+
		"so a stall shows (coordinated omission); 0 for a closed loop (at most %d)", maxRate))
	fs.IntVar(&p.apiKeys, "api-keys", p.apiKeys, fmt.Sprintf("plain, mixed: distinct X-Api-Key values the requests carry, in turn; 0 sends none (at most %d)", maxAPIKeys))
	fs.IntVar(&p.attackers, "attackers", p.attackers, fmt.Sprintf("mixed: attacking addresses, half IPv4 (203.0.113.0/24), half IPv6 (2001:db8:ffff::/48), sending a tenth of the load (at most %d)", maxAttackers))
}

// check reports a flag out of range.
func (p *genParams) check() error {
	switch {
	case p.rate < 0 || p.rate > maxRate || p.rate != p.rate:
		return fmt.Errorf("-rate must be in [0, %d], got %v", maxRate, p.rate)
	case p.apiKeys < 0 || p.apiKeys > maxAPIKeys:
		return fmt.Errorf("-api-keys must be in [0, %d], got %d", maxAPIKeys, p.apiKeys)
	case p.attackers < 1 || p.attackers > maxAttackers:
		return fmt.Errorf("-attackers must be in [1, %d], got %d", maxAttackers, p.attackers)
	}
	return nil
}

// genBudget is the plain and mixed scenarios' deadline: opening the
// connections (a dial and a request), the warm-up, the window, the last
// answers (open loop: the drain, then the last send's answer) and a second
// of slack.
func genBudget(cfg config) time.Duration {
	b := 2*cfg.timeout + cfg.warmup + cfg.duration + cfg.timeout + time.Second
	if cfg.gen.rate > 0 {
		b += cfg.timeout
	}
	return b
}

// httpSender is a genSender on one fasthttp connection; build writes
// request n into req (which keeps what earlier calls set).
type httpSender struct {
	hc      *fasthttp.HostClient
	req     *fasthttp.Request
	resp    *fasthttp.Response
	timeout time.Duration
	build   func(n int64, req *fasthttp.Request)
}

// newHTTPSender returns a sender to tg counting its dials in dials. The
// connection lives through the whole run, retries none. build is called
// once with n = -1 on the new request, to set what every request of the
// sender shares, then with each request's n.
func newHTTPSender(cfg config, tg target, dials *atomic.Int64, build func(int64, *fasthttp.Request)) *httpSender {
	s := &httpSender{
		hc: &fasthttp.HostClient{
			Addr:                      tg.addr,
			Name:                      "edge-loadtest",
			MaxConns:                  1,
			MaxIdleConnDuration:       cfg.duration + cfg.warmup + 2*cfg.timeout,
			MaxIdemponentCallAttempts: 1, // no retries: a retried request would count twice at the edge
			ReadTimeout:               cfg.timeout,
			WriteTimeout:              cfg.timeout,
			DisablePathNormalizing:    true,
			Dial: func(addr string) (net.Conn, error) {
				dials.Add(1)
				return fasthttp.DialTimeout(addr, cfg.timeout)
			},
		},
		req:     fasthttp.AcquireRequest(),
		resp:    fasthttp.AcquireResponse(),
		timeout: cfg.timeout,
		build:   build,
	}
	build(-1, s.req)
	return s
}

func (s *httpSender) do(n int64) (int, error) {
	s.build(n, s.req)
	if err := s.hc.DoTimeout(s.req, s.resp, s.timeout); err != nil {
		return 0, err
	}
	return s.resp.StatusCode(), nil
}

func (s *httpSender) close() {
	s.hc.CloseIdleConnections()
	fasthttp.ReleaseRequest(s.req)
	fasthttp.ReleaseResponse(s.resp)
}

// genSpecOf returns the engine's spec for cfg.
func genSpecOf(cfg config, kinds int, kindOf func(int64) int) genSpec {
	return genSpec{
		rate:     cfg.gen.rate,
		warmup:   cfg.warmup,
		duration: cfg.duration,
		timeout:  cfg.timeout,
		limit:    int64(cfg.requests),
		kinds:    kinds,
		kindOf:   kindOf,
	}
}

// runGen probes tg, runs spec over cfg.connections senders built by build,
// and returns the result and the connections opened.
func runGen(ctx context.Context, cfg config, spec genSpec, build func(int64, *fasthttp.Request)) (*genResult, int64, error) {
	if cfg.requests < cfg.connections {
		return nil, 0, fmt.Errorf("-requests %d is fewer than -connections %d", cfg.requests, cfg.connections)
	}
	if err := probe(ctx, cfg.target, cfg.timeout); err != nil {
		return nil, 0, err
	}
	var dials atomic.Int64
	senders := make([]genSender, cfg.connections)
	for i := range senders {
		s := newHTTPSender(cfg, cfg.target, &dials, build)
		defer s.close()
		senders[i] = s
	}
	res, err := generate(ctx, spec, senders)
	if err != nil {
		return nil, dials.Load(), fmt.Errorf("measuring %s: %w", cfg.target.base, err)
	}
	return res, dials.Load(), nil
}

// runPlain is the plain scenario: cfg.method cfg.path as cfg.clients
// clients in turn (request n names client n mod -clients in
// X-Forwarded-For, from 198.18.0.0/15, as throughput does) and, with
// -api-keys, X-Api-Key bench-key-(n mod -api-keys).
func runPlain(ctx context.Context, cfg config) error {
	addrs := clientAddrStrings(cfg.clients)
	var keys []string
	for i := range cfg.gen.apiKeys {
		keys = append(keys, "bench-key-"+strconv.Itoa(i))
	}
	url := cfg.target.base + cfg.path
	build := func(n int64, req *fasthttp.Request) {
		if n < 0 {
			// A new sender's request: the request line, once.
			req.SetRequestURI(url)
			req.Header.SetMethod(cfg.method)
			return
		}
		req.Header.Set("X-Forwarded-For", addrs[n%int64(len(addrs))])
		if len(keys) > 0 {
			req.Header.Set("X-Api-Key", keys[n%int64(len(keys))])
		}
	}
	res, dials, err := runGen(ctx, cfg, genSpecOf(cfg, 1, nil), build)
	if err != nil {
		return err
	}
	h := genHeader{scenario: "plain", what: fmt.Sprintf("%s %s", cfg.method, cfg.path), cfg: cfg}
	var b strings.Builder
	h.write(&b, res, dials)
	writeResultLine(&b, h, res)
	if _, err := io.WriteString(cfg.stdout, b.String()); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// genHeader describes a plain or mixed run.
type genHeader struct {
	scenario string
	what     string // "GET /api/bench", "a blend of …"
	cfg      config
}

// mode returns "closed loop, 32 connections" or "open loop at 20000
// req/s over 32 connections".
func (h genHeader) mode() string {
	if h.cfg.gen.rate > 0 {
		return fmt.Sprintf("open loop at %s req/s over %d connections", fmtRate(h.cfg.gen.rate), h.cfg.connections)
	}
	return fmt.Sprintf("closed loop, %d connections", h.cfg.connections)
}

// write appends the text report of res to b.
func (h genHeader) write(b *strings.Builder, res *genResult, dials int64) {
	cfg := h.cfg
	fmt.Fprintf(b, "%s: %s, %s, %d client addresses", h.scenario, h.what, h.mode(), cfg.clients)
	if cfg.gen.apiKeys > 0 {
		fmt.Fprintf(b, ", %d API keys", cfg.gen.apiKeys)
	}
	fmt.Fprintf(b, ", %v measured after a %v warm-up\n", cfg.duration, cfg.warmup)
	row := func(name, value string) { fmt.Fprintf(b, "%-13s %s\n", name, value) }
	row("url", cfg.target.base)
	if res.spec.open() {
		row("due", fmt.Sprintf("%d (the schedule's requests in the window)", res.due))
	}
	row("requests", strconv.FormatInt(res.answered()+res.failed(), 10))
	row("requests/s", fmtRate(res.rate()))
	row("elapsed", res.elapsed.Round(time.Millisecond).String())
	for _, c := range sortedStatuses(res.statuses[:]) {
		row(statusName(c), strconv.FormatInt(res.statuses[c], 10))
	}
	row("errors", withBreakdown(res.failed(), genErrorBreakdown(res)))
	if res.spec.open() {
		row("missed", fmt.Sprintf("%d (due, never sent: every connection was busy until the drain ended)", res.missed))
		fmt.Fprintf(b, "latency from each request's due time (%d timed out or missed, counted at their lower bound):\n", res.bounded)
	}
	writePercentiles(b, res.hist)
	if res.spec.open() {
		fmt.Fprintf(b, "%-13s p50 %sms, p99 %sms, max %sms (from the send: the target's own time)\n", "service",
			fmtMS(res.service.ValueAtQuantile(50)), fmtMS(res.service.ValueAtQuantile(99)), fmtMS(res.service.Max()))
		fmt.Fprintf(b, "%-13s p50 %sms, p99 %sms, max %sms (due to send: waiting for a free connection, and timer lateness)\n", "send lag",
			fmtMS(res.lag.ValueAtQuantile(50)), fmtMS(res.lag.ValueAtQuantile(99)), fmtMS(res.lag.Max()))
	}
	row("connections", fmt.Sprintf("%d opened", dials))
	if res.capped {
		fmt.Fprintf(b, "the -requests cap (%d) ended the run early\n", cfg.requests)
	}
}

// writePercentiles appends the p50 … max rows of h.
func writePercentiles(b *strings.Builder, h *hdrhistogram.Histogram) {
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p99.9", 99.9}} {
		fmt.Fprintf(b, "%-13s %sms\n", q.name, fmtMS(h.ValueAtQuantile(q.q)))
	}
	fmt.Fprintf(b, "%-13s %sms\n", "max", fmtMS(h.Max()))
}

// writeResultLine appends the run's one-line summary, for scripts
// (bench/run.sh): space-separated key=value pairs after "result:", times
// in milliseconds. non2xx counts answers outside 200-299; errors, requests
// with no answer; missed, open-loop requests never sent.
func writeResultLine(b *strings.Builder, h genHeader, res *genResult) {
	mode := "closed"
	if res.spec.open() {
		mode = "open"
	}
	answered := res.answered()
	fmt.Fprintf(b, "result: scenario=%s mode=%s connections=%d rate=%s requests=%d rps=%.1f p50_ms=%s p99_ms=%s p999_ms=%s max_ms=%s 2xx=%d non2xx=%d errors=%d missed=%d\n",
		h.scenario, mode, h.cfg.connections, fmtRate(res.spec.rate), answered+res.failed(), res.rate(),
		fmtMS(res.hist.ValueAtQuantile(50)), fmtMS(res.hist.ValueAtQuantile(99)), fmtMS(res.hist.ValueAtQuantile(99.9)), fmtMS(res.hist.Max()),
		res.count2xx(), answered-res.count2xx(), res.failed(), res.missed)
}

// sortedStatuses returns the statuses with a count, in order (0, the
// codes outside 100-599, last).
func sortedStatuses(counts []int64) []int {
	var out []int
	for c := 1; c < len(counts); c++ {
		if counts[c] > 0 {
			out = append(out, c)
		}
	}
	if counts[0] > 0 {
		out = append(out, 0)
	}
	return slices.Clip(out)
}

// statusName is a status's row name: the code, or "bad status".
func statusName(c int) string {
	if c == 0 {
		return "bad status"
	}
	return strconv.Itoa(c)
}

// genErrorBreakdown lists the errors by kind with their first message.
func genErrorBreakdown(r *genResult) []string {
	var out []string
	for k, n := range r.errs {
		if n == 0 {
			continue
		}
		msg := ""
		if r.firstErr[k] != nil {
			msg = ": " + r.firstErr[k].Error()
		}
		out = append(out, fmt.Sprintf("%s %d%s", errKindNames[k], n, msg))
	}
	return out
}
