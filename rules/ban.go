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
// a counter that is still refusing; and a Marker, so the memory store
// keeps it in its rule's marker budget, where no flood of the rule's new
// keys can evict it (docs/memory-store.md, "Markers"). The check is a peek in one store call
// before the request's main one (the same call as known-visitor markers),
// and a banned request is refused before anything is counted.
//
// ban_by (docs/policy.md, "ban_by"): a ban keyed on an address would fall
// on everyone behind it, the real user with a valid visitor cookie beside
// the attacker. With ban_by = ["visitor"] (the default when the policy has
// a visitor { } block) a ban refuses only what the attacker controls: the
// address's cookieless clients (a shared bucket, BucketCharacteristic: they
// cannot be told apart from the attacker) and the visitors that are guilty
// of it. A visitor is guilty when the rule counted one of its failures
// (count = "failures"; written in Settle's call) or, on a rule counting
// requests or attempts, refused it (written with the ban). A guilt marker
// is present for the rule's period and the ban after the act, so it
// covers every ban the act could have helped trip; it is keyed by the
// rule's key values and the ban_by values, under an ID and a key budget
// of its own (the rule's max_keys again), Sensitive as the ban is. A ban
// check is then the ban's marker and, for a visitor with a valid cookie,
// its guilt marker, both in precheck's call. What the attacker gains back:
// its fresh visitors are not banned; each is a fresh visitor ID, at most
// mint_limit (+ mint_reserve) per mint_period per address, and held by
// every other rule (the banning rule's own counter first).

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

// banCheck is one ban marker a request is checked against, and, under
// ban_by, the guilt marker of the request's visitor (gi its index in
// precheck's call, -1 without one: the ban refuses the request whenever
// it is live, a shared bucket's or a ban on the whole key).
type banCheck struct {
	rule  *Rule
	key   Key
	guilt Key
	gi    int
	check bool // guilt is the request's guilt marker, to check
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
		Cost: 1, Enforce: true, OnError: FailOpen, Sensitive: true, MaxKeys: int32(r.MaxKeys), Marker: true,
		// No NetworkKeys: a ban is never refused by its network's share
		// of the marker budget, or a network that filled it (with bans
		// or known visitors) would trip the rule and never be banned. It
		// stays bounded: a ban is written only for a counter key the
		// rule refused, and the counter keys are held to the share.
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
			b := banCheck{rule: m.Rule, key: banKey(s.Ops[m.Op].Key), gi: -1}
			if len(m.Rule.banBy) > 0 {
				e.guiltOf(&b, m, req, s)
			}
			s.bans = append(s.bans, b)
		}
	}
	if !sensitive {
		return
	}
	for _, r := range p.sensitiveBans {
		if k, st := e.key(r, req, s, false); st == Present {
			b := banCheck{rule: r, key: banKey(k), gi: -1}
			if len(r.banBy) > 0 {
				e.guiltOf(&b, s.counted(r), req, s)
			}
			s.bans = append(s.bans, b)
			if r.multi != nil {
				e.banValues(r, req, s) // each value's key is banned apart (values.go)
			}
		}
	}
}

// counted returns the request's match of r that counts (has an op), or
// nil.
func (s *Scratch) counted(r *Rule) *Match {
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Rule == r && m.Op >= 0 {
			return m
		}
	}
	return nil
}

// guiltOf completes b, a ban check of rule r = b.rule, with the request's
// guilt marker: the keyed hash of the banned key's values (b.key's, which
// name them as uniquely as the values do, and are the same for each value
// of an identity with several: values.go) and the request's ban_by
// values, under the rule's guilt budget; m,
// the request's match of r when it has one, keeps it for the writes. A
// ban_by value that is a shared bucket, missing, invalid or one of several
// names no one: the ban refuses the request whenever it is live.
//
// Guilt names the caller by its counted values, not exactly as the markers
// that exempt do (callers.go, exactNames): a guilt marker accuses, and its
// absence is what spares, so the broad name is the strict one (every
// spelling of an account that shares the counter is guilty with it), and
// its key format, unchanged, forgets no guilt across an upgrade.
func (e *Engine) guiltOf(b *banCheck, m *Match, req *Request, s *Scratch) {
	r := b.rule
	buf, ok := appendCallerValues(append(append(s.mbuf[:0], b.key[9:]...), 0xfe), r.banBy, r.banByTags, 0, req, s)
	s.mbuf = buf
	if !ok {
		return
	}
	copy(b.guilt[0:8], r.guilt.ID[:])
	b.guilt[8] = r.banByTags[0] | markerFlag
	copy(b.guilt[9:], s.valueHash(buf))
	b.check = true
	if m != nil {
		m.Guilt, m.HasGuilt = b.guilt, true
	}
}

// guiltOp is the op of a rule's guilt marker (ban_by): kind OpPeek to
// check it, OpAdd to write it. It is present for the rule's period and
// its ban after the act, in the rule's guilt budget.
func guiltOp(kind OpKind, r *Rule, k Key) Op {
	return Op{
		Kind: kind, Algorithm: SlidingLog, Key: k, Limit: 1, PeriodUS: r.PeriodUS() + r.banUS,
		Cost: 1, Enforce: true, OnError: FailOpen, Sensitive: true, MaxKeys: int32(r.guilt.MaxKeys),
	}
}

