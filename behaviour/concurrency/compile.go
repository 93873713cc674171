package concurrency

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/rules"
)

// The rule { } attributes of a concurrency rule.

// compileAlgorithm compiles algorithm = "concurrency" for rule r: its ops
// are Distinct ops of lease IDs (its Stage's), and it refuses, at the
// attribute, each of the rule's attributes that means nothing for requests
// in flight: a concurrency rule has no period (a request holds its slot
// until the origin answers), no burst, no count mode and nothing settled
// from the origin's answer but the slot itself (nor a cost:
// behaviour/cost refuses it there). Its limit and lease are finish's.
func compileAlgorithm(c *rules.Compiler, r *rules.Rule, rng hcl.Range) rules.Algorithm {
	r.AddStage(newStage())
	if !r.Counts() {
		c.Errorf(rng, "Invalid algorithm", "rule %q: %s, so it holds nothing in flight; remove algorithm", r.Name, rules.Uncounted(r.Action))
	}
	for _, a := range [...]struct{ attr, why string }{
		{"period", "a request holds its slot until the origin answers, not over a period (lease bounds a slot nobody gives back)"},
		{"burst", "limit is the most requests in flight per key at once; there is no bucket"},
		{"count", "it counts the requests in flight now, and gives each slot back when the origin answers"},
		{"count_distinct", "it counts requests in flight, not distinct values"},
		{"reset_on_success", "each slot is given back when the origin answers, success or not"},
	} {
		if at := written(c, r, a.attr); at != nil {
			c.Errorf(at.Expr.Range(), a.attr+" not used", "rule %q is a concurrency rule (algorithm = \"concurrency\"): %s; remove %s", r.Name, a.why, a.attr)
		}
	}
	return rules.Distinct
}

// written returns r's attribute name when the rule block writes it, not
// null (Compiler.RuleAttr), else nil.
func written(c *rules.Compiler, r *rules.Rule, name string) *hcl.Attribute {
	if a := c.RuleAttr(r, name); a != nil && !rules.IsNull(a.Expr) {
		return a
	}
	return nil
}

// compileLease keeps lease for finish, on a concurrency rule; on any other
// it is refused.
func compileLease(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	var s string
	if rules.IsNull(attr.Expr) || !c.DecodeRuleAttr(r, attr, &s) {
		return
	}
	st := Of(r)
	if st == nil {
		c.Errorf(attr.Expr.Range(), "lease not used", "lease is how long a concurrency rule's slot lasts when nobody gives it back; rule %q is not a concurrency rule (algorithm = \"concurrency\"): remove lease", r.Name)
		return
	}
	rng := attr.Expr.Range()
	st.lease, st.leaseAt = s, &rng
}

// retrySpreader is a Stage that spreads its rule's Retry-After: a refused
// client waits the true wait plus up to RetryJitter (a fraction, 0 to 1)
// of it more (retry_after_jitter, behaviour/refusal).
type retrySpreader interface {
	rules.Stage
	RetryJitter() float64
}

// retryJitter is the fraction r's stages spread its Retry-After by, 0 when
// none does.
func retryJitter(r *rules.Rule) float64 {
	if sp, ok := rules.StageOf[retrySpreader](r); ok {
		return sp.RetryJitter()
	}
	return 0
}

