// Package queue is the queue behaviour of rule { } blocks: queue = true on
// a leaky_bucket rule holds the requests its bucket admits early (within
// the burst) and releases them at the rule's rate, as NGINX's limit_req
// without nodelay (docs/policy.md, "Queue"). The store decides as without
// the queue; the delay is derived from its Result (Delay) and the gateway
// waits it out before forwarding (rules.Decision.Delay). A request whose
// delay would pass max_delay is refused at arrival and its unit given back
// in the after call, so the queue never fills with requests nobody holds.
//
// It is a rules.Feature (builtin.Features lists it) whose two attributes
// compile to one Stage with a Judge phase (docs/architecture.md, "The
// decision pipeline").
package queue

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/rules"
)

// Feature returns the queue behaviour: queue and max_delay on rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name: "queue",
		RuleAttrs: []rules.RuleAttrType{
			{Name: "queue", Compile: compileQueue},
			{Name: "max_delay", Compile: compileMaxDelay},
		},
		RuleDone: finish,
	}
}

// Stage is a rule's queue: its presence is queue = true.
type Stage struct {
	// MaxDelay is the longest a request may be held (max_delay; default and
	// at most burst ÷ rate, the longest a full bucket takes to drain).
	MaxDelay time.Duration

	on            bool       // queue = true (a stage for max_delay alone is an error)
	maxDelayRange *hcl.Range // set when max_delay is written
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "queue" }

// Of returns r's queue, or nil when r does not queue.
func Of(r *rules.Rule) *Stage {
	if q, ok := rules.StageOf[*Stage](r); ok && q.on {
		return q
	}
	return nil
}

// stage returns r's queue stage, adding one the first time.
func stage(r *rules.Rule) *Stage {
	if q, ok := rules.StageOf[*Stage](r); ok {
		return q
	}
	q := &Stage{}
	r.AddStage(q)
	return q
}

func compileQueue(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.Bool {
		c.Errorf(attr.Expr.Range(), "Invalid queue", "queue must be true or false")
		return
	}
	if !v.True() {
		return
	}
	switch {
	case r.Action != rules.ActionLimit:
		c.Errorf(attr.NameRange, "Invalid queue", "rule %q does not count over a limit (action is not \"limit\"); remove queue", r.Name)
		return
	case r.Algorithm != rules.LeakyBucket:
		c.Errorf(attr.NameRange, "Invalid queue", "rule %q: queue holds requests at a leaky bucket's rate; it needs algorithm = \"leaky_bucket\", not %q", r.Name, r.AlgorithmName())
		return
	}
	stage(r).on = true
}

func compileMaxDelay(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		c.Errorf(attr.Expr.Range(), "Invalid max_delay", "max_delay must be a string, such as \"2s\"")
		return
	}
	dur, err := time.ParseDuration(v.AsString())
	if err != nil || dur <= 0 {
		c.Errorf(attr.Expr.Range(), "Invalid max_delay", "max_delay %q must be a positive Go duration, such as \"2s\"", v.AsString())
		return
	}
	q := stage(r)
	q.MaxDelay = dur
	rng := attr.NameRange
	q.maxDelayRange = &rng
}

// drainTime is burst ÷ rate: the time a full bucket takes to drain.
func drainTime(r *rules.Rule) time.Duration {
	if r.Limit <= 0 {
		return 0
	}
	return rules.DurationUS((r.Burst*r.PeriodUS() + r.Limit - 1) / r.Limit)
}

// finish checks queue and max_delay together once both are compiled.
func finish(c *rules.Compiler, r *rules.Rule) {
	q, ok := rules.StageOf[*Stage](r)
	if !ok {
		return
	}
	rng := q.maxDelayRange
	q.maxDelayRange = nil
	switch {
	case rng != nil && !q.on:
		c.Errorf(*rng, "max_delay without queue", "rule %q sets max_delay but not queue = true", r.Name)
		q.MaxDelay = 0
	case !q.on:
	case rng == nil:
		q.MaxDelay = drainTime(r)
	case q.MaxDelay > drainTime(r):
		c.Errorf(*rng, "Invalid max_delay", "rule %q: max_delay %v is longer than burst ÷ rate (%v), the longest any admitted request waits", r.Name, q.MaxDelay, drainTime(r))
	}
}

// Judge holds a request m's rule admitted for its delay (Delay), or
// refuses it at arrival when the delay is past max_delay: the delay is
// known then, so the request is refused rather than held, and its unit is
// given back in the after call. A dry-run match is never held.
func (q *Stage) Judge(s *rules.Scratch, m *rules.Match, res rules.Result) rules.Judgement {
	if !q.on || !m.Enforce || !res.Allowed {
		return rules.Judgement{}
	}
	op := &s.Ops[m.Op]
	delay := Delay(op, &s.Res[m.Op])
	if delay <= q.MaxDelay {
		return rules.Judgement{Delay: delay}
	}
	refund := *op
	refund.Kind = rules.OpRefund
	s.AfterOp(refund)
	return rules.Judgement{Refuse: true, RetryAfter: delay - q.MaxDelay}
}

// Delay returns how long a request admitted by op (a leaky_bucket take)
// must be held so that it reaches the origin when the bucket would have
// admitted it without its burst: the time the level ahead of it (the
// level before its take) drains, NGINX limit_req's delay. It is derived
// from the Result alone, so every store that conforms to rules/storetest
// gives the same delay: with r units remaining after a take of cost c and
// the window W (ResetAfter, µs), the level before the take lies within a
// µs of W×rate − (r+1+c−burst) units, and the delay returned is never
// shorter than the exact one and at most 2µs longer. 0 when op is not an
// allowed leaky_bucket take.
func Delay(op *rules.Op, r *rules.Result) time.Duration {
	if !r.Allowed || r.StoreError || op.Algorithm != rules.LeakyBucket || op.Kind != rules.OpTake || op.Limit <= 0 {
		return 0
	}
	w := r.ResetAfter.Microseconds()
	x := (r.Remaining + 1 + max(op.Cost, 0) - op.Burst) * op.PeriodUS
	return rules.DurationUS(max(w-floorDiv(x, op.Limit), 0))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
