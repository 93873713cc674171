package rules

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// The queue attributes of a rule { } block: queue = true on a leaky_bucket
// rule holds the requests its bucket admits early (within the burst) and
// releases them at the rule's rate, as NGINX's limit_req without nodelay
// (docs/policy.md, "Queue"). The store decides as without the queue; the
// delay is derived from its Result (QueueDelay) and the gateway waits it
// out before forwarding.

// Queue is a rule's queue: the zero value is off (every admitted request is
// forwarded at once).
type Queue struct {
	// On is queue = true.
	On bool
	// MaxDelay is the longest a request may be held (max_delay; default and
	// at most burst ÷ rate, the longest a full bucket takes to drain). A
	// request whose delay is longer is refused at arrival and its unit given
	// back (Engine.Check).
	MaxDelay time.Duration

	maxDelayRange *hcl.Range // set when max_delay is written
}

var queueAttrs = []RuleAttrType{
	{Name: "queue", Compile: compileQueue},
	{Name: "max_delay", Compile: compileMaxDelay},
}

func compileQueue(c *Compiler, r *Rule, attr *hcl.Attribute) {
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.Bool {
		c.Errorf(attr.Expr.Range(), "Invalid queue", "queue must be true or false")
		return
	}
	if !v.True() {
		return
	}
	switch {
	case r.Action != ActionLimit:
		c.Errorf(attr.NameRange, "Invalid queue", "rule %q does not count over a limit (action is not \"limit\"); remove queue", r.Name)
		return
	case r.Algorithm != LeakyBucket:
		c.Errorf(attr.NameRange, "Invalid queue", "rule %q: queue holds requests at a leaky bucket's rate; it needs algorithm = \"leaky_bucket\", not %q", r.Name, r.AlgorithmName())
		return
	}
	r.Queue.On = true
}

func compileMaxDelay(c *Compiler, r *Rule, attr *hcl.Attribute) {
	s, ok := attrString(c, attr, `"2s"`)
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur <= 0 {
		c.Errorf(attr.Expr.Range(), "Invalid max_delay", "max_delay %q must be a positive Go duration, such as \"2s\"", s)
		return
	}
	r.Queue.MaxDelay = dur
	rng := attr.NameRange
	r.Queue.maxDelayRange = &rng
}

// drainTime is burst ÷ rate: the time a full bucket takes to drain.
func drainTime(r *Rule) time.Duration {
	if r.Limit <= 0 {
		return 0
	}
	return DurationUS(ceilDiv(r.Burst*r.PeriodUS(), r.Limit))
}

// finishQueue checks queue and max_delay together once both are compiled.
func (c *Compiler) finishQueue(r *Rule) {
	rng := r.Queue.maxDelayRange
	r.Queue.maxDelayRange = nil
	switch {
	case rng != nil && !r.Queue.On:
		c.Errorf(*rng, "max_delay without queue", "rule %q sets max_delay but not queue = true", r.Name)
		r.Queue.MaxDelay = 0
	case !r.Queue.On:
	case rng == nil:
		r.Queue.MaxDelay = drainTime(r)
	case r.Queue.MaxDelay > drainTime(r):
		c.Errorf(*rng, "Invalid max_delay", "rule %q: max_delay %v is longer than burst ÷ rate (%v), the longest any admitted request waits", r.Name, r.Queue.MaxDelay, drainTime(r))
	}
}

// QueueDelay returns how long a request admitted by op (a leaky_bucket
// take) must be held so that it reaches the origin when the bucket would
// have admitted it without its burst: the time the level ahead of it (the
// level before its take) drains, NGINX limit_req's delay. It is derived
// from the Result alone, so every store that conforms to rules/storetest
// gives the same delay: with r units remaining after a take of cost c and
// the window W (ResetAfter, µs), the level before the take lies within a
// µs of W×rate − (r+1+c−burst) units, and the delay returned is never
// shorter than the exact one and at most 2µs longer. 0 when op is not an
// allowed leaky_bucket take.
func QueueDelay(op *Op, r *Result) time.Duration {
	if !r.Allowed || r.StoreError || op.Algorithm != LeakyBucket || op.Kind != OpTake || op.Limit <= 0 {
		return 0
	}
	w := r.ResetAfter.Microseconds()
	x := (r.Remaining + 1 + max(op.Cost, 0) - op.Burst) * op.PeriodUS
	return DurationUS(max(w-floorDiv(x, op.Limit), 0))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