// finish compiles a concurrency rule's limit and lease once its other
// attributes are, every feature's (it comes last: before its ip_ceiling,
// which scales the limit). A node-local limit (LocalLimit: adaptive { })
// finds its limit itself and has no lease: its feature compiles it.
//
// The lease must be longer than the policy's upstream_timeout: a lease
// that ends while the origin still works on the request would free its
// slot early, and more than limit requests would be in flight. Under
// decide_listen an enforcing concurrency rule is an error: the decision-
// only listener never learns when the origin answers, so no slot could be
// given back then (docs/deploying.md, "Decision-only mode"); a dry-run or
// log one is a warning (its leases are given back at once there).
func finish(c *rules.Compiler, r *rules.Rule) {
	st := Of(r)
	if st == nil || r.LocalLimit() != nil || !r.Counts() {
		return // not a concurrency rule, an adaptive one, or compileAlgorithm said why
	}
	if j := retryJitter(r); j > 0 && int64(j*RetryAfter.Seconds()) == 0 {
		c.Warnf(r.DefRange, "retry_after_jitter spreads nothing",
			"rule %q: a concurrency refusal's Retry-After is %v, and Retry-After is whole seconds, so %v%% of it adds nothing to any answer; write \"100%%\" to spread clients over 1 and 2 seconds", r.Name, RetryAfter, j*100)
	}
	st.limit(c, r)
	lease, ok := st.parseLease(c)
	if !ok {
		return
	}
	p := c.Policy()
	if lease <= p.UpstreamTimeout {
		rng := r.DefRange
		if st.leaseAt != nil {
			rng = *st.leaseAt
		}
		c.Errorf(rng, "Lease too short", "rule %q: its lease %v is not longer than upstream_timeout %v, the longest the origin may take to answer: a lease that ends while the origin still works frees the request's slot early, and more than limit requests would be in flight. Set lease longer than upstream_timeout, such as %q", r.Name, lease, p.UpstreamTimeout, (3 * p.UpstreamTimeout).String())
		return
	}
	r.Period, st.Lease = lease, lease
	if p.DecideListen == "" {
		return
	}
	if r.Action == rules.ActionLimit && !r.DryRun {
		c.Errorf(r.DefRange, "Concurrency rule under decide_listen",
			"rule %q limits requests in flight, but the decision-only listener never forwards a request nor learns when the origin answers it, so it could not give a slot back then: every slot would be held for its whole lease. Decide it on the proxy listener of a node without decide_listen, or make it dry_run (docs/deploying.md, \"Decision-only mode\")", r.Name)
	} else {
		c.Warnf(r.DefRange, "Concurrency rule under decide_listen",
			"rule %q limits requests in flight; the decision-only listener never learns when the origin answers, so there it gives each lease back at once and the rule sees at most the requests being decided (docs/deploying.md, \"Decision-only mode\")", r.Name)
	}
}

// limit compiles the rule's limit, the most requests in flight per key at
// once (Limit and Burst), as written in its rule block: a limit that did
// not decode is missing, a diagnostic the decode's error makes moot.
func (st *Stage) limit(c *rules.Compiler, r *rules.Rule) {
	a := written(c, r, "limit")
	var n int64
	switch {
	case a == nil || gohcl.DecodeExpression(a.Expr, nil, &n).HasErrors():
		c.Errorf(r.DefRange, "Missing limit", "rule %q needs limit, the most requests in flight per key at once", r.Name)
	case n < 1:
		c.Errorf(a.Expr.Range(), "Invalid limit", "limit must be at least 1, got %d", n)
	case n > rules.MaxDistinctLimit:
		c.Errorf(a.Expr.Range(), "Limit out of range", "a concurrency rule holds at most %d requests in flight per key (one lease each), got %d", rules.MaxDistinctLimit, n)
	default:
		r.Limit, r.Burst = n, n
	}
}

// parseLease compiles the lease as written (DefaultLease without one); ok
// is false after an invalid one.
func (st *Stage) parseLease(c *rules.Compiler) (lease time.Duration, ok bool) {
	if st.leaseAt == nil {
		return DefaultLease, true
	}
	d, err := rules.ParseDuration(st.lease)
	switch {
	case err != nil || d <= 0:
		c.Errorf(*st.leaseAt, "Invalid lease", "%q is not a positive duration such as \"30s\"", st.lease)
		return 0, false
	case d%time.Microsecond != 0 || d.Microseconds() > rules.MaxPeriodUS:
		c.Errorf(*st.leaseAt, "Invalid lease", "%q: a lease is whole microseconds, at most %v", st.lease, rules.DurationUS(rules.MaxPeriodUS))
		return 0, false
	}
	return d, true
}
