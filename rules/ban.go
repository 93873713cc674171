package rules

import (
	"context"
	"time"
)

// Bans (docs/policy.md, "ban"): once a key trips a rule with ban = "15m",
// the key is refused for 15 minutes on every rule of the ban's scope, its
// own rule ("rule", the default) or every sensitive route ("sensitive"),
// whatever their own counters say, as Cloudflare's mitigation timeout and
// AWS WAF ATP's "block while over" do.
//
// A ban is a marker: a sliding_log counter of limit 1 whose period is the
// ban, written when the rule refuses the key and present for exactly the
// ban's time. Its key is the tripping key's with the ban flag, under the
// rule's ID, so a reload keeps it (rules are keyed by name), and its op is
// Sensitive, so the memory store never evicts it while it lasts: a ban is
// a counter that is still refusing. The check is a peek in one store call
// before the request's main one (the same call as known-visitor markers),
// and a banned request is refused before anything is counted.

// banFlags mark a ban marker in a key's tag byte: both 0x20 and 0x40, a
// combination no counter (first tag 1-31, 0x80 for several parts), ceiling
// (0x40 alone) or known-visitor marker (0x20 alone) key has.
const banFlags = 0x60

// BanScope is a rule's ban_scope.
type BanScope uint8

const (
	// BanRule: the ban refuses the key on the rule that tripped.
	BanRule BanScope = iota
	// BanSensitive: the ban refuses the key on every sensitive route.
	BanSensitive
)

// banCheck is one ban marker a request is checked against.
type banCheck struct {
	rule *Rule
	key  Key
}

// banKey is the ban marker of a rule's key.
func banKey(k Key) Key {
	k[8] |= banFlags
	return k
}

// banOp is the op of a ban marker: kind OpPeek to check it, OpAdd to write
// it.
func banOp(kind OpKind, r *Rule, k Key) Op {
	return Op{
		Kind: kind, Algorithm: SlidingLog, Key: k, Limit: 1, PeriodUS: r.banUS,
		Cost: 1, Enforce: true, OnError: FailOpen, Sensitive: true, MaxKeys: int32(r.MaxKeys),
	}
}

// queueBans adds the ban checks of a request: its matching rules with a
// ban of their own scope (keys already in Ops), and, on a sensitive route,
// every rule whose ban covers the sensitive routes, keyed on this request
// (a rule keyed on "ip" bans the IP everywhere; one whose key this request
// lacks bans nothing here).
func (e *Engine) queueBans(p *Policy, req *Request, s *Scratch, sensitive bool) {
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op >= 0 && m.Rule.banUS > 0 && m.Rule.BanScope == BanRule {
			s.bans = append(s.bans, banCheck{rule: m.Rule, key: banKey(s.Ops[m.Op].Key)})
		}
	}
	if !sensitive {
		return
	}
	for _, r := range p.sensitiveBans {
		if k, st := e.key(r, req, s, false); st == Present {
			s.bans = append(s.bans, banCheck{rule: r, key: banKey(k)})
			if r.multi != nil {
				e.banValues(r, req, s) // each value's key is banned apart (values.go)
			}
		}
	}
}

// precheck makes the one store call before the main one when the request
// has known-visitor markers or ban checks: it settles which visitors are
// known (checkMarkers) and returns the ban that refuses the request, if
// any, with the time left. A store that cannot answer bans nothing and
// knows no one: the rules apply as they are.
func (e *Engine) precheck(ctx context.Context, now time.Time, s *Scratch) (banned *Rule, left time.Duration) {
	s.mops = s.mops[:0]
	for _, mk := range s.markers {
		r := s.Matches[mk.match].Rule
		s.mops = append(s.mops, Op{
			Kind: OpPeek, Algorithm: SlidingLog, Key: mk.key, Limit: 1, PeriodUS: r.knownUS,
			Cost: 1, OnError: FailOpen, MaxKeys: int32(r.MaxKeys),
		})
	}
	for _, b := range s.bans {
		s.mops = append(s.mops, banOp(OpPeek, b.rule, b.key))
	}
	s.mops = e.appendExemptOps(s, s.mops)
	if cap(s.mres) < len(s.mops) {
		s.mres = make([]Result, len(s.mops))
	}
	s.mres = s.mres[:len(s.mops)]
	if err := e.take(ctx, now, s, s.mops, s.mres); err != nil {
		return nil, 0
	}
	e.markKnown(s, s.mres[:len(s.markers)])
	e.markExempt(s, s.mres[len(s.markers)+len(s.bans):])
	for i, b := range s.bans {
		res := &s.mres[len(s.markers)+i]
		if res.Allowed || res.StoreError || s.forgiven(b.rule) {
			continue
		}
		if banned == nil || res.RetryAfter > left {
			banned, left = b.rule, res.RetryAfter
		}
	}
	return banned, left
}

// writeBans writes the ban of every enforcing rule with a ban that refused
// the request, in one store call. Its error is the caller's to log: the
// rule refused anyway, and its counter still refuses until it decays.
func (e *Engine) writeBans(ctx context.Context, now time.Time, s *Scratch) error {
	s.mops = s.mops[:0]
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op >= 0 && m.Rule.banUS > 0 && m.Outcome == OutcomeDeny {
			s.mops = append(s.mops, banOp(OpAdd, m.Rule, banKey(s.Ops[m.Op].Key)))
		}
	}
	if len(s.mops) == 0 {
		return nil
	}
	if cap(s.mres) < len(s.mops) {
		s.mres = make([]Result, len(s.mops))
	}
	s.mres = s.mres[:len(s.mops)]
	return e.take(ctx, now, s, s.mops, s.mres)
}

// banned turns d into the refusal of a banned request: the banning rule's
// match is its deny (a match of its own when the rule does not match this
// route), the other matches are dropped (nothing was decided for them),
// and no op was sent.
func banned(d *Decision, s *Scratch, r *Rule, left time.Duration) {
	d.Refusing, d.RetryAfter, d.Verdict = r, left, RefuseLimit
	kept := s.Matches[:0]
	for _, m := range s.Matches {
		if m.Rule == r {
			m.Op, m.CeilingOp, m.Outcome = -1, -1, OutcomeDeny
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		// A sensitive-scope ban refusing on another rule's route: the
		// refusal is the banning rule's, in the metrics and logs too.
		kept = append(kept, Match{Rule: r, Op: -1, CeilingOp: -1, Outcome: OutcomeDeny, Enforce: true})
	}
	s.Matches = kept
	s.Ops, s.Res = s.Ops[:0], s.Res[:0]
}
