package rules

import (
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The adaptive { } block of a concurrency rule (adaptive.go; docs/policy.md,
// "Adaptive concurrency").

// adaptiveBlock is a rule's adaptive { }.
type adaptiveBlock struct {
	// method is "gradient" (default) or "aimd".
	Method *string `hcl:"method,optional"`
	// min, max and initial bound the limit and start it (requests in
	// flight on this node).
	Min     *int64 `hcl:"min,optional"`
	Max     *int64 `hcl:"max,optional"`
	Initial *int64 `hcl:"initial,optional"`
	// backoff is the multiplicative cut (default 0.9).
	Backoff *float64 `hcl:"backoff,optional"`
	// gradient: window, min_samples, noload_window, smoothing, queue.
	Window       *string  `hcl:"window,optional"`
	MinSamples   *int     `hcl:"min_samples,optional"`
	NoLoadWindow *string  `hcl:"noload_window,optional"`
	Smoothing    *float64 `hcl:"smoothing,optional"`
	Queue        *int64   `hcl:"queue,optional"`
	// aimd: latency_threshold.
	LatencyThreshold *string `hcl:"latency_threshold,optional"`

	DefRange              hcl.Range `hcl:",def_range"`
	MethodRange           hcl.Range `hcl:"method,attr_value_range"`
	MinRange              hcl.Range `hcl:"min,attr_value_range"`
	MaxRange              hcl.Range `hcl:"max,attr_value_range"`
	InitialRange          hcl.Range `hcl:"initial,attr_value_range"`
	BackoffRange          hcl.Range `hcl:"backoff,attr_value_range"`
	WindowRange           hcl.Range `hcl:"window,attr_value_range"`
	MinSamplesRange       hcl.Range `hcl:"min_samples,attr_value_range"`
	NoLoadWindowRange     hcl.Range `hcl:"noload_window,attr_value_range"`
	SmoothingRange        hcl.Range `hcl:"smoothing,attr_value_range"`
	QueueRange            hcl.Range `hcl:"queue,attr_value_range"`
	LatencyThresholdRange hcl.Range `hcl:"latency_threshold,attr_value_range"`
}

// maxAdaptiveWindow bounds window and noload_window.
const maxAdaptiveWindow = 24 * time.Hour

// compileAdaptive compiles rb's adaptive { } into r.Adaptive: the rule must
// be a concurrency rule without limit and lease (the block finds the limit;
// nothing is in the store), keyed on nothing or ["global"] (each node
// measures its own origin, for the whole route). It runs before
// finishConcurrency, which leaves an adaptive rule to it.
func (c *Compiler) compileAdaptive(rb *ruleBlock, r *Rule) {
	ab := rb.Adaptive
	if ab == nil {
		return
	}
	if !r.Concurrency {
		c.Errorf(ab.DefRange, "adaptive without concurrency", "adaptive { } finds a concurrency rule's in-flight limit from the origin's latency; rule %q needs algorithm = \"concurrency\"", rb.Name)
		return
	}
	if !r.counts() {
		return // concurrencyAttrs said why
	}
	ok := true
	fail := func(rng hcl.Range, summary, format string, args ...any) {
		c.Errorf(rng, summary, format, args...)
		ok = false
	}
	if rb.Limit != nil {
		fail(rb.LimitRange, "limit not used", "rule %q is adaptive: its limit is found from the origin's latency within adaptive { min, max }; remove limit", rb.Name)
	}
	if rb.Lease != nil {
		fail(rb.LeaseRange, "lease not used", "rule %q is adaptive: each node counts its own requests in flight, nothing is leased in the store; remove lease", rb.Name)
	}
	if len(r.KeyNames) > 1 || len(r.KeyNames) == 1 && r.KeyNames[0] != "global" {
		fail(rb.Key.Range(), "Invalid key", "rule %q is adaptive: its limit is the route's on this node, measured from the origin's latency, which no client changes; remove key (or write [\"global\"]). To hold each key to a number in flight, add a concurrency rule with limit", rb.Name)
	}
	if rb.Ban != nil {
		fail(rb.BanRange, "ban not used", "rule %q is adaptive: a request it sheds says the origin is saturated, not that the caller misbehaved; remove ban", rb.Name)
	}

	a := &AdaptiveConfig{
		Min: DefaultAdaptiveMin, Max: DefaultAdaptiveMax,
		Backoff: DefaultAdaptiveBackoff, Window: DefaultAdaptiveWindow, MinSamples: DefaultAdaptiveMinSamples,
		NoLoadWindow: DefaultAdaptiveNoLoadWindow, Smoothing: DefaultAdaptiveSmoothing,
	}
	// Set at once: finishConcurrency leaves an adaptive rule alone (no
	// limit, no lease), and a rule with errors is dropped anyway.
	r.Adaptive = a
	if ab.Method != nil {
		switch *ab.Method {
		case "gradient":
		case "aimd":
			a.Method = AdaptiveAIMD
		default:
			fail(ab.MethodRange, "Invalid method", "%q is not an adaptive method; want \"gradient\" or \"aimd\".%s", *ab.Method, suggest(*ab.Method, []string{"gradient", "aimd"}))
		}
	}
	count := func(v *int64, rng hcl.Range, name string, dst *int64) {
		if v == nil {
			return
		}
		if *v < 1 || *v > MaxAdaptiveLimit {
			fail(rng, "Invalid "+name, "%s must be between 1 and %d requests in flight, got %d", name, MaxAdaptiveLimit, *v)
			return
		}
		*dst = *v
	}
	count(ab.Min, ab.MinRange, "min", &a.Min)
	count(ab.Max, ab.MaxRange, "max", &a.Max)
	if ab.Max == nil && a.Min > a.Max {
		a.Max = a.Min
	}
	if ok && a.Min > a.Max {
		fail(ab.MinRange, "Invalid min", "min %d is above max %d", a.Min, a.Max)
	}
	a.Initial = min(max(DefaultAdaptiveInitial, a.Min), a.Max)
	count(ab.Initial, ab.InitialRange, "initial", &a.Initial)
	if ok && (a.Initial < a.Min || a.Initial > a.Max) {
		fail(ab.InitialRange, "Invalid initial", "initial %d is outside min %d and max %d", a.Initial, a.Min, a.Max)
	}
	if ab.Backoff != nil {
		if b := *ab.Backoff; !(b > 0 && b < 1) {
			fail(ab.BackoffRange, "Invalid backoff", "backoff is the share of the limit kept after a cut, between 0 and 1 exclusive (such as 0.9), got %v", b)
		} else {
			a.Backoff = b
		}
	}
	dur := func(s *string, rng hcl.Range, name string, dst *time.Duration) {
		if s == nil {
			return
		}
		d, err := ParseDuration(*s)
		if err != nil || d <= 0 || d > maxAdaptiveWindow {
			fail(rng, "Invalid "+name, "%q is not a positive duration of at most 24h, such as \"1s\"", *s)
			return
		}
		*dst = d
	}
	only := func(set bool, rng hcl.Range, name string, m AdaptiveMethod) {
		if set && a.Method != m {
			fail(rng, name+" not used", "%s is the %s method's; rule %q uses %q: remove %s", name, m, rb.Name, a.Method.String(), name)
		}
	}
	only(ab.Window != nil, ab.WindowRange, "window", AdaptiveGradient)
	only(ab.MinSamples != nil, ab.MinSamplesRange, "min_samples", AdaptiveGradient)
	only(ab.NoLoadWindow != nil, ab.NoLoadWindowRange, "noload_window", AdaptiveGradient)
	only(ab.Smoothing != nil, ab.SmoothingRange, "smoothing", AdaptiveGradient)
	only(ab.Queue != nil, ab.QueueRange, "queue", AdaptiveGradient)
	only(ab.LatencyThreshold != nil, ab.LatencyThresholdRange, "latency_threshold", AdaptiveAIMD)
	dur(ab.Window, ab.WindowRange, "window", &a.Window)
	dur(ab.NoLoadWindow, ab.NoLoadWindowRange, "noload_window", &a.NoLoadWindow)
	dur(ab.LatencyThreshold, ab.LatencyThresholdRange, "latency_threshold", &a.LatencyThreshold)
	if ab.MinSamples != nil {
		if n := *ab.MinSamples; n < 1 || n > 1_000_000 {
			fail(ab.MinSamplesRange, "Invalid min_samples", "min_samples must be between 1 and 1000000, got %d", n)
		} else {
			a.MinSamples = n
		}
	}
	if ok && a.NoLoadWindow < 2*a.Window {
		rng := ab.NoLoadWindowRange
		if ab.NoLoadWindow == nil {
			rng = ab.WindowRange
		}
		fail(rng, "Invalid noload_window", "noload_window %v must be at least twice window %v: RTT_noload is the least window mean over it", a.NoLoadWindow, a.Window)
	}
	if ab.Smoothing != nil {
		if s := *ab.Smoothing; !(s > 0 && s <= 1) || math.IsNaN(s) {
			fail(ab.SmoothingRange, "Invalid smoothing", "smoothing is the share of the way to its target the limit moves each window, above 0 and at most 1, got %v", s)
		} else {
			a.Smoothing = s
		}
	}
	if ab.Queue != nil {
		if q := *ab.Queue; q < 1 || q > a.Max {
			fail(ab.QueueRange, "Invalid queue", "queue is the allowance added to limit × gradient, between 1 and max (%d), got %d; leave it out for √limit", a.Max, q)
		} else {
			a.Queue = q
		}
	}
	if ok && c.p.DecideListen != "" {
		c.Warnf(ab.DefRange, "adaptive under decide_listen", "the decision-only listener never forwards a request, so it never measures the origin's latency: on it, rule %q stays at its initial limit %d of requests being decided (docs/policy.md, \"Adaptive concurrency\")", rb.Name, a.Initial)
	}
}