// appendGuiltOps appends the checks of the request's guilt markers to ops
// (precheck's call), recording where each is.
func (s *Scratch) appendGuiltOps(ops []Op) []Op {
	for i := range s.bans {
		if b := &s.bans[i]; b.check {
			b.gi = len(ops)
			ops = append(ops, guiltOp(OpPeek, b.rule, b.guilt))
		}
	}
	return ops
}

// guilty reports whether b's ban, live, refuses the request: always
// without a guilt check, else when the request's visitor is guilty (its
// marker present; a fallback's guess, StoreError, bans no one).
func (s *Scratch) guilty(b *banCheck) bool {
	if b.gi < 0 {
		return true
	}
	g := &s.mres[b.gi]
	return !g.Allowed && !g.StoreError
}

// banGuilt is the Hook of a count = "failures" rule with ban_by: a failure
// the rule counts makes the request's visitor guilty of the rule's ban
// (a known caller, whom the rule does not charge, is never guilty).
type banGuilt struct{ failure []int }

func (h banGuilt) AfterOrigin(m *Match, _ []Op, status int, outcome []byte, settle []Op) []Op {
	if !m.HasGuilt || m.Known || !IsFailure(h.failure, status, outcome) {
		return settle
	}
	return append(settle, guiltOp(OpAdd, m.Rule, m.Guilt))
}

// precheck makes the one store call before the main one when the request
// has ban checks (with their ban_by guilt markers), forgive's exemptions
// or the stages' and request hooks' Gate checks (Scratch.PreOp: known
// callers' markers, behaviour/known): it settles which matches are taken
// out of their rule (forgive's markExempt, then the Admits: a known caller)
// and returns the ban, or the Gater, that refuses the request, if any,
// with the time left. A store that cannot answer bans nothing, knows no
// one and gates nothing: the rules apply as they are.
func (e *Engine) precheck(ctx context.Context, now time.Time, s *Scratch) (banned *Rule, left time.Duration) {
	s.mops = s.mops[:0]
	for _, b := range s.bans {
		s.mops = append(s.mops, banOp(OpPeek, b.rule, b.key))
	}
	s.mops = e.appendExemptOps(s, s.mops)
	s.mops = s.appendGuiltOps(s.mops)
	s.preAt = len(s.mops)
	s.mops = append(s.mops, s.pre...) // the stages' and request hooks' Gate (stage.go)
	if cap(s.mres) < len(s.mops) {
		s.mres = make([]Result, len(s.mops))
	}
	s.mres = s.mres[:len(s.mops)]
	if err := e.take(ctx, now, s, s.mops, s.mres); err != nil {
		return nil, 0
	}
	e.markExempt(s, s.mres[len(s.bans):])
	var gated *Rule
	var wait time.Duration
	if len(s.pre) > 0 {
		gated, wait = s.admitGates() // known callers are taken out before bans refuse
	}
	for i := range s.bans {
		b := &s.bans[i]
		res := &s.mres[i]
		if res.Allowed || res.StoreError || s.knownMatch(b.rule) || !s.guilty(b) {
			continue
		}
		if banned == nil || res.RetryAfter > left {
			banned, left = b.rule, res.RetryAfter
		}
	}
	if gated != nil && (banned == nil || wait > left) {
		banned, left = gated, wait
	}
	return banned, left
}

// tripBan queues, for the after call, the ban of m, an enforcing match of
// a rule with a ban that refused the request, unless only its network's
// share refused it (networkFullOnly); and, on a rule counting requests,
// the guilt of the visitor it refused (a failures rule's guilt is its
// counted failures: banGuilt).
func (s *Scratch) tripBan(m *Match) {
	if s.networkFullOnly(m) {
		return
	}
	s.AfterOp(banOp(OpAdd, m.Rule, banKey(s.Ops[m.Op].Key)))
	if m.HasGuilt && m.Rule.Count != CountFailures {
		s.AfterOp(guiltOp(OpAdd, m.Rule, m.Guilt))
	}
}

// networkFullOnly reports whether every op of m that refused was refused
// by its network's share (Result.NetworkFull): the rule then refused a new
// key because the client's network holds its share of the rule's budget,
// which says nothing of the key, so it writes no ban and makes no visitor
// guilty. Otherwise a network's flood would ban a bystander's phone that
// it tried to make, or make guilty a fresh visitor behind the same
// network (issue 24, a tester's finding F2).
func (s *Scratch) networkFullOnly(m *Match) bool {
	if r := &s.Res[m.Op]; !r.Allowed && !r.NetworkFull {
		return false
	}
	if m.CeilingOp >= 0 {
		if r := &s.Res[m.CeilingOp]; !r.Allowed && !r.NetworkFull {
			return false
		}
	}
	return true
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
