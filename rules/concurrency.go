package rules

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Concurrency limits: algorithm = "concurrency" (docs/policy.md,
// "Concurrency limits"). A rate limit counts arrivals; a concurrency rule
// counts the requests of a key that are at the origin now, and refuses a
// new one while limit of them are. See inflight.go for the lifecycle.
//
// The store needs nothing new: a concurrency rule's op is a Distinct op
// (the count_distinct algorithm) whose Member is a lease ID unique to the
// request and whose period is the rule's lease. Distinct keeps each member
// with the time it was counted and admits a new one while fewer than
// Limit are live, so the set of live members is the set of requests in
// flight; the refund after the origin answers (Engine.Settle, or
// Engine.Release when it does not) removes the member, and a member no
// node ever removes (its node died) stops counting when its lease ends, in
// the memory store and in Redis alike. In Redis the set is shared by the
// fleet, so limit is the fleet's, not each node's.

const (
	// ConcurrencyAlgorithm is the algorithm name of a concurrency rule.
	ConcurrencyAlgorithm = "concurrency"
	// DefaultLease is a concurrency rule's default lease: how long a
	// request's slot is held at most when nobody gives it back.
	DefaultLease = 30 * time.Second
	// ConcurrencyRetryAfter is the Retry-After of a request a concurrency
	// rule refused. A slot frees when any request in flight is answered,
	// which no counter can predict (the store's own wait, until the oldest
	// lease ends, is the worst case, up to the whole lease): one second is
	// the shortest wait Retry-After can say (RFC 9110 §10.2.3).
	ConcurrencyRetryAfter = time.Second
)

// AlgorithmName returns the rule's algorithm as the policy writes it:
// "concurrency" for a concurrency rule (whose ops are Distinct), else its
// Algorithm's name. Everything that shows a rule's algorithm uses it.
func (r *Rule) AlgorithmName() string {
	if r.Concurrency {
		return ConcurrencyAlgorithm
	}
	return r.Algorithm.String()
}

// Lease returns a concurrency rule's lease (0 for another rule).
func (r *Rule) Lease() time.Duration {
	if r.Concurrency && r.local == nil {
		return r.Period
	}
	return 0
}

// leaseIDs hands out lease IDs: a random 64-bit base per Engine (so that
// two nodes sharing a store never hand out the same) plus a counter, which
// takes no lock and allocates nothing. 2^64 IDs pass before one repeats.
type leaseIDs struct {
	base uint64
	n    atomic.Uint64
}

// init draws the base.
func (l *leaseIDs) init() error {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	l.base = binary.LittleEndian.Uint64(b[:])
	return nil
}

// next returns a new lease ID.
func (l *leaseIDs) next() uint64 { return l.base + l.n.Add(1) }

// takeLeases runs right after Check's store call answered: the refusals
// of concurrency ops get ConcurrencyRetryAfter rather than the store's wait
// (in s.Res, so that every reader agrees), and s.fl.leases records whether
// a concurrency op consumed, as the store's contract says an op does: an
// allowed take consumes only when no enforcing take refused the request
// (a dry-run concurrency op that is allowed consumes too).
func (s *Scratch) takeLeases() {
	refused := -1 // unknown until a concurrency op needs it
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 || !m.Rule.Concurrency {
			continue
		}
		for _, j := range [2]int{m.Op, m.CeilingOp} {
			if j < 0 {
				continue
			}
			op, res := &s.Ops[j], &s.Res[j]
			if !res.Allowed && res.RetryAfter > 0 {
				res.RetryAfter, res.ResetAfter = ConcurrencyRetryAfter, ConcurrencyRetryAfter
			}
			if op.Kind != OpTake || s.fl.leases {
				continue
			}
			if refused < 0 {
				refused = 0
				if Refused(s.Ops, s.Res) {
					refused = 1
				}
			}
			if Consumes(op, res.Allowed, refused == 1) {
				s.fl.leases = true
			}
		}
	}
}

