package forgive

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/rules"
)

// Feature returns the forgive behaviour: the exemptions Forgive grants,
// for every counting rule of the policy.
func Feature() rules.Feature {
	return rules.Feature{
		Name: "forgive",
		PolicyDone: func(c *rules.Compiler) {
			x := &exemptions{slot: c.Slot("forgive")}
			c.SetExemptions(x)
			c.SetValue("forgive", x) // Forgive's
		},
	}
}

// exemptFlag is flipped, not set, in an exemption marker's tag byte. A
// rule's keys all carry its first characteristic's tag with flags in the
// high bits (0x80: several parts, 0x40: a ceiling, 0x20: a marker, 0x10:
// a ban), so bit 3 is the same in all of them; flipping it makes a key no
// other key of the rule can be. Setting it would not: the tags 8 to 15
// (phone to route, account among them) already have it, and an account
// rule's exemption would be its own counter.
const exemptFlag = 0x08

// exemptKey is the exemption marker of a rule's key.
func exemptKey(k rules.Key) rules.Key {
	k[8] ^= exemptFlag
	return k
}

// exemptUnits is an exemption marker's GCRA: one unit a millisecond over
// MaxExempt, as many units of burst.
const exemptUnits = int64(MaxExempt / time.Millisecond)

// exemptOp is an exemption marker's op on k, of rule r: kind OpAdd with
// cost the exemption in milliseconds to write it, OpPeek (the cost given
// is ignored: the whole burst) to check it, OpReset to clear it (doc.go).
func exemptOp(kind rules.OpKind, r *rules.Rule, k rules.Key, cost int64) rules.Op {
	if kind == rules.OpPeek {
		cost = exemptUnits
	}
	return rules.Op{
		Kind: kind, Algorithm: rules.GCRA, Key: k, Limit: exemptUnits, Burst: exemptUnits,
		PeriodUS: MaxExempt.Microseconds(), Cost: cost, Enforce: true, OnError: rules.FailOpen,
		Sensitive: true, MaxKeys: int32(r.MaxKeys), Marker: true,
		NetworkKeys: int32(r.NetworkKeys),
	}
}

// exemptions is a policy's rules.Exemptions: slot is the memo slot of the
// request's checks.
type exemptions struct{ slot int }

// check is one exemption marker a request is checked against: the match
// (its index in Scratch.Matches) whose key it exempts, and its precheck
// op's index.
type check struct{ match, pre int }

// checks is a request's checks, in the memo slot "forgive".
type checks struct{ list []check }

// Gate queues a peek of the exemption marker of each counting match whose
// rule has a live exemption on this node. Without one (the usual case) it
// is a lookup of the record and one atomic load.
func (x *exemptions) Gate(s *rules.Scratch) {
	live := recordOf(s).live.Load()
	if live == nil || len(*live) == 0 {
		return
	}
	mm := s.Memo(x.slot)
	cs := memo.State[checks](mm)
	mm.Done, cs.list = true, cs.list[:0]
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		if u, ok := (*live)[m.Rule.ID]; ok && u.After(s.Now()) {
			k := exemptKey(s.Ops[m.Op].Key)
			cs.list = append(cs.list, check{match: i, pre: s.PreOp(exemptOp(rules.OpPeek, m.Rule, k, 0))})
		}
	}
}

// Admit takes the matches whose exemption marker is present out of their
// rule (Scratch.TakeOut): decided, never refusing, never charged. A
// fallback's guess (StoreError) exempts no one.
func (x *exemptions) Admit(s *rules.Scratch) {
	mm := s.Memo(x.slot)
	if !mm.Done {
		return // Gate queued nothing
	}
	for _, c := range mm.State.(*checks).list {
		if res := s.PreResult(c.pre); res.Allowed || res.StoreError {
			continue
		}
		s.TakeOut(&s.Matches[c.match])
	}
}

// exempt returns clear with the op that clears r's exemption of k
// appended (Forgive's call), the op that writes one for d, rounded up to
// the millisecond, from now, sent once that call succeeded (a store judges
// a call's ops against the state before it), and its end.
func (x *exemptions) exempt(r *rules.Rule, k rules.Key, now time.Time, d time.Duration, clear []rules.Op) (cleared, write []rules.Op, until time.Time) {
	ex := exemptKey(k)
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return append(clear, exemptOp(rules.OpReset, r, ex, 0)), []rules.Op{exemptOp(rules.OpAdd, r, ex, int64(ms))}, now.Add(ms * time.Millisecond)
}

// Exempting returns the names of p's rules with a live exemption on e at
// now (made on this node, or noted from the fleet: ExemptFrom),
// sorted.
func Exempting(e *rules.Engine, p *rules.Policy, now time.Time) []string {
	rec := recordOf(e)
	var out []string
	for _, r := range p.Rules {
		if rec.until(r.ID).After(now) {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out
}

// record is an Engine's record of the rules with a live exemption, by
// rule ID, each with the end of its latest one: what the request path
// reads to decide whether to check markers at all. Copy on write: a
// forgive is rare, the read is on every request.
type record struct {
	mu   sync.Mutex
	live atomic.Pointer[map[[8]byte]time.Time]
}

// recordKey is the key of an Engine's record (rules.Engine.Kept).
type recordKey struct{}

// recordOf returns the record k (an Engine, or a Scratch's) keeps.
func recordOf(k interface{ Kept(any, func() any) any }) *record {
	return k.Kept(recordKey{}, func() any { return &record{} }).(*record)
}

// record notes an exemption of rule id until until, dropping the ones
// over at now; a later end already noted for id stays.
func (x *record) record(id [8]byte, until, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	next := map[[8]byte]time.Time{id: until}
	if old := x.live.Load(); old != nil {
		for k, u := range *old {
			if u.After(now) && (k != id || u.After(until)) {
				next[k] = u
			}
		}
	}
	x.live.Store(&next)
}

// until returns the end of rule id's latest exemption, zero without one.
func (x *record) until(id [8]byte) time.Time {
	if m := x.live.Load(); m != nil {
		return (*m)[id]
	}
	return time.Time{}
}

var _ rules.Exemptions = (*exemptions)(nil)
