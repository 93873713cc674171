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
	ac := &adaptiveCompiler{c: c, rb: rb, ab: ab, ok: true}
	ac.refuseRuleAttrs(r)
	// Set at once: finishConcurrency leaves an adaptive rule alone (no
	// limit, no lease), and a rule with errors is dropped anyway.
	ac.a = &AdaptiveConfig{
		Min: DefaultAdaptiveMin, Max: DefaultAdaptiveMax,
		Backoff: DefaultAdaptiveBackoff, Window: DefaultAdaptiveWindow, MinSamples: DefaultAdaptiveMinSamples,
		NoLoadWindow: DefaultAdaptiveNoLoadWindow, Smoothing: DefaultAdaptiveSmoothing,
	}
	r.Adaptive = ac.a
	ac.method()
	ac.bounds()
	ac.backoff()
	ac.methodOnly()
	ac.windows()
	ac.smoothing()
	ac.queue()
	if ac.ok && c.p.DecideListen != "" {
		c.Warnf(ab.DefRange, "adaptive under decide_listen", "the decision-only listener never forwards a request, so it never measures the origin's latency: on it, rule %q stays at its initial limit %d of requests being decided (docs/policy.md, \"Adaptive concurrency\")", rb.Name, ac.a.Initial)
	}
}

// adaptiveCompiler compiles one adaptive { } block, ab of rule rb, into a.
// ok turns false after an error; the checks of its values against each
// other (min against max, noload_window against window) run only while it
// holds, so that one mistake is not reported twice.
type adaptiveCompiler struct {
	c  *Compiler
	rb *ruleBlock
	ab *adaptiveBlock
	a  *AdaptiveConfig
	ok bool
}

// fail records an error at rng, as Compiler.Errorf, and clears ok.
func (ac *adaptiveCompiler) fail(rng hcl.Range, summary, format string, args ...any) {
	ac.c.Errorf(rng, summary, format, args...)
	ac.ok = false
}

// refuseRuleAttrs refuses what an adaptive rule r cannot have: a limit or
// a lease (the block finds the limit, per node) and a key other than
// ["global"]. A feature's attribute that cannot apply refuses it itself,
// from Rule.Adaptive (behaviour/ban's ban).
func (ac *adaptiveCompiler) refuseRuleAttrs(r *Rule) {
	rb := ac.rb
	if rb.Limit != nil {
		ac.fail(rb.LimitRange, "limit not used", "rule %q is adaptive: its limit is found from the origin's latency within adaptive { min, max }; remove limit", rb.Name)
	}
	if rb.Lease != nil {
		ac.fail(rb.LeaseRange, "lease not used", "rule %q is adaptive: each node counts its own requests in flight, nothing is leased in the store; remove lease", rb.Name)
	}
	if len(r.KeyNames) > 1 || len(r.KeyNames) == 1 && r.KeyNames[0] != "global" {
		ac.fail(rb.Key.Range(), "Invalid key", "rule %q is adaptive: its limit is the route's on this node, measured from the origin's latency, which no client changes; remove key (or write [\"global\"]). To hold each key to a number in flight, add a concurrency rule with limit", rb.Name)
	}
}

// method compiles method: "gradient" (the default) or "aimd".
func (ac *adaptiveCompiler) method() {
	ab := ac.ab
	if ab.Method == nil {
		return
	}
	m, ok := adaptiveMethods.compile(ac.c, *ab.Method, ab.MethodRange)
	if !ok {
		ac.ok = false
		return
	}
	ac.a.Method = m
}

// adaptiveMethods are the values of adaptive { method }.
var adaptiveMethods = vocabulary[AdaptiveMethod]{attr: "method", what: "an adaptive method",
	words:  []string{"gradient", "aimd"},
	values: []AdaptiveMethod{AdaptiveGradient, AdaptiveAIMD}}

// bounds compiles min, max and initial, requests in flight on this node:
// max defaults to at least min, and initial to DefaultAdaptiveInitial
// within them.
func (ac *adaptiveCompiler) bounds() {
	ab, a := ac.ab, ac.a
	ac.count(ab.Min, ab.MinRange, "min", &a.Min)
	ac.count(ab.Max, ab.MaxRange, "max", &a.Max)
	if ab.Max == nil && a.Min > a.Max {
		a.Max = a.Min
	}
	if ac.ok && a.Min > a.Max {
		ac.fail(ab.MinRange, "Invalid min", "min %d is above max %d", a.Min, a.Max)
	}
	a.Initial = min(max(DefaultAdaptiveInitial, a.Min), a.Max)
	ac.count(ab.Initial, ab.InitialRange, "initial", &a.Initial)
	if ac.ok && (a.Initial < a.Min || a.Initial > a.Max) {
		ac.fail(ab.InitialRange, "Invalid initial", "initial %d is outside min %d and max %d", a.Initial, a.Min, a.Max)
	}
}