// appendLeaseRefunds appends the refund of every lease the request holds:
// each consumed concurrency op (and its ip_ceiling op), as OpRefund of its
// lease ID. It is called only while s.fl.leases is set, that is when the
// request was not refused by the store, so an op consumed when allowed.
func (s *Scratch) appendLeaseRefunds(ops []Op) []Op {
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 || !m.Rule.Concurrency {
			continue
		}
		for _, j := range [2]int{m.Op, m.CeilingOp} {
			if j < 0 || j >= len(s.Res) || s.Ops[j].Kind != OpTake || !s.Res[j].Allowed {
				continue
			}
			refund := s.Ops[j]
			refund.Kind = OpRefund
			ops = append(ops, refund)
		}
	}
	return ops
}

// refundLeasesOnRefusal queues the leases of a request Check refuses after
// its store call (max_delay, a rejected identity that another rule's
// answer outranks, ...) for the refund call Check makes at its end, so
// that a refused request holds nothing.
func (s *Scratch) refundLeasesOnRefusal() {
	if !s.fl.leases {
		return
	}
	s.qops = s.appendLeaseRefunds(s.qops)
	s.fl.leases = false
}

// appendUncertainLeases appends the refund of each concurrency take whose
// store call may have run without the edge learning it: all of them when
// the call failed (failed), else those a failure-handling store answered
// from their on_store_error and refused (StoreError, not allowed; an
// allowed one is held and given back as any lease is). A call that timed
// out after Redis ran its script took the lease, and nothing else would
// give it back before the lease ends; refunding a lease that was never
// taken changes nothing (a Distinct refund forgets a member that is not
// there), so the refund is always safe.
func (s *Scratch) appendUncertainLeases(ops []Op, failed bool) []Op {
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 || !m.Rule.Concurrency {
			continue
		}
		for _, j := range [2]int{m.Op, m.CeilingOp} {
			if j < 0 || s.Ops[j].Kind != OpTake {
				continue
			}
			if !failed && (j >= len(s.Res) || !s.Res[j].StoreError || s.Res[j].Allowed) {
				continue
			}
			refund := s.Ops[j]
			refund.Kind = OpRefund
			ops = append(ops, refund)
		}
	}
	return ops
}

// The rule { } attributes of a concurrency rule (compile_rule.go calls
// these).

// concurrencyAttrs reports, for a concurrency rule, each attribute that
// means nothing for requests in flight, at the attribute: a concurrency
// rule has no period (a request holds its slot until the origin answers),
// no burst, no count mode and nothing settled from the origin's answer but
// the slot itself (nor a cost: behaviour/cost refuses it there).
func (c *Compiler) concurrencyAttrs(rb *ruleBlock, r *Rule) {
	if !r.Concurrency {
		return
	}
	refuse := func(rng hcl.Range, attr, why string) {
		c.Errorf(rng, attr+" not used", "rule %q is a concurrency rule (algorithm = \"concurrency\"): %s; remove %s", rb.Name, why, attr)
	}
	if !r.counts() {
		c.Errorf(rb.AlgorithmRange, "Invalid algorithm", "rule %q: %s, so it holds nothing in flight; remove algorithm", rb.Name, uncounted(r.Action))
	}
	if rb.Period != nil {
		refuse(rb.PeriodRange, "period", "a request holds its slot until the origin answers, not over a period (lease bounds a slot nobody gives back)")
	}
	if rb.Burst != nil {
		refuse(rb.BurstRange, "burst", "limit is the most requests in flight per key at once; there is no bucket")
	}
	if rb.Count != nil {
		refuse(rb.CountRange, "count", "it counts the requests in flight now, and gives each slot back when the origin answers")
	}
	if rb.CountDistinct != nil {
		refuse(rb.CountDistinctRange, "count_distinct", "it counts requests in flight, not distinct values")
	}
	if rb.ResetOnSuccess != nil {
		refuse(rb.ResetOnSuccessRange, "reset_on_success", "each slot is given back when the origin answers, success or not")
	}
}

// retrySpreader is a Stage that spreads its rule's Retry-After: a refused
// client waits the true wait plus up to RetryJitter (a fraction, 0 to 1)
// of it more (retry_after_jitter, behaviour/refusal).
type retrySpreader interface {
	Stage
	RetryJitter() float64
}

// retryJitter is the fraction r's stages spread its Retry-After by, 0 when
// none does.
func retryJitter(r *Rule) float64 {
	for _, st := range r.stages {
		if sp, ok := st.(retrySpreader); ok {
			return sp.RetryJitter()
		}
	}
	return 0
}

