package ban

import (
	"time"

	"github.com/edge-gateway/edge/behaviour/answer"
	"github.com/edge-gateway/edge/behaviour/callers"
	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/rules"
)

// banFlags mark a ban marker (rules.CharacteristicType.Tag: a tag byte's
// three top bits are the key's flags, 0x80 several parts, 0x40 a ceiling,
// 0x20 a marker, callers.Flag): both 0x20 and 0x40, a combination no
// counter (first tag 1-31, 0x80 for several parts), ceiling (0x40 alone)
// or known-visitor marker (0x20 alone) key has.
const banFlags = 0x60

// banKey is the ban marker of a rule's key.
func banKey(k rules.Key) rules.Key {
	k[8] |= banFlags
	return k
}

// banOp is the op of the ban marker k: kind OpPeek to check it, OpAdd to
// write it, OpReset to clear it.
func (st *Stage) banOp(kind rules.OpKind, k rules.Key) rules.Op {
	return rules.Op{
		Kind: kind, Algorithm: rules.SlidingLog, Key: k, Limit: 1, PeriodUS: st.us,
		Cost: 1, Enforce: true, OnError: rules.FailOpen, Sensitive: true, MaxKeys: int32(st.rule.MaxKeys), Marker: true,
		// No NetworkKeys: a ban is never refused by its network's share
		// of the marker budget, or a network that filled it (with bans
		// or known visitors) would trip the rule and never be banned. It
		// stays bounded: a ban is written only for a counter key the
		// rule refused, and the counter keys are held to the share.
	}
}

// guiltOp is the op of the guilt marker k (ban_by): kind OpPeek to check
// it, OpAdd to write it. It is present for the rule's period and its ban
// after the act, in the rule's guilt budget.
func (st *Stage) guiltOp(kind rules.OpKind, k rules.Key) rules.Op {
	return rules.Op{
		Kind: kind, Algorithm: rules.SlidingLog, Key: k, Limit: 1, PeriodUS: st.rule.PeriodUS() + st.us,
		Cost: 1, Enforce: true, OnError: rules.FailOpen, Sensitive: true, MaxKeys: int32(st.guilt.MaxKeys),
	}
}

// check is one ban marker a request is checked against (ban, its index in
// the precheck), and, under ban_by, the guilt marker of the request's
// visitor (gi its index there, -1 without one: the ban refuses the request
// whenever it is live, a shared bucket's or a ban on the whole key).
type check struct {
	st    *Stage
	key   rules.Key // the ban marker's
	ban   int
	guilt rules.Key
	gi    int
	// match is the index in Scratch.Matches of the request's match of the
	// rule counting the banned key, -1 for none: a ban_by check keeps its
	// guilt marker there for the writes (the trip, a counted failure).
	match int
}

// checks is a request's ban checks, in the memo slot "ban": every Stage's.
type checks struct {
	list []check
	keys []rules.Key // RuleKeys' buffer
	buf  []byte      // a guilt marker's values
}

// checksOf returns the request's checks, cleared when the request begins.
func (st *Stage) checksOf(s *rules.Scratch) *checks {
	mm := s.Memo(st.slot)
	cs := memo.State[checks](mm)
	if !mm.Done {
		mm.Done = true
		cs.list = cs.list[:0]
	}
	return cs
}

// add queues the check of the ban marker of k, a counter key of st's rule,
// for the request, whose match i (-1: none) counts k: the marker, and,
// under ban_by, the request's guilt marker.
func (st *Stage) add(req *rules.Request, s *rules.Scratch, cs *checks, k rules.Key, i int) {
	c := check{st: st, key: banKey(k), gi: -1, match: i}
	c.ban = s.PreOp(st.banOp(rules.OpPeek, c.key))
	if len(st.by) > 0 {
		st.guiltOf(req, s, cs, &c)
	}
	cs.list = append(cs.list, c)
}