// count compiles v, attribute name at rng, a number of requests in flight
// (1 to MaxAdaptiveLimit), into *dst when it is set.
func (ac *adaptiveCompiler) count(v *int64, rng hcl.Range, name string, dst *int64) {
	if v == nil {
		return
	}
	if *v < 1 || *v > MaxAdaptiveLimit {
		ac.fail(rng, "Invalid "+name, "%s must be between 1 and %d requests in flight, got %d", name, MaxAdaptiveLimit, *v)
		return
	}
	*dst = *v
}

// backoff compiles backoff, the share of the limit kept after a cut.
func (ac *adaptiveCompiler) backoff() {
	ab := ac.ab
	if ab.Backoff == nil {
		return
	}
	if b := *ab.Backoff; !(b > 0 && b < 1) {
		ac.fail(ab.BackoffRange, "Invalid backoff", "backoff is the share of the limit kept after a cut, between 0 and 1 exclusive (such as 0.9), got %v", b)
	} else {
		ac.a.Backoff = b
	}
}

// methodOnly refuses each attribute of the method the block does not use:
// window, min_samples, noload_window, smoothing and queue are gradient's,
// latency_threshold aimd's.
func (ac *adaptiveCompiler) methodOnly() {
	ab := ac.ab
	only := func(set bool, rng hcl.Range, name string, m AdaptiveMethod) {
		if set && ac.a.Method != m {
			ac.fail(rng, name+" not used", "%s is the %s method's; rule %q uses %q: remove %s", name, m, ac.rb.Name, ac.a.Method.String(), name)
		}
	}
	only(ab.Window != nil, ab.WindowRange, "window", AdaptiveGradient)
	only(ab.MinSamples != nil, ab.MinSamplesRange, "min_samples", AdaptiveGradient)
	only(ab.NoLoadWindow != nil, ab.NoLoadWindowRange, "noload_window", AdaptiveGradient)
	only(ab.Smoothing != nil, ab.SmoothingRange, "smoothing", AdaptiveGradient)
	only(ab.Queue != nil, ab.QueueRange, "queue", AdaptiveGradient)
	only(ab.LatencyThreshold != nil, ab.LatencyThresholdRange, "latency_threshold", AdaptiveAIMD)
}

// windows compiles what the latency is measured over: window,
// noload_window (at least twice window), latency_threshold (each a
// positive duration of at most maxAdaptiveWindow) and min_samples.
func (ac *adaptiveCompiler) windows() {
	ab, a := ac.ab, ac.a
	dur := func(s *string, rng hcl.Range, name string, dst *time.Duration) {
		if s == nil {
			return
		}
		d, err := ParseDuration(*s)
		if err != nil || d <= 0 || d > maxAdaptiveWindow {
			ac.fail(rng, "Invalid "+name, "%q is not a positive duration of at most 24h, such as \"1s\"", *s)
			return
		}
		*dst = d
	}
	dur(ab.Window, ab.WindowRange, "window", &a.Window)
	dur(ab.NoLoadWindow, ab.NoLoadWindowRange, "noload_window", &a.NoLoadWindow)
	dur(ab.LatencyThreshold, ab.LatencyThresholdRange, "latency_threshold", &a.LatencyThreshold)
	if ab.MinSamples != nil {
		if n := *ab.MinSamples; n < 1 || n > 1_000_000 {
			ac.fail(ab.MinSamplesRange, "Invalid min_samples", "min_samples must be between 1 and 1000000, got %d", n)
		} else {
			a.MinSamples = n
		}
	}
	if ac.ok && a.NoLoadWindow < 2*a.Window {
		rng := ab.NoLoadWindowRange
		if ab.NoLoadWindow == nil {
			rng = ab.WindowRange
		}
		ac.fail(rng, "Invalid noload_window", "noload_window %v must be at least twice window %v: RTT_noload is the least window mean over it", a.NoLoadWindow, a.Window)
	}
}

// smoothing compiles smoothing, the share of the way to its target the
// limit moves each window.
func (ac *adaptiveCompiler) smoothing() {
	ab := ac.ab
	if ab.Smoothing == nil {
		return
	}
	if s := *ab.Smoothing; !(s > 0 && s <= 1) || math.IsNaN(s) {
		ac.fail(ab.SmoothingRange, "Invalid smoothing", "smoothing is the share of the way to its target the limit moves each window, above 0 and at most 1, got %v", s)
	} else {
		ac.a.Smoothing = s
	}
}

// queue compiles queue, the allowance added to limit × gradient (1 to
// max; unset, √limit).
func (ac *adaptiveCompiler) queue() {
	ab := ac.ab
	if ab.Queue == nil {
		return
	}
	if q := *ab.Queue; q < 1 || q > ac.a.Max {
		ac.fail(ab.QueueRange, "Invalid queue", "queue is the allowance added to limit × gradient, between 1 and max (%d), got %d; leave it out for √limit", ac.a.Max, q)
	} else {
		ac.a.Queue = q
	}
}