// finishConcurrency compiles a concurrency rule's limit and lease once its
// other attributes are (before its ip_ceiling, which scales the limit),
// and refuses lease on any other rule. A node-local limit (LocalLimit:
// adaptive { }) finds its limit itself and has no lease: its feature
// compiles it.
//
// The lease must be longer than the policy's upstream_timeout: a lease
// that ends while the origin still works on the request would free its
// slot early, and more than limit requests would be in flight. Under
// decide_listen an enforcing concurrency rule is an error: the decision-
// only listener never learns when the origin answers, so no slot could be
// given back then (docs/deploying.md, "Decision-only mode"); a dry-run or
// log one is a warning (its leases are given back at once there).
func (c *Compiler) finishConcurrency(rb *ruleBlock, r *Rule) {
	if !r.Concurrency {
		if rb.Lease != nil {
			c.Errorf(rb.LeaseRange, "lease not used", "lease is how long a concurrency rule's slot lasts when nobody gives it back; rule %q is not a concurrency rule (algorithm = \"concurrency\"): remove lease", rb.Name)
		}
		return
	}
	if r.local != nil {
		return
	}
	if !r.counts() {
		return // concurrencyAttrs said why
	}
	if j := retryJitter(r); j > 0 && int64(j*ConcurrencyRetryAfter.Seconds()) == 0 {
		c.Warnf(r.DefRange, "retry_after_jitter spreads nothing",
			"rule %q: a concurrency refusal's Retry-After is %v, and Retry-After is whole seconds, so %v%% of it adds nothing to any answer; write \"100%%\" to spread clients over 1 and 2 seconds", rb.Name, ConcurrencyRetryAfter, j*100)
	}
	switch {
	case rb.Limit == nil:
		c.Errorf(rb.DefRange, "Missing limit", "rule %q needs limit, the most requests in flight per key at once", rb.Name)
	case *rb.Limit < 1:
		c.Errorf(rb.LimitRange, "Invalid limit", "limit must be at least 1, got %d", *rb.Limit)
	case *rb.Limit > MaxDistinctLimit:
		c.Errorf(rb.LimitRange, "Limit out of range", "a concurrency rule holds at most %d requests in flight per key (one lease each), got %d", MaxDistinctLimit, *rb.Limit)
	default:
		r.Limit, r.Burst = *rb.Limit, *rb.Limit
	}
	lease := DefaultLease
	if rb.Lease != nil {
		d, err := ParseDuration(*rb.Lease)
		switch {
		case err != nil || d <= 0:
			c.Errorf(rb.LeaseRange, "Invalid lease", "%q is not a positive duration such as \"30s\"", *rb.Lease)
			return
		case d%time.Microsecond != 0 || d.Microseconds() > MaxPeriodUS:
			c.Errorf(rb.LeaseRange, "Invalid lease", "%q: a lease is whole microseconds, at most %v", *rb.Lease, DurationUS(MaxPeriodUS))
			return
		}
		lease = d
	}
	if lease <= c.p.UpstreamTimeout {
		rng := rb.DefRange
		if rb.Lease != nil {
			rng = rb.LeaseRange
		}
		c.Errorf(rng, "Lease too short", "rule %q: its lease %v is not longer than upstream_timeout %v, the longest the origin may take to answer: a lease that ends while the origin still works frees the request's slot early, and more than limit requests would be in flight. Set lease longer than upstream_timeout, such as %q", rb.Name, lease, c.p.UpstreamTimeout, (3 * c.p.UpstreamTimeout).String())
		return
	}
	r.Period = lease
	if c.p.DecideListen != "" {
		if r.Action == ActionLimit && !r.DryRun {
			c.Errorf(r.DefRange, "Concurrency rule under decide_listen",
				"rule %q limits requests in flight, but the decision-only listener never forwards a request nor learns when the origin answers it, so it could not give a slot back then: every slot would be held for its whole lease. Decide it on the proxy listener of a node without decide_listen, or make it dry_run (docs/deploying.md, \"Decision-only mode\")", rb.Name)
		} else {
			c.Warnf(r.DefRange, "Concurrency rule under decide_listen",
				"rule %q limits requests in flight; the decision-only listener never learns when the origin answers, so there it gives each lease back at once and the rule sees at most the requests being decided (docs/deploying.md, \"Decision-only mode\")", rb.Name)
		}
	}
}