// guiltOf completes c with the request's guilt marker: the keyed hash of
// the banned key's values (c.key's, which name them as uniquely as the
// values do, and are the same for each value of an identity with
// several) and the request's ban_by values, under the rule's guilt
// budget. A ban_by value that is a shared bucket, missing, invalid or one
// of several names no one: the ban refuses the request whenever it is
// live.
//
// Guilt names the caller by its counted values (callers.Counted), not
// exactly as the markers that exempt do: a guilt marker accuses, and its
// absence is what spares, so the broad name is the strict one (every
// spelling of an account that shares the counter is guilty with it), and
// its key format, unchanged, forgets no guilt across an upgrade.
func (st *Stage) guiltOf(req *rules.Request, s *rules.Scratch, cs *checks, c *check) {
	buf, ok := callers.Counted(append(append(cs.buf[:0], c.key[9:]...), 0xfe), s, st.by, st.byTags, req)
	cs.buf = buf
	if !ok {
		return
	}
	// A guilt marker is flagged as a known-visitor marker is: the two
	// never meet, their IDs differ (the guilt budget's).
	c.guilt = s.HashKey(st.guilt.ID, st.byTags[0]|callers.Flag, buf)
	c.gi = s.PreOp(st.guiltOp(rules.OpPeek, c.guilt))
}

// refuses reports whether c's ban refuses the request, with the time
// left: its marker is present, the request's match of the rule is not
// known (known_visitors, exempt_known, a forgive's exemption: the rule's
// ban does not refuse what the rule does not hold), and, under ban_by,
// the request's visitor is guilty (its marker present; a fallback's
// guess, StoreError, bans no one).
func (c *check) refuses(s *rules.Scratch) (bool, time.Duration) {
	res := s.PreResult(c.ban)
	if res.Allowed || res.StoreError || known(s, c.st.rule) {
		return false, 0
	}
	if c.gi >= 0 {
		if g := s.PreResult(c.gi); g.Allowed || g.StoreError {
			return false, 0
		}
	}
	return true, res.RetryAfter
}

// known reports whether the request's match of r was taken out of r.
func known(s *rules.Scratch, r *rules.Rule) bool {
	for i := range s.Matches {
		if s.Matches[i].Rule == r && s.Matches[i].Known {
			return true
		}
	}
	return false
}

// Gate queues the ban check of m, a match of a rule whose ban refuses on
// its own route, on the key m counts (rules.Gater).
func (st *Stage) Gate(req *rules.Request, s *rules.Scratch, m *rules.Match) {
	if st.Scope != ScopeRule {
		return // its RequestGater's (sensitive)
	}
	st.add(req, s, st.checksOf(s), s.Ops[m.Op].Key, callers.MatchIndex(s, m))
}

// Admit refuses the request when m's ban does.
func (st *Stage) Admit(s *rules.Scratch, m *rules.Match) (bool, time.Duration) {
	if st.Scope != ScopeRule {
		return false, 0
	}
	cs := st.checksOf(s)
	i := callers.MatchIndex(s, m)
	for j := range cs.list {
		if c := &cs.list[j]; c.st == st && c.match == i {
			return c.refuses(s)
		}
	}
	return false, 0
}

// sensitive is the RequestGater of a ban of ban_scope = "sensitive": on a
// sensitive route it checks the ban of the rule's key for the request,
// whether the rule matches the request or not (a rule keyed on "ip" bans
// the IP everywhere; one whose key the request lacks bans nothing there).
type sensitive struct{ st *Stage }

// BeforeStore does nothing: the ban's part is the gate's.
func (sensitive) BeforeStore(*rules.Request, *rules.Scratch) {}

// GateRequest queues the checks of the request's keys of the rule, each
// once: an identity with several values has a key per value, and a ban
// trips on the value that was refused.
func (g sensitive) GateRequest(req *rules.Request, s *rules.Scratch, sensitiveRoute bool) {
	if !sensitiveRoute {
		return
	}
	st, r := g.st, g.st.rule
	cs := st.checksOf(s)
	cs.keys = s.RuleKeys(cs.keys[:0], r, req)
	first := len(cs.list)
	for j, k := range cs.keys {
		if j == 0 {
			st.add(req, s, cs, k, counted(s, r))
			continue
		}
		if !queued(cs.list[first:], banKey(k)) {
			st.add(req, s, cs, k, countedKey(s, r, k))
		}
	}
}

// AdmitRequest returns the rule when one of its checks refuses the
// request, with the longest time left.
func (g sensitive) AdmitRequest(s *rules.Scratch) (*rules.Rule, time.Duration) {
	var refusing *rules.Rule
	var left time.Duration
	cs := g.st.checksOf(s)
	for j := range cs.list {
		if c := &cs.list[j]; c.st == g.st {
			if refuse, wait := c.refuses(s); refuse && (refusing == nil || wait > left) {
				refusing, left = c.st.rule, wait
			}
		}
	}
	return refusing, left
}

