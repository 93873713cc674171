package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// startLead is the least time between choosing t=0 and the first request,
// for the replay goroutines to start.
const startLead = 50 * time.Millisecond

// warmupPath is requested once per connection before the replay. No rule
// of the foundation policy limits it, and the demo origin answers 200.
const warmupPath = "/trace/warmup"

// runSeedTrace replays the seed trace against /trace/<algorithm> for each
// algorithm of the fixture, all at once, one client address and one
// connection per algorithm, and compares the edge's decisions with the
// fixture's.
func runSeedTrace(ctx context.Context, cfg config) error {
	tr, err := loadTrace(cfg.tracePath)
	if err != nil {
		return err
	}
	algs := tr.algorithms()
	n := len(tr.RequestsAtSeconds)
	if need := len(algs) * (n + 1); need > cfg.requests {
		return fmt.Errorf("the trace needs %d requests (%d algorithms × (%d + 1 warm-up)), over -requests %d", need, len(algs), n, cfg.requests)
	}
	offsets := traceOffsets(tr.RequestsAtSeconds, cfg.stagger)

	// Fresh client addresses, so counters left by earlier runs do not count.
	addrs := randomClientAddrs(len(algs))
	runs := make([]*replay, len(algs))
	for i, alg := range algs {
		runs[i] = newReplay(cfg, alg, addrs[i], tr.RequestsAtSeconds, tr.Allowed[alg])
		defer runs[i].hc.CloseIdleConnections()
	}
	for _, r := range runs {
		if err := r.warm(ctx, cfg.stderr); err != nil {
			return err
		}
	}

	t0 := alignStart(time.Now(), offsets[0], startLead, tr.window())
	if dl, ok := ctx.Deadline(); ok {
		if end := t0.Add(offsets[n-1] + cfg.timeout); end.After(dl) {
			return fmt.Errorf("the trace would end %v from now, after the -duration budget; raise -duration",
				time.Until(end).Round(time.Millisecond))
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			if errs[i] = r.run(ctx, t0, offsets); errs[i] != nil {
				cancel() // a broken replay makes the whole comparison moot
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	results := make([]algoResult, len(runs))
	for i, r := range runs {
		results[i] = r.result
	}
	mismatches, err := writeReport(cfg.stdout, reportHeader{
		scenario: "seed-trace",
		target:   cfg.target.base,
		trace:    cfg.tracePath,
		t0:       t0,
		stagger:  cfg.stagger,
	}, results)
	if err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if mismatches > 0 {
		return fmt.Errorf("%w: %d of %d decisions", errMismatch, mismatches, len(algs)*n)
	}
	return nil
}

// randomClientAddrs returns n distinct addresses from 198.18.0.0/15, the
// benchmarking range (RFC 2544), which no real client uses.
func randomClientAddrs(n int) []netip.Addr {
	seen := make(map[netip.Addr]bool, n)
	out := make([]netip.Addr, 0, n)
	for len(out) < n {
		v := rand.Uint32N(1 << 17)
		a := netip.AddrFrom4([4]byte{198, 18 + byte(v>>16), byte(v >> 8), byte(v)})
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// replay is one algorithm's client: its own address and connection.
type replay struct {
	hc      *fasthttp.HostClient
	url     string // the replay's route
	warmURL string
	xff     string
	timeout time.Duration
	result  algoResult
}

func newReplay(cfg config, alg string, client netip.Addr, at []float64, want []bool) *replay {
	return &replay{
		hc: &fasthttp.HostClient{
			Addr:                      cfg.target.addr,
			Name:                      "edge-loadtest",
			MaxConns:                  1, // one connection, warmed up front
			MaxIdleConnDuration:       cfg.duration,
			MaxIdemponentCallAttempts: 1, // a retry would count twice at the edge
			ReadTimeout:               cfg.timeout,
			WriteTimeout:              cfg.timeout,
			DisablePathNormalizing:    true,
		},
		url:     cfg.target.base + "/trace/" + alg,
		warmURL: cfg.target.base + warmupPath,
		xff:     client.String(),
		timeout: cfg.timeout,
		result: algoResult{
			algorithm: alg,
			path:      "/trace/" + alg,
			client:    client,
			at:        at,
			want:      want,
			got:       make([]observation, 0, len(at)),
		},
	}
}

// warm opens the connection with a request no rule limits.
func (r *replay) warm(ctx context.Context, stderr io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	status, err := r.get(r.warmURL)
	if err != nil {
		return fmt.Errorf("warming up %s: %w", r.result.algorithm, err)
	}
	if status == fasthttp.StatusTooManyRequests {
		fmt.Fprintf(stderr, "loadtest: warning: %s answered 429: a rule limits it, which the replay does not expect\n", warmupPath)
	}
	return nil
}

// run sends request i at t0+offsets[i], never earlier, and records the
// answers.
func (r *replay) run(ctx context.Context, t0 time.Time, offsets []time.Duration) error {
	for i, off := range offsets {
		if err := waitUntil(ctx, t0.Add(off)); err != nil {
			return fmt.Errorf("replaying %s: %w", r.result.algorithm, err)
		}
		sent := time.Now()
		status, err := r.get(r.url)
		if err != nil {
			return fmt.Errorf("replaying %s, request %d (t=%vs): %w", r.result.algorithm, i+1, r.result.at[i], err)
		}
		r.result.got = append(r.result.got, observation{
			status: status,
			late:   sent.Sub(t0.Add(secondsToDuration(r.result.at[i]))),
		})
	}
	return nil
}

// get sends GET url with the replay's client address and returns the status.
func (r *replay) get(url string) (int, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.Header.Set("X-Forwarded-For", r.xff)
	if err := r.hc.DoTimeout(req, resp, r.timeout); err != nil {
		return 0, err
	}
	return resp.StatusCode(), nil
}
