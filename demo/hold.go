package demo

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Limits of the origin controls (hold, latency, in flight). Everything is
// bounded, as the rest of the origin is.
const (
	// defaultMaxHeld bounds the requests held at once; one more is answered
	// 503 at once (tests lower it).
	defaultMaxHeld = 10_000
	// maxControlPaths bounds the distinct paths held, given a latency, or
	// reported in flight per path. A path beyond it is not held, gets no
	// latency, and is left out of InFlightReport.ByPath (it still counts in
	// the totals).
	maxControlPaths = 1_000
	// maxLatency is the largest latency SetLatency accepts.
	maxLatency = 10 * time.Second
)

// InFlightReport is what the origin has in flight: the body of
// GET /__origin/inflight.
type InFlightReport struct {
	// InFlight counts the requests inside the origin now, from the moment
	// one arrives (after its hit is recorded) until its handler returns,
	// just before its answer is written (so a client that has its answer
	// is no longer counted): held requests and requests waiting out a
	// latency included. Control requests (/__origin/…) are not counted.
	InFlight int64 `json:"in_flight"`
	// Peak is the largest InFlight since the origin started or ResetPeak.
	Peak int64 `json:"peak"`
	// Held counts the requests held now (a part of InFlight).
	Held int `json:"held"`
	// ByPath is InFlight per normalised path (lower case, no trailing
	// slash, as the routes match), only paths with requests in flight, at
	// most 1,000 of them.
	ByPath map[string]int64 `json:"by_path"`
}

// control is the state of the hold, latency and in-flight controls. Its
// zero value is ready: nothing held, no latency.
type control struct {
	mu sync.Mutex
	// holdAll holds every non-control path; holdPaths holds these
	// normalised paths.
	holdAll   bool
	holdPaths map[string]struct{}
	// held are the held requests' release channels, oldest first.
	held []chan struct{}
	// changed is closed, and replaced, whenever held changes (WaitHeld).
	changed chan struct{}

	inFlight, peak int64
	byPath         map[string]int64

	latencyAll time.Duration
	latency    map[string]time.Duration
}

// normalise is path as the routes match it: lower case, without a trailing
// slash (except "/" itself).
func normalise(path string) string {
	path = strings.ToLower(path)
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	return path
}

// Hold makes requests to path wait at the origin until Release or
// StopHolding lets them go, or the origin shuts down: path is matched as the
// routes match it (case-insensitively, a trailing slash ignored), "" holds
// every non-control path. Calls add up: Hold("/login") then
// Hold("/otp/verify") holds both. A held request is then answered as it
// would have been. At most 10,000 requests are held at once; one more is
// answered 503 {"error":"too many held"} at once. A held request stays held
// when its client goes away. At most 1,000 distinct paths can be held; Hold
// beyond that does nothing.
//
// Served as POST /__origin/hold?path=/login (path optional).
func (o *Origin) Hold(path string) {
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	if path == "" {
		c.holdAll = true
		return
	}
	if c.holdPaths == nil {
		c.holdPaths = make(map[string]struct{})
	}
	if len(c.holdPaths) < maxControlPaths {
		c.holdPaths[normalise(path)] = struct{}{}
	}
}

// Release lets the n oldest held requests go on, in arrival order (all of
// them when n < 0), and returns how many it released. Holding goes on:
// requests arriving later are held again.
//
// Served as POST /__origin/release?n=K (all without n), answering
// {"released":K}.
func (o *Origin) Release(n int) int {
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.releaseLocked(n)
}

// releaseLocked is Release with c.mu held.
func (c *control) releaseLocked(n int) int {
	if n < 0 || n > len(c.held) {
		n = len(c.held)
	}
	if n == 0 {
		return 0
	}
	for _, ch := range c.held[:n] {
		close(ch)
	}
	rest := copy(c.held, c.held[n:])
	clear(c.held[rest:])
	c.held = c.held[:rest]
	c.notifyLocked()
	return n
}

// StopHolding stops holding every path and releases every held request; it
// returns how many it released. Latencies are kept.
//
// Served as DELETE /__origin/hold, answering {"released":K}.
func (o *Origin) StopHolding() int {
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdAll = false
	clear(c.holdPaths)
	return c.releaseLocked(-1)
}

