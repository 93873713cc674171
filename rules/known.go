package rules

import (
	"bytes"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Known visitors: a lockout that cannot be a weapon (docs/policy.md,
// "known_visitors"). An account-wide failure rule (key = ["account"],
// count = "failures") would let anyone lock the real user out by failing
// on purpose. With known_visitors = "30d" and known_by = ["visitor"], a
// success records a marker for the account and the visitor that logged
// in; for the next 30 days that visitor is not held to the rule (it is
// decided, never refuses and is never charged), while everyone else is.
//
// A marker is a sliding_log counter of limit 1 whose period is the
// known_visitors time: present (a peek is refused) for exactly that long
// after the last success. Its key hashes the rule's key values and the
// known_by values together, each naming the caller exactly (an account as
// it was sent, a visitor by its ID: CallerCharacteristic), under the
// rule's ID with the marker flag, so no store sees the account or the
// visitor.

// markerFlag marks a known-visitor marker in a key's tag byte (0x80: a
// key of several parts, 0x40: a ceiling).
const markerFlag = 0x20

// marker is a known-visitor marker of one match of the request.
type marker struct {
	match int // index in Scratch.Matches
	key   Key
}

// callerForm starts the hashed values of every marker that exempts a
// caller (known_visitors, known { }): since it, they name the caller
// exactly (CallerCharacteristic: an account as it was sent, a visitor by
// its ID alone), and a marker of the format before, keyed on counted
// values, is never read again (docs/policy.md, "known", "Upgrading"). No
// marker of that format began with it: theirs began with a tag, below
// 0x20.
const callerForm = 0xfc

// addMarker computes the marker key of match i (rule r) and queues its
// check: the caller values of the rule's key and of its known_by, each
// named exactly (CallerCharacteristic), so a success on the attacker's own
// "rené" makes its visitor known for "rené" and never for the victim's
// "rene", whose counter it shares. A value that is missing or invalid, or
// a request naming several callers (an identity whose sources disagree),
// recognises no one: no marker, the rule applies. A cookieless bucket is
// named by its address, as ever (docs/policy.md, "known_visitors").
func (e *Engine) addMarker(r *Rule, req *Request, s *Scratch, i int) {
	buf := append(s.mbuf[:0], callerForm)
	for j, ch := range r.Key {
		var ok bool
		if buf, ok = appendCaller(buf, ch, r.keyTags[j], r.keyShared[j], exactNames|bucketNames, req, s); !ok {
			s.mbuf = buf
			return
		}
	}
	buf = append(buf, 0xff) // the rule's values end here
	buf, ok := appendCallerValues(buf, r.knownBy, r.knownTags, exactNames|bucketNames, req, s)
	s.mbuf = buf
	if !ok {
		return
	}
	var k Key
	copy(k[0:8], r.ID[:])
	k[8] = r.keyTags[0] | markerFlag
	copy(k[9:], s.valueHash(buf))
	s.Matches[i].Marker, s.Matches[i].HasMarker = k, true
	s.markers = append(s.markers, marker{match: i, key: k})
}

// markKnown takes the matches whose marker is present (res, in the order
// of s.markers, from precheck's call) out of their rule: their ops are
// decided like a dry-run peek (never refusing, never consuming) and
// Match.Known is set. A fallback's guess (StoreError) knows no one.
func (e *Engine) markKnown(s *Scratch, res []Result) {
	for i, mk := range s.markers {
		if res[i].Allowed || res[i].StoreError {
			continue
		}
		m := &s.Matches[mk.match]
		m.Known = true
		for _, j := range [2]int{m.Op, m.CeilingOp} {
			if j >= 0 {
				s.Ops[j].Kind, s.Ops[j].Enforce, s.Ops[j].Attempts = OpPeek, false, false
			}
		}
	}
}

// knownVisitors is the Hook that records the marker once the origin's
// answer for the account is a success (success_status, or X-Edge-Outcome:
// success): the visitor is known for the rule's known_visitors time from
// now, a known one's time starting again.
type knownVisitors struct {
	success []int
	us      int64
}

func (h knownVisitors) AfterOrigin(m *Match, _ []Op, status int, outcome []byte, settle []Op) []Op {
	if !m.HasMarker || m.Several || !IsSuccess(h.success, status, outcome) {
		// A success of a request whose identity gave several values
		// (values.go) makes no value's visitor known: the origin acted on
		// one of them, which the edge cannot tell, and an attacker could
		// otherwise log in with its own username beside a victim's email
		// and be known for the victim's account.
		return settle
	}
	return append(settle, knownOp(OpAdd, m.Rule, m.Marker))
}

// knownOp is the op of r's known-visitor marker k: kind OpPeek to check
// it, OpAdd to write it. A Marker: the memory store keeps it in r's marker
// budget and never evicts it while it lasts, so neither a flood of r's new
// keys nor other visitors' markers can make a known visitor unknown, and a
// marker never evicts r's counters (docs/memory-store.md, "Markers").
func knownOp(kind OpKind, r *Rule, k Key) Op {
	return Op{
		Kind: kind, Algorithm: SlidingLog, Key: k, Limit: 1, PeriodUS: r.knownUS,
		Cost: 1, Enforce: kind == OpAdd, OnError: FailOpen, MaxKeys: int32(r.MaxKeys), Marker: true,
		NetworkKeys: int32(r.NetworkKeys),
	}
}

// Known callers (docs/policy.md, "known"): no defence may be aimed at the
// people it protects. A known "NAME" { } block names the requests whose
// success makes their caller known (a login, an OTP verify), what
// recognises the caller (by: a visitor and the account it logged in to, a
// phone whose code was verified) and for how long after its last success
// (for). A rule whose exempt_known names the block does not hold a known
// caller to what it shares with others: the request is decided, never
// refused nor charged by the rule (a visitor rule: by its ip_ceiling, the
// budget of every visitor behind the address; the visitor's own counter
// still holds), and the rule's ban does not refuse it. Whatever the
// caller's own key counts (its visitor, its phone, its account from its
// address) holds as before.
//
// Recorded on one route, checked on another: a verify makes the phone
// known to the send route's range rule. A marker is a sliding_log counter
// of limit 1 whose period is the block's for, under the block's own ID
// (a hash of its name, apart from every rule's), keyed by the keyed hash
// of the by values, each naming the caller exactly (CallerCharacteristic:
// a browser known wherever it logs in from, for the account as it sent
// it), so no store sees a phone, an account or a visitor ID. Its checks
// ride in precheck's call (the one before the main call, with bans and
// known_visitors markers); its writes in Settle's call, after a success,
// and only when the markers the block requires (requires = ["code-sent"])
// were live for the request's values in precheck's call: a verify makes
// known only a phone a code was sent to. A value that is a bucket many clients share (a visitor's
// cookieless bucket, BucketCharacteristic) recognises no one and is never
// recorded. Markers are Sensitive ops in a budget of their own, so the
// memory store never evicts a live one; a full budget records no new
// caller (the rules apply to it as before) and forgets none.

// Known is a compiled known "NAME" { } block.
type Known struct {
	// Name is the block's label; ID, a hash of it, starts its markers'
	// keys, so they follow the name across reloads.
	Name string
	ID   [8]byte
	// DefRange is where the block is defined.
	DefRange hcl.Range

	index   int   // position in Policy.knowns and in Scratch.knowns
	match   *Rule // what the block matches, and its characteristics' grouping; never in Policy.Rules
	by      []Characteristic
	tags    []byte
	forUS   int64
	success []int
	budget  *Budget
	used    bool // some rule's exempt_known, or a block's requires, names it
	// requires are the blocks whose marker for the request's own values
	// must be live (in precheck's call) for a success to record this
	// block's: a verify makes known only a phone a code was sent to.
	requires []*Known
	// networkKeys is the most markers of the block's budget one client
	// network may make (the store's network_share, network.go), so that
	// one network cannot fill the budget and leave every other caller
	// unknowable; 0: no bound.
	networkKeys int32
}

// Knowns returns the policy's known blocks, in file order. The caller
// must not modify them.
func (p *Policy) Knowns() []*Known { return p.knowns }

// NetworkKeys returns the most markers of k's budget one client network
// may make in the memory store (the store's network_share of the block's
// max_keys, rounded down, at least 1), or 0 for no bound.
func (k *Known) NetworkKeys() int { return int(k.networkKeys) }

// For returns how long after its last success a caller of k is known.
func (k *Known) For() time.Duration { return DurationUS(k.forUS) }

// knownState is what one request knows of one known block.
type knownState struct {
	resolved bool // ok and key are computed
	ok       bool // every by value is present and one caller's: key is its marker
	record   bool // the request matches the block: its success records the marker
	queued   bool // the marker's check is in precheck's call, at mops[peek]
	live     bool // the marker is present: the caller is known
	peek     int
	key      Key
}

// op is the op of one of k's markers: kind OpPeek to check it, OpAdd to
// write it.
func (k *Known) op(kind OpKind, key Key) Op {
	return Op{
		Kind: kind, Algorithm: SlidingLog, Key: key, Limit: 1, PeriodUS: k.forUS,
		Cost: 1, Enforce: true, OnError: FailOpen, Sensitive: true, MaxKeys: int32(k.budget.MaxKeys),
		NetworkKeys: k.networkKeys,
	}
}

// queueKnown resolves the markers a request needs: those its matching
// rules' exempt_known check (queued for precheck's call) and those of the
// known blocks it matches (written by Settle after a success). Each block's
// marker is resolved at most once a request.
func (e *Engine) queueKnown(p *Policy, req *Request, s *Scratch) {
	for range p.knowns {
		s.knowns = append(s.knowns, knownState{peek: -1})
	}
	for i := range s.Matches {
		if s.Matches[i].Op < 0 {
			continue
		}
		for _, k := range s.Matches[i].Rule.exemptKnown {
			if st := e.resolveKnown(k, req, s); st.ok && !st.queued {
				st.queued = true
				s.knownChecks++
			}
		}
	}
	for _, k := range p.knowns {
		if !k.match.matches(req) {
			continue
		}
		if st := e.resolveKnown(k, req, s); st.ok && e.queueRequired(k, req, s) {
			st.record = true
			s.knownRecords++
		}
	}
}

// queueRequired queues the checks of the markers k requires, for the
// request's own values, in precheck's call; false when the request lacks
// one's values: then no success of it records k.
func (e *Engine) queueRequired(k *Known, req *Request, s *Scratch) bool {
	for _, r := range k.requires {
		st := e.resolveKnown(r, req, s)
		if !st.ok {
			return false
		}
		if !st.queued {
			st.queued = true
			s.knownChecks++
		}
	}
	return true
}

// requiredLive reports whether every marker k requires was live in
// precheck's call (a store that could not answer knows no one: k is not
// recorded).
func (s *Scratch) requiredLive(k *Known) bool {
	for _, r := range k.requires {
		if !s.knowns[r.index].live {
			return false
		}
	}
	return true
}

// resolveKnown computes the marker of block k for req, once: its by
// values, each naming the caller exactly (CallerCharacteristic). A by value
// that is missing, invalid, names several callers or is a shared bucket
// leaves it not ok: nobody is recognised by it.
func (e *Engine) resolveKnown(k *Known, req *Request, s *Scratch) *knownState {
	st := &s.knowns[k.index]
	if st.resolved {
		return st
	}
	st.resolved = true
	buf, ok := appendCallerValues(append(s.mbuf[:0], callerForm), k.by, k.tags, exactNames, req, s)
	s.mbuf = buf
	if !ok {
		return st
	}
	copy(st.key[0:8], k.ID[:])
	st.key[8] = k.tags[0] | markerFlag
	copy(st.key[9:], s.valueHash(buf))
	st.ok = true
	return st
}

// naming is how a marker names the request's caller by its values.
type naming uint8

const (
	// exactNames: by each characteristic's caller value
	// (CallerCharacteristic), for the markers that exempt a caller
	// (known_visitors, known { }); without it, by the counted value, for
	// the markers that accuse one (ban_by's guilt: every spelling that
	// shares the counter is guilty with it).
	exactNames naming = 1 << iota
	// bucketNames: a bucket many clients share (BucketCharacteristic)
	// names that bucket (known_visitors' cookieless bucket of an address);
	// without it, it names no one.
	bucketNames
)

// appendCaller appends the request's value of ch, after its tag, to buf,
// named as how says; ok is false when it is missing or invalid, when
// the request carries several values (an identity whose sources disagree
// names no one caller: a login with its own username and a victim's email
// must be neither recognised as its own nor recorded as the victim's), or,
// without bucketNames, when it is a shared bucket. shared: the
// characteristic is the same for every request (global) and may append
// nothing. buf comes back grown either way, for its capacity.
func appendCaller(buf []byte, ch Characteristic, tag byte, shared bool, how naming, req *Request, s *Scratch) ([]byte, bool) {
	if b, isBucket := ch.(BucketCharacteristic); isBucket && how&bucketNames == 0 && b.SharedBucket(req, s) {
		return buf, false
	}
	buf = append(buf, tag)
	n := len(buf)
	var out []byte
	var st Status
	if cc, ok := ch.(CallerCharacteristic); ok && how&exactNames != 0 {
		out, st = cc.AppendCaller(buf, req, s)
	} else {
		out, st = ch.AppendValue(buf, req, s)
	}
	if st != Present || len(out) < n || (len(out) == n && !shared) || !bytes.Equal(out[:n], buf) {
		return buf, false
	}
	if mc, multi := ch.(MultiCharacteristic); multi && mc.MaxValues() > 1 && mc.Values(req, s) > 1 {
		return out, false
	}
	return out, true
}

// appendCallerValues appends the request's values of chars (each after its
// tag, as appendCaller does) to buf; ok is false when one names no one.
func appendCallerValues(buf []byte, chars []Characteristic, tags []byte, how naming, req *Request, s *Scratch) ([]byte, bool) {
	for j, ch := range chars {
		var ok bool
		if buf, ok = appendCaller(buf, ch, tags[j], false, how, req, s); !ok {
			return buf, false
		}
	}
	return buf, true
}

// folds reports whether r's key folds what req sent into a form other
// callers' values share (CallerCharacteristic.Folds): a success of the
// request then clears no counter of r (reset_on_success).
func (r *Rule) folds(req *Request, s *Scratch) bool {
	for _, ch := range r.Key {
		if cc, ok := ch.(CallerCharacteristic); ok && cc.Folds(req, s) {
			return true
		}
	}
	return false
}

// appendKnownOps appends the checks of the queued markers to ops
// (precheck's call), recording where each is.
func (s *Scratch) appendKnownOps(ops []Op) []Op {
	for i := range s.knowns {
		if st := &s.knowns[i]; st.queued {
			st.peek = len(ops)
			ops = append(ops, s.pol.knowns[i].op(OpPeek, st.key))
		}
	}
	return ops
}

// markKnownCallers reads the checks' results (res, precheck's) and takes
// the matches of the known callers out of what they share: a rule whose
// exempt_known names a block with a live marker decides the request
// without refusing or charging it (Match.Known), but a visitor rule only
// lifts its ip_ceiling (its op becomes a peek and CeilingOp -1): the
// visitor's own counter is its own. A fallback's guess (StoreError) knows
// no one.
func (s *Scratch) markKnownCallers(res []Result) {
	for i := range s.knowns {
		if st := &s.knowns[i]; st.peek >= 0 {
			st.live = !res[st.peek].Allowed && !res[st.peek].StoreError
		}
	}
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 || m.Known || !s.knownTo(m.Rule) {
			continue
		}
		if m.CeilingOp >= 0 {
			peekOnly(&s.Ops[m.CeilingOp])
			m.CeilingOp = -1
			continue
		}
		m.Known = true
		peekOnly(&s.Ops[m.Op])
	}
}

// knownTo reports whether a block r's exempt_known names has a live
// marker for the request.
func (s *Scratch) knownTo(r *Rule) bool {
	for _, k := range r.exemptKnown {
		if s.knowns[k.index].live {
			return true
		}
	}
	return false
}

// peekOnly makes op decided as a dry-run peek: it never refuses, never
// consumes.
func peekOnly(op *Op) { op.Kind, op.Enforce, op.Attempts = OpPeek, false, false }

// appendKnownRecords appends the marker writes of the known blocks the
// request matched, once the origin's answer is a success by the block's
// success_status or X-Edge-Outcome and the markers the block requires were
// live: the caller is known for the block's for from now, a known one's
// time starting again (Settle's call).
func (s *Scratch) appendKnownRecords(status int, outcome []byte, settle []Op) []Op {
	if s.knownRecords == 0 {
		return settle
	}
	for i := range s.knowns {
		if k := s.pol.knowns[i]; s.knowns[i].record && IsSuccess(k.success, status, outcome) && s.requiredLive(k) {
			settle = append(settle, k.op(OpAdd, s.knowns[i].key))
		}
	}
	return settle
}
