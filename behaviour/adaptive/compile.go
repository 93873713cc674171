package adaptive

import (
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/hclattr"
)

// The adaptive { } block of a concurrency rule (limiter.go; docs/policy.md,
// "Adaptive concurrency").

// block is a rule's adaptive { }.
type block struct {
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

	DefRange              hcl.Range // the block's, set by compileBlock
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

// maxWindow bounds window and noload_window.
const maxWindow = 24 * time.Hour

// defaults is the Config of an adaptive { } that writes nothing but its
// initial limit, which bounds sets.
func defaults() *Config {
	return &Config{
		Min: DefaultMin, Max: DefaultMax,
		Backoff: DefaultBackoff, Window: DefaultWindow, MinSamples: DefaultMinSamples,
		NoLoadWindow: DefaultNoLoadWindow, Smoothing: DefaultSmoothing,
	}
}

// compileBlock compiles b, rule r's adaptive { }, into the rule's Config
// (its rules.LocalLimit stage): the rule must be a concurrency rule
// without limit and lease (the block finds the limit; nothing is in the
// store), keyed on nothing or ["global"] (each node measures its own
// origin, for the whole route). A block that does not decode is left out
// (Compiler.DecodeInRule), as if not written.
func compileBlock(c *rules.Compiler, r *rules.Rule, b *hcl.Block) {
	ab := &block{}
	if !c.DecodeInRule(b, ab) {
		return
	}
	ab.DefRange = b.DefRange
	if !r.InFlight() {
		c.Errorf(ab.DefRange, "adaptive without concurrency", "adaptive { } finds a concurrency rule's in-flight limit from the origin's latency; rule %q needs algorithm = \"concurrency\"", r.Name)
		return
	}
	if !counts(r) {
		return // the concurrency rule's refusals said why
	}
	ac := &compiler{c: c, r: r, ab: ab, ok: true}
	ac.refuseRuleAttrs()
	// Set at once: a concurrency rule with a LocalLimit is left to it (no
	// limit, no lease), and a rule with errors is dropped anyway.
	ac.a = defaults()
	r.AddStage(ac.a)
	ac.method()
	ac.bounds()
	ac.backoff()
	ac.methodOnly()
	ac.windows()
	ac.smoothing()
	ac.queue()
	if ac.ok && c.Policy().DecideListen != "" {
		c.Warnf(ab.DefRange, "adaptive under decide_listen", "the decision-only listener never forwards a request, so it never measures the origin's latency: on it, rule %q stays at its initial limit %d of requests being decided (docs/policy.md, \"Adaptive concurrency\")", r.Name, ac.a.Initial)
	}
}

// counts reports whether r counts: its action is not deny or skip.
func counts(r *rules.Rule) bool { return r.Action != rules.ActionDeny && r.Action != rules.ActionSkip }

// compiler compiles one adaptive { } block, ab of rule r, into a.
// ok turns false after an error; the checks of its values against each
// other (min against max, noload_window against window) run only while it
// holds, so that one mistake is not reported twice.
type compiler struct {
	c  *rules.Compiler
	r  *rules.Rule
	ab *block
	a  *Config
	ok bool
}

// fail records an error at rng, as Compiler.Errorf, and clears ok.
func (ac *compiler) fail(rng hcl.Range, summary, format string, args ...any) {
	ac.c.Errorf(rng, summary, format, args...)
	ac.ok = false
}

// refuseRuleAttrs refuses what an adaptive rule cannot have: a limit or a
// lease (the block finds the limit, per node), a key other than ["global"]
// and a ban; each at its value, as the rule writes it (Compiler.RuleAttr).
func (ac *compiler) refuseRuleAttrs() {
	r := ac.r
	written := func(name string) (hcl.Range, bool) {
		if a := ac.c.RuleAttr(r, name); a != nil && !rules.IsNull(a.Expr) {
			return a.Expr.Range(), true
		}
		return r.DefRange, false
	}
	if rng, ok := written("limit"); ok {
		ac.fail(rng, "limit not used", "rule %q is adaptive: its limit is found from the origin's latency within adaptive { min, max }; remove limit", r.Name)
	}
	if rng, ok := written("lease"); ok {
		ac.fail(rng, "lease not used", "rule %q is adaptive: each node counts its own requests in flight, nothing is leased in the store; remove lease", r.Name)
	}
	if len(r.KeyNames) > 1 || len(r.KeyNames) == 1 && r.KeyNames[0] != "global" {
		rng, _ := written("key")
		ac.fail(rng, "Invalid key", "rule %q is adaptive: its limit is the route's on this node, measured from the origin's latency, which no client changes; remove key (or write [\"global\"]). To hold each key to a number in flight, add a concurrency rule with limit", r.Name)
	}
	if rng, ok := written("ban"); ok {
		ac.fail(rng, "ban not used", "rule %q is adaptive: a request it sheds says the origin is saturated, not that the caller misbehaved; remove ban", r.Name)
	}
}

// method compiles method: "gradient" (the default) or "aimd".
func (ac *compiler) method() {
	ab := ac.ab
	if ab.Method == nil {
		return
	}
	i, diags := hclattr.Word(*ab.Method, ab.MethodRange, "method", "an adaptive method", methodNames[:]...)
	if !ac.c.Append(diags) {
		ac.ok = false
		return
	}
	ac.a.Method = Method(i)
}

// methodNames are the values of adaptive { method }, by Method.
var methodNames = [...]string{Gradient: "gradient", AIMD: "aimd"}

// bounds compiles min, max and initial, requests in flight on this node:
// max defaults to at least min, and initial to DefaultInitial
// within them.
func (ac *compiler) bounds() {
	ab, a := ac.ab, ac.a
	ac.count(ab.Min, ab.MinRange, "min", &a.Min)
	ac.count(ab.Max, ab.MaxRange, "max", &a.Max)
	if ab.Max == nil && a.Min > a.Max {
		a.Max = a.Min
	}
	if ac.ok && a.Min > a.Max {
		ac.fail(ab.MinRange, "Invalid min", "min %d is above max %d", a.Min, a.Max)
	}
	a.Initial = min(max(DefaultInitial, a.Min), a.Max)
	ac.count(ab.Initial, ab.InitialRange, "initial", &a.Initial)
	if ac.ok && (a.Initial < a.Min || a.Initial > a.Max) {
		ac.fail(ab.InitialRange, "Invalid initial", "initial %d is outside min %d and max %d", a.Initial, a.Min, a.Max)
	}
}

// count compiles v, attribute name at rng, a number of requests in flight
// (1 to MaxLimit), into *dst when it is set.
func (ac *compiler) count(v *int64, rng hcl.Range, name string, dst *int64) {
	if v == nil {
		return
	}
	if *v < 1 || *v > MaxLimit {
		ac.fail(rng, "Invalid "+name, "%s must be between 1 and %d requests in flight, got %d", name, MaxLimit, *v)
		return
	}
	*dst = *v
}

// backoff compiles backoff, the share of the limit kept after a cut.
func (ac *compiler) backoff() {
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
func (ac *compiler) methodOnly() {
	ab := ac.ab
	only := func(set bool, rng hcl.Range, name string, m Method) {
		if set && ac.a.Method != m {
			ac.fail(rng, name+" not used", "%s is the %s method's; rule %q uses %q: remove %s", name, m, ac.r.Name, ac.a.Method.String(), name)
		}
	}
	only(ab.Window != nil, ab.WindowRange, "window", Gradient)
	only(ab.MinSamples != nil, ab.MinSamplesRange, "min_samples", Gradient)
	only(ab.NoLoadWindow != nil, ab.NoLoadWindowRange, "noload_window", Gradient)
	only(ab.Smoothing != nil, ab.SmoothingRange, "smoothing", Gradient)
	only(ab.Queue != nil, ab.QueueRange, "queue", Gradient)
	only(ab.LatencyThreshold != nil, ab.LatencyThresholdRange, "latency_threshold", AIMD)
}

// windows compiles what the latency is measured over: window,
// noload_window (at least twice window), latency_threshold (each a
// positive duration of at most maxWindow) and min_samples.
func (ac *compiler) windows() {
	ab, a := ac.ab, ac.a
	dur := func(s *string, rng hcl.Range, name string, dst *time.Duration) {
		if s == nil {
			return
		}
		d, err := rules.ParseDuration(*s)
		if err != nil || d <= 0 || d > maxWindow {
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
func (ac *compiler) smoothing() {
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
func (ac *compiler) queue() {
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
