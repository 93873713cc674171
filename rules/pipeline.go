package rules

import (
	"context"
	"time"
)

// Check is a fixed pipeline of phases, each a method below: match (and
// shape), gate, main, judge and after, then, once the origin has
// answered, Settle and Release. docs/architecture.md, "The decision
// pipeline", tables what each runs and its store calls, at most one before
// the main one and one after it (TestStoreCallsPerRequest counts them).

// Check decides req at now against p. It makes at most three store calls:
// the gate's precheck (only where a forgive, a Stage's Gate or a request
// hook's GateRequest asks for one: known callers, bans), the main
// Store.Take when any matching rule counts, and the after call (a ban
// written, a unit or lease given back). The matches, ops and results stay
// in s for the caller (response headers, metrics) until s is reused.
func (e *Engine) Check(ctx context.Context, now time.Time, p *Policy, req *Request, s *Scratch) Decision {
	e.begin(now, p, req, s)
	var d Decision
	s.exemptions(p, req, &d) // skip rules first, wherever written (stage.go)
	dry := e.dry.Load()      // run-time toggles (dryrun.go), expiring by now
	nodeDry := p.DryRun || e.dryRun.Load() || dry.NodeOn(now)
	for _, r := range p.Rules {
		if r.matches(req) && !s.exempt(r) {
			e.matchRule(now, r, req, s, &d, !(nodeDry || r.DryRun || r.Action == ActionLog || dry.RuleOn(r.Name, now)))
		}
	}
	if e.gate(ctx, now, p, req, s, &d) {
		return d // refused before anything is counted: banned or shed
	}
	if !s.refusedAnyway() {
		for _, h := range p.requestHooks {
			h.BeforeStore(req, s)
		}
	}
	if len(s.Ops) > 0 && !e.mainCall(ctx, now, s, &d) {
		return d // the store could not decide: on_store_error answered
	}
	e.judge(s, &d)
	e.after(ctx, now, s, &d)
	return d
}

// begin prepares s for a request under p: its memo slots, its key format
// and its client's network (network.go).
func (e *Engine) begin(now time.Time, p *Policy, req *Request, s *Scratch) {
	if s.begun != p {
		s.Begin(p)
	}
	s.begun = nil // the next request begins afresh
	s.reset()
	s.pol, s.now, s.owner = p, now, e
	network := uint32(0) // Op.Network: none without a network share
	if p.networkShares {
		network = e.keys.Network(req.Client, p.Keys.NetworkIPv4Prefix, p.Keys.NetworkIPv6Prefix)
	}
	s.keys.Begin(e.keys, now, network) // every op's network (Engine.take)
}

// refusedAnyway reports whether the request is refused whatever the
// counters say: an enforcing action = "deny" matched, or an enforcing
// rule rejects its identity (missing or invalid).
func (s *Scratch) refusedAnyway() bool { return s.denyAction || s.missing || s.invalid }

// matchRule decides what r, which matches req and no skip rule exempts it
// from, does with it: nothing (a condition does not hold), a refusal no
// counter changes (a deny action, a rejected identity), or ops for the
// main call (countMatch). enforce is false when r is in dry-run for the
// request.
func (e *Engine) matchRule(now time.Time, r *Rule, req *Request, s *Scratch, d *Decision, enforce bool) {
	cond := r.conditions(req, s)
	if cond == Missing || (cond == Invalid && r.InvalidIdentity != IdentityReject) {
		return
	}
	if r.Sensitive {
		d.Sensitive = true
	}
	m := Match{Rule: r, Op: -1, CeilingOp: -1, Enforce: enforce}
	switch {
	case cond == Invalid:
		// A condition on an identity that is present but invalid cannot
		// be decided: the rule rejects as a key on that identity would
		// (invalid_identity), never as its action, so garbage gets one
		// answer whatever the condition and the rule's place, and is
		// charged to the other rules as an attempt.
		s.reject(&m, Invalid)
	case r.local != nil:
		// Node-local, no store op: an Admitter decides it, before the
		// store call (LocalLimit: adaptive { }; behaviour/shed). Skip
		// until then.
		m.Outcome = OutcomeSkip
	case r.Action == ActionDeny && enforce:
		m.Outcome = OutcomeDeny
		s.denyAction = true
		if d.Refusing == nil {
			d.Refusing = r
		}
	case r.Action == ActionDeny:
		m.Outcome = OutcomeDryRunDeny
	default:
		key, status := e.key(r, req, s, false)
		var member uint64
		if status == Present && r.Distinct != nil {
			member, status = e.member(r, req, s)
		}
		if status == Present {
			// The ceiling's value is as required as the rule's own:
			// without it the ceiling would be one counter for all.
			status = e.countMatch(now, r, req, s, m, key, member, 1)
		}
		if status == Present {
			if r.expander != nil {
				r.expander.Expand(req, s, len(s.Matches)-1) // an identity's further values (behaviour/values)
			}
			return // countMatch appended m
		}
		s.reject(&m, status)
	}
	s.Matches = append(s.Matches, m)
}