// WaitHeld waits until at least n requests are held at once, and returns
// nil then, or ctx's error when ctx is done first. It sleeps on a channel
// the origin closes whenever a request is held or released, never polls.
func (o *Origin) WaitHeld(ctx context.Context, n int) error {
	c := &o.ctl
	for {
		c.mu.Lock()
		if len(c.held) >= n {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notifyLocked wakes every WaitHeld; c.mu is held.
func (c *control) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// InFlight reports what the origin has in flight now, and the peak.
//
// Served as GET /__origin/inflight.
func (o *Origin) InFlight() InFlightReport {
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	r := InFlightReport{InFlight: c.inFlight, Peak: c.peak, Held: len(c.held), ByPath: make(map[string]int64, len(c.byPath))}
	for p, n := range c.byPath {
		r.ByPath[p] = n
	}
	return r
}

// ResetPeak sets the peak to what is in flight now.
//
// Served as POST /__origin/inflight/reset.
func (o *Origin) ResetPeak() {
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peak = c.inFlight
}

// SetLatency makes the origin wait d (on a timer) before answering each
// request to path, matched as Hold matches it ("" for every non-control
// path; a path's own latency wins over the one for every path); 0 removes
// it. d is clamped to [0, 10s]. The wait comes after a hold is released and
// counts as in flight. At most 1,000 distinct paths can have a latency;
// SetLatency beyond that does nothing.
//
// Served as POST /__origin/latency?path=/login&ms=200 (path optional).
func (o *Origin) SetLatency(path string, d time.Duration) {
	d = max(0, min(d, maxLatency))
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	if path == "" {
		c.latencyAll = d
		return
	}
	path = normalise(path)
	if d == 0 {
		delete(c.latency, path)
		return
	}
	if c.latency == nil {
		c.latency = make(map[string]time.Duration)
	}
	if _, ok := c.latency[path]; ok || len(c.latency) < maxControlPaths {
		c.latency[path] = d
	}
}

// enter counts a request to the normalised path in flight and, when the
// path is held, holds it: it returns the channel to wait on (nil when not
// held), the latency to wait after it, and false when the request must be
// refused because too many are held.
func (o *Origin) enter(path string) (release chan struct{}, latency time.Duration, ok bool) {
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	if c.byPath == nil {
		c.byPath = make(map[string]int64)
	}
	if _, seen := c.byPath[path]; seen || len(c.byPath) < maxControlPaths {
		c.byPath[path]++
	}
	latency = c.latencyAll
	if d, set := c.latency[path]; set {
		latency = d
	}
	if _, held := c.holdPaths[path]; !held && !c.holdAll {
		return nil, latency, true
	}
	if len(c.held) >= o.maxHeld {
		return nil, 0, false
	}
	release = make(chan struct{})
	c.held = append(c.held, release)
	c.notifyLocked()
	return release, latency, true
}

// leave is the end of what enter counted.
func (o *Origin) leave(path string) {
	c := &o.ctl
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	if n, ok := c.byPath[path]; ok {
		if n <= 1 {
			delete(c.byPath, path)
		} else {
			c.byPath[path] = n - 1
		}
	}
}

// waitTurn holds and delays a request to the normalised path as the
// controls say, and reports whether it may be answered; when not, it has
// answered 503. The caller calls o.leave(path) when the answer is written.
func (o *Origin) waitTurn(ctx *fasthttp.RequestCtx, path string) bool {
	release, latency, ok := o.enter(path)
	if !ok {
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, `{"error":"too many held"}`)
		return false
	}
	if release != nil {
		<-release
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		<-t.C
	}
	return true
}

// serveHoldControl answers the hold, release, in-flight and latency control
// routes under /__origin/ (p is the rest of the path), and reports whether p
// was one of them.
func (o *Origin) serveHoldControl(ctx *fasthttp.RequestCtx, p string) bool {
	args := ctx.QueryArgs()
	switch {
	case p == "hold" && ctx.IsPost():
		o.Hold(string(args.Peek("path")))
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	case p == "hold" && ctx.IsDelete():
		writeReleased(ctx, o.StopHolding())
	case p == "release" && ctx.IsPost():
		n := -1
		if args.Has("n") {
			v, err := strconv.Atoi(string(args.Peek("n")))
			if err != nil || v < 0 {
				writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"n must be a whole number"}`)
				return true
			}
			n = v
		}
		writeReleased(ctx, o.Release(n))
	case p == "inflight" && ctx.IsGet():
		writeJSONValue(ctx, fasthttp.StatusOK, o.InFlight())
	case p == "inflight/reset" && ctx.IsPost():
		o.ResetPeak()
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	case p == "latency" && ctx.IsPost():
		ms, err := strconv.Atoi(string(args.Peek("ms")))
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxLatency {
			writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"ms must be a whole number from 0 to 10000"}`)
			return true
		}
		o.SetLatency(string(args.Peek("path")), time.Duration(ms)*time.Millisecond)
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	default:
		return false
	}
	return true
}

// writeReleased answers {"released":n}.
func writeReleased(ctx *fasthttp.RequestCtx, n int) {
	writeJSON(ctx, fasthttp.StatusOK, `{"released":`+strconv.Itoa(n)+`}`)
}