// queued reports whether list holds the check of ban marker bk.
func queued(list []check, bk rules.Key) bool {
	for i := range list {
		if list[i].key == bk {
			return true
		}
	}
	return false
}

// counted returns the index of the request's first match of r that counts
// (has an op), or -1.
func counted(s *rules.Scratch, r *rules.Rule) int {
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Rule == r && m.Op >= 0 {
			return i
		}
	}
	return -1
}

// countedKey returns the index of the request's match of r whose op counts
// on key k, or -1.
func countedKey(s *rules.Scratch, r *rules.Rule, k rules.Key) int {
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Rule == r && m.Op >= 0 && s.Ops[m.Op].Key == k {
			return i
		}
	}
	return -1
}

// guiltOfMatch returns the guilt marker the request's checks keep for m
// (the last check naming it, as a later one's overwrote an earlier one's),
// ok false when none does.
func (st *Stage) guiltOfMatch(s *rules.Scratch, m *rules.Match) (k rules.Key, ok bool) {
	if !s.Memo(st.slot).Done {
		return k, false // the request was not gated: no check
	}
	cs := st.checksOf(s)
	i := callers.MatchIndex(s, m)
	for j := len(cs.list) - 1; j >= 0; j-- {
		if c := &cs.list[j]; c.st == st && c.match == i && c.gi >= 0 {
			return c.guilt, true
		}
	}
	return k, false
}

// Judge trips the ban of m, an enforcing match the rule refused: it queues
// the ban marker for the after call, unless no op of m was refused but by
// its network's share (networkFullOnly; so a match the store allowed and a
// stage refused, max_delay's, trips no ban either); and, on a rule
// counting requests or attempts, the guilt of the visitor it refused (a
// failures rule's guilt is its counted failures: failures). It changes
// nothing of m.
func (st *Stage) Judge(s *rules.Scratch, m *rules.Match, _ rules.Result) rules.Judgement {
	if m.Outcome != rules.OutcomeDeny || networkFullOnly(s, m) {
		return rules.Judgement{}
	}
	s.AfterOp(st.banOp(rules.OpAdd, banKey(s.Ops[m.Op].Key)))
	if st.rule.Count != rules.CountFailures {
		if g, ok := st.guiltOfMatch(s, m); ok {
			s.AfterOp(st.guiltOp(rules.OpAdd, g))
		}
	}
	return rules.Judgement{}
}

// networkFullOnly reports whether every op of m that refused was refused
// by its network's share (Result.NetworkFull): the rule then refused a new
// key because the client's network holds its share of the rule's budget,
// which says nothing of the key, so it writes no ban and makes no visitor
// guilty. Otherwise a network's flood would ban a bystander's phone that
// it tried to make, or make guilty a fresh visitor behind the same
// network (issue 24, a tester's finding F2).
func networkFullOnly(s *rules.Scratch, m *rules.Match) bool {
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

// failures is the Settler of a count = "failures" rule with ban_by: a
// failure the rule counts makes the request's visitor guilty of the
// rule's ban (a known caller, whom the rule does not charge, is never
// guilty).
type failures struct {
	st      *Stage
	failure []int
}

func (*failures) Behaviour() string { return "ban (guilt of failures)" }

// Settle writes the guilt of m's visitor when the origin's answer is a
// failure.
func (f *failures) Settle(s *rules.Scratch, m *rules.Match, status int, outcome []byte, settle []rules.Op) []rules.Op {
	if m.Known || !answer.IsFailure(f.failure, status, outcome) {
		return settle
	}
	g, ok := f.st.guiltOfMatch(s, m)
	if !ok {
		return settle
	}
	return append(settle, f.st.guiltOp(rules.OpAdd, g))
}

var (
	_ rules.Gater        = (*Stage)(nil)
	_ rules.Judge        = (*Stage)(nil)
	_ rules.Forgiver     = (*Stage)(nil)
	_ rules.KeyKeeper    = (*Stage)(nil)
	_ rules.RequestGater = sensitive{}
	_ rules.Settler      = (*failures)(nil)
)