// reject sets the outcome of m, whose key (or condition) found status
// (Missing, Invalid or Absent), by the rule's missing_identity and
// invalid_identity: a rejection of the request when the rule enforces,
// else a skip.
func (s *Scratch) reject(m *Match, status Status) {
	r := m.Rule
	switch {
	case status == Invalid && r.InvalidIdentity == IdentityReject:
		m.Outcome = OutcomeInvalid
		s.invalid = s.invalid || m.Enforce
	case status == Missing && r.MissingIdentity == IdentityReject:
		m.Outcome = OutcomeMissing
		s.missing = s.missing || m.Enforce
	default:
		m.Outcome = OutcomeSkip
	}
}

// gate is the phase before anything is counted: forgive's exemptions
// (behaviour/forgive), the stages' Gate and request hooks' GateRequest
// (known callers, bans: behaviour/known, behaviour/ban) are checked in one
// store call (precheck), then the Admitters admit the request or not (load
// shedding, behaviour/shed; no store call). It reports whether the request
// is refused (d is then its decision).
func (e *Engine) gate(ctx context.Context, now time.Time, p *Policy, req *Request, s *Scratch, d *Decision) bool {
	if !s.refusedAnyway() {
		if p.exemptions != nil {
			p.exemptions.Gate(s) // forgiven keys, first (behaviour/forgive)
		}
		if p.gates {
			s.queueGates(req, d.Sensitive) // known callers, bans (stage.go)
		}
		if len(s.pre) > 0 {
			// One more store call, only where a forgive, a Stage's Gate or
			// a request hook's GateRequest asks (known callers, bans).
			if r, left := e.precheck(ctx, now, s); r != nil {
				refuseAtGate(d, s, r, left)
				return true
			}
		}
	}
	// Both reject with 400, charging the other rules as attempts.
	s.missing = s.missing || s.invalid
	if !s.denyAction && !s.missing && !s.peekOnly {
		// Load shedding, before anything is counted: a shed request
		// costs no store call and no unit of any rule (inflight.go).
		for _, a := range p.admitters {
			if shed, r, wait := a.Admit(s); shed {
				s.shed(now, d, r, wait)
				return true
			}
		}
	}
	return false
}

// precheck makes the one store call before the main one when the
// exemptions, the stages or the request hooks queued checks (Scratch.PreOp:
// forgiven keys' markers, behaviour/forgive; known callers' markers,
// behaviour/known; bans and their ban_by guilt markers, behaviour/ban): it
// settles which matches are taken out of their rule (the exemptions, then
// the Admits: a known caller, before the rule's ban, a later stage,
// refuses) and returns the rule whose Gater (or RequestGater) refuses the
// request, if any, with the time left. A store that cannot answer knows no
// one and gates nothing: the rules apply as they are.
func (e *Engine) precheck(ctx context.Context, now time.Time, s *Scratch) (refusing *Rule, left time.Duration) {
	if cap(s.mres) < len(s.pre) {
		s.mres = make([]Result, len(s.pre))
	}
	s.mres = s.mres[:len(s.pre)]
	if err := e.take(ctx, now, s, s.pre, s.mres); err != nil {
		return nil, 0
	}
	return s.admitGates()
}

// refuseAtGate turns d into the refusal of a request a Gater refused (a
// ban): the refusing rule's match is its deny (a match of its own when the
// rule does not match this route), the other matches are dropped (nothing
// was decided for them), and no op was sent.
func refuseAtGate(d *Decision, s *Scratch, r *Rule, left time.Duration) {
	d.Refusing, d.RetryAfter, d.Verdict = r, left, RefuseLimit
	kept := s.Matches[:0]
	for _, m := range s.Matches {
		if m.Rule == r {
			m.Op, m.CeilingOp, m.Outcome = -1, -1, OutcomeDeny
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		// A RequestGater's refusal on another rule's route (a ban of
		// ban_scope = "sensitive"): the refusal is the refusing rule's,
		// in the metrics and logs too.
		kept = append(kept, Match{Rule: r, Op: -1, CeilingOp: -1, Outcome: OutcomeDeny, Enforce: true})
	}
	s.Matches = kept
	s.Ops, s.Res = s.Ops[:0], s.Res[:0]
}

// mainCall sends the request's ops in the one main store call. A request
// refused whatever the counters say decides every rule without consuming,
// but is still charged its attempts (a malformed request is charged to its
// per-client rules). It reports whether the store decided: false leaves d
// decided by each rule's on_store_error.
func (e *Engine) mainCall(ctx context.Context, now time.Time, s *Scratch, d *Decision) bool {
	if s.denyAction || s.missing {
		for i := range s.Ops {
			if s.Ops[i].Attempts || s.missing {
				s.Ops[i].Attempts = true
			} else {
				s.Ops[i].Kind = OpPeek
			}
		}
	}
	if cap(s.Res) < len(s.Ops) {
		// More ops than the Scratch was sized for (a visitor rule's
		// ceiling, the mint budget): Ops grew by append, Res grows here,
		// once per pooled Scratch.
		s.Res = make([]Result, len(s.Ops))
	}
	s.Res = s.Res[:len(s.Ops)]
	if s.peekOnly {
		s.peekAll() // Explain consumes nothing (explain.go)
	}
	err := e.take(ctx, now, s, s.Ops, s.Res)
	if err == nil {
		s.answered(false) // the Holders: what the request holds (inflight.go)
		return true
	}
	d.StoreErr = err
	e.storeFailed(d, s)
	d.setVerdict(s.denyAction, s.invalid, s.missing)
	if d.Verdict != Forward {
		s.releaseLocal(now, 0, false, false) // never sent: no sample
	}
	d.Settle = s.Holds() // nothing is held in the store: it did not answer
	if !s.peekOnly {
		// The call may have run all the same (a timeout after Redis ran
		// it): the Holders give back what it may hold, best effort, in
		// the after call.
		s.qops = s.qops[:0]
		s.answered(true)
		e.afterCall(ctx, now, s)
	}
	return false
}

// judge is the phase after the main call: each counting match's outcome
// from its result (a visitor rule's combined with its IP ceiling's), then
// what its rule's behaviours make of it: the stages' Judge (max_delay:
// behaviour/queue; the ban a refusal trips, queued for the after call:
// behaviour/ban).
func (e *Engine) judge(s *Scratch, d *Decision) {
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		if m.Known {
			m.Outcome = OutcomeAllow // decided, but the visitor is known: never refused
			continue
		}
		res := s.combined(m)
		if res.StoreError {
			d.StoreErr = ErrStoreFallback
			e.storeFallback(d, m, &res)
			continue
		}
		switch {
		case res.Allowed:
			m.Outcome = OutcomeAllow
		case m.Enforce:
			d.refuse(m, res.RetryAfter)
		default:
			m.Outcome = OutcomeDryRunDeny
		}
		if s.peekOnly {
			continue // Explain writes nothing and holds nothing
		}
		for _, j := range m.Rule.judges {
			if v := j.Judge(s, m, res); v.Refuse && m.Enforce {
				d.refuse(m, v.RetryAfter)
			} else {
				d.Delay = max(d.Delay, v.Delay)
			}
		}
	}
}

// combined is m's result: its op's, or for a visitor rule the combination
// of its visitor's bucket and its IP's ceiling, which allows when both do.
func (s *Scratch) combined(m *Match) Result {
	res := s.Res[m.Op]
	if m.CeilingOp < 0 {
		return res
	}
	c := s.Res[m.CeilingOp]
	if res.Allowed && c.Allowed {
		c = res
	} else if !res.Allowed && (c.Allowed || res.RetryAfter > c.RetryAfter) {
		c.Allowed, c.RetryAfter = false, res.RetryAfter
	}
	c.StoreError = c.StoreError || res.StoreError
	return c
}

// after is the phase that ends Check: the verdict, and at most one more
// store call for what the judge queued (bans, their guilt markers,
// max_delay's refunds) and what a refused request holds (a lease).
func (e *Engine) after(ctx context.Context, now time.Time, s *Scratch, d *Decision) {
	for i := range s.Matches {
		if m := &s.Matches[i]; (len(m.Rule.Hooks) > 0 || len(m.Rule.settlers) > 0) && m.Op >= 0 && m.Outcome == OutcomeAllow {
			d.Settle = true
		}
	}
	d.setVerdict(s.denyAction, s.invalid, s.missing)
	if d.Verdict != Forward {
		s.giveBackRefused() // refused after the store call: what it holds goes back in the call below
	}
	e.afterCall(ctx, now, s)
	if d.Verdict != Forward {
		d.Delay = 0
		s.releaseLocal(now, 0, false, false) // never sent: no sample
	}
	// A hook writes after a success (Scratch.WantSettle: a known block's
	// marker).
	d.Settle = d.Settle || s.Holds() || (s.wantSettle && d.Verdict == Forward)
}

// afterCall sends the after call's ops (Scratch.AfterOp), if any. Its error
// leaves things as they are: a ban not written leaves the refusal, whose
// counter still refuses until it decays; a unit not given back drains at
// its rule's rate; a lease not given back ends with its lease.
func (e *Engine) afterCall(ctx context.Context, now time.Time, s *Scratch) {
	if len(s.qops) == 0 {
		return
	}
	if cap(s.qres) < len(s.qops) {
		s.qres = make([]Result, len(s.qops))
	}
	s.qres = s.qres[:len(s.qops)]
	_ = e.take(ctx, now, s, s.qops, s.qres)
	s.qops = s.qops[:0]
}

// Refuse makes m, an enforcing match, refuse the request: the first rule
// to refuse is the Decision's Refusing, and the longest wait its
// RetryAfter.
func (d *Decision) refuse(m *Match, retryAfter time.Duration) {
	m.Outcome = OutcomeDeny
	if d.Refusing == nil {
		d.Refusing = m.Rule
	}
	if retryAfter > d.RetryAfter {
		d.RetryAfter = retryAfter
	}
}
