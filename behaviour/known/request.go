package known

import (
	"time"

	"github.com/edge-gateway/edge/behaviour/answer"
	"github.com/edge-gateway/edge/behaviour/callers"
	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/rules"
)

// A request's known callers, in the gate phase and in Settle. The rules'
// stages (Stage, a rules.Gater) queue the checks of their matches' markers
// in the precheck call and take a known caller's match out of its rule
// once they are answered; the policy's request hook (hook, a
// rules.RequestGater and RequestSettler) checks what the blocks the
// request matches require, and writes the markers after a success. Their
// state is one memo slot's (request), reused from request to request, so
// the decision path allocates nothing once warm.

// request is what one request knows of its known callers.
type request struct {
	// blocks is the state of each of the policy's known blocks, by index;
	// records of them are written after a success.
	blocks  []blockState
	records int
	// admitted is set once the precheck's answers are read (admit).
	admitted bool
	// markers are the known_visitors markers of the request's matches.
	markers []marker
	buf     []byte
}

// blockState is what one request knows of one known block.
type blockState struct {
	resolved bool // ok and key are computed
	ok       bool // every by value is present and one caller's: key is its marker
	record   bool // the request matches the block: its success records the marker
	queued   bool // the marker's check is in the precheck call, at peek
	live     bool // the marker is present: the caller is known
	peek     int
	key      rules.Key
}

// marker is a known_visitors marker of one match of the request.
type marker struct {
	match int // index in Scratch.Matches
	peek  int // its check's index in the precheck call
	key   rules.Key
	stage *Stage
}

// hook is a policy's request hook for its known callers.
type hook struct {
	slot   int // the request state's memo slot
	blocks []*Block
}

var (
	_ rules.RequestGater   = (*hook)(nil)
	_ rules.RequestSettler = (*hook)(nil)
	_ rules.Gater          = (*Stage)(nil)
	_ rules.KeyKeeper      = (*Stage)(nil)
	_ rules.Resolver       = (*Stage)(nil)
)

// state returns the request's state, fresh when the request had none
// yet (Scratch.Begin cleared the slot).
func (h *hook) state(s *rules.Scratch) *request {
	m := s.Memo(h.slot)
	rq := memo.State[request](m)
	if !m.Done {
		m.Done = true
		rq.blocks, rq.records, rq.markers, rq.admitted = rq.blocks[:0], 0, rq.markers[:0], false
		for range h.blocks {
			rq.blocks = append(rq.blocks, blockState{peek: -1})
		}
	}
	return rq
}

// current returns the request's state, or nil when nothing of the
// request touched it.
func (h *hook) current(s *rules.Scratch) *request {
	if m := s.Memo(h.slot); m.Done {
		return m.State.(*request)
	}
	return nil
}

// resolve computes the marker of block k for req, once: its by values,
// each naming the caller exactly (callers.Exact). A by value
// that is missing, invalid, names several callers or is a shared bucket
// leaves it not ok: nobody is recognised by it.
func (rq *request) resolve(k *Block, req *rules.Request, s *rules.Scratch) *blockState {
	st := &rq.blocks[k.index]
	if st.resolved {
		return st
	}
	st.resolved = true
	buf, ok := callers.Exact(append(rq.buf[:0], callerForm), s, k.by, k.tags, false, req)
	rq.buf = buf
	if !ok {
		return st
	}
	st.key, st.ok = s.HashKey(k.ID, k.tags[0]|callers.Flag, buf), true
	return st
}

// check queues the check of k's marker for the request, once, in the
// precheck call; false when the request lacks its values.
func (rq *request) check(k *Block, req *rules.Request, s *rules.Scratch) bool {
	st := rq.resolve(k, req, s)
	if st.ok && !st.queued {
		st.queued = true
		st.peek = s.PreOp(k.op(rules.OpPeek, st.key))
	}
	return st.ok
}

// BeforeStore does nothing: the hook's part is the gate's and Settle's.
func (*hook) BeforeStore(*rules.Request, *rules.Scratch) {}

// GateRequest resolves the markers of the known blocks the request
// matches, which Settle writes after a success, and queues the checks of
// the markers each requires, for the request's own values; a block whose
// requirement the request lacks the values of is not recorded.
func (h *hook) GateRequest(req *rules.Request, s *rules.Scratch, _ bool) {
	if len(h.blocks) == 0 {
		return
	}
	rq := h.state(s)
	for _, k := range h.blocks {
		if !k.match.Matches(req) {
			continue
		}
		if st := rq.resolve(k, req, s); st.ok && rq.checkRequired(k, req, s) {
			st.record = true
			rq.records++
			s.WantSettle()
		}
	}
}

// checkRequired queues the checks of the markers k requires, for the
// request's own values; false when the request lacks one's values.
func (rq *request) checkRequired(k *Block, req *rules.Request, s *rules.Scratch) bool {
	for _, r := range k.requires {
		if !rq.check(r, req, s) {
			return false
		}
	}
	return true
}

// AdmitRequest reads the checks of the blocks' markers, if no Stage's
// Admit has (admit), for Settle's records. It refuses nothing.
func (h *hook) AdmitRequest(s *rules.Scratch) (*rules.Rule, time.Duration) {
	if rq := h.current(s); rq != nil {
		rq.admit(s)
	}
	return nil, 0
}

// admit reads, once per request, the checks of the blocks' markers: a
// marker present makes its caller known. The first of the Stages' Admit
// (which the gate runs before the request gaters' AdmitRequest) calls it,
// so that exempt_known reads the blocks' markers. A fallback's guess
// (StoreError) knows no one.
func (rq *request) admit(s *rules.Scratch) {
	if rq.admitted {
		return
	}
	rq.admitted = true
	for i := range rq.blocks {
		if st := &rq.blocks[i]; st.queued {
			res := s.PreResult(st.peek)
			st.live = !res.Allowed && !res.StoreError
		}
	}
}

// requiredLive reports whether every marker k requires was live in the
// precheck call (a store that could not answer knows no one: k is not
// recorded).
func (rq *request) requiredLive(k *Block) bool {
	for _, r := range k.requires {
		if !rq.blocks[r.index].live {
			return false
		}
	}
	return true
}

// AfterOrigin appends, once the origin's answer is a success, the marker
// writes of the request's known callers: each known_visitors marker of a
// match its rule counted and allowed, by the rule's success_status (a
// success of a request whose identity gave several values makes no
// value's visitor known: the origin acted on one of them, which the edge
// cannot tell, and an attacker could otherwise log in with its own
// username beside a victim's email and be known for the victim's
// account), and the marker of each known block the request matched, by
// the block's success_status, when the markers it requires were live. The
// caller is known from now, a known one's time starting again. The
// origin's X-Edge-Outcome overrides the status.
func (h *hook) AfterOrigin(s *rules.Scratch, status int, outcome []byte, settle []rules.Op) []rules.Op {
	rq := h.current(s)
	if rq == nil {
		return settle
	}
	for _, mk := range rq.markers {
		m := &s.Matches[mk.match]
		if m.Op < 0 || m.Outcome != rules.OutcomeAllow || m.Several || !answer.IsSuccess(mk.stage.success, status, outcome) {
			continue
		}
		settle = append(settle, mk.stage.visitorOp(rules.OpAdd, m.Rule, mk.key))
	}
	if rq.records == 0 {
		return settle
	}
	for i, k := range h.blocks {
		if st := &rq.blocks[i]; st.record && answer.IsSuccess(k.success, status, outcome) && rq.requiredLive(k) {
			settle = append(settle, k.op(rules.OpAdd, st.key))
		}
	}
	return settle
}

// Gate queues the checks of m's markers in the precheck call: its
// known_visitors marker (the first value's match only: the further
// values of an identity with several name no one caller) and those of
// the blocks its exempt_known names.
func (k *Stage) Gate(req *rules.Request, s *rules.Scratch, m *rules.Match) {
	rq := k.hook.state(s)
	if k.Visitors > 0 && m.Value == 0 {
		k.queueVisitor(rq, s, m, req)
	}
	for _, b := range k.exempt {
		rq.check(b, req, s)
	}
}

// queueVisitor computes m's known_visitors marker and queues its check:
// the caller values of the rule's key and of its known_by, each named
// exactly (callers.Key, callers.Exact), so a success on the
// attacker's own "rené" makes its visitor known for "rené" and never for
// the victim's "rene", whose counter it shares. A value that is missing
// or invalid, or a request naming several callers, recognises no one: no
// marker, the rule applies. A cookieless bucket is named by its address,
// as ever (docs/policy.md, "known_visitors").
func (k *Stage) queueVisitor(rq *request, s *rules.Scratch, m *rules.Match, req *rules.Request) {
	r := m.Rule
	buf, ok := callers.Key(append(rq.buf[:0], callerForm), s, r, req)
	if ok {
		buf = append(buf, 0xff) // the rule's values end here
		buf, ok = callers.Exact(buf, s, k.by, k.tags, true, req)
	}
	rq.buf = buf
	if !ok {
		return
	}
	key := s.HashKey(r.ID, r.KeyTag(0)|callers.Flag, buf)
	rq.markers = append(rq.markers, marker{match: callers.MatchIndex(s, m), peek: s.PreOp(k.visitorOp(rules.OpPeek, r, key)), key: key, stage: k})
}

// Admit takes m out of its rule when its caller is known: by its
// known_visitors marker, present in the precheck (Scratch.TakeOut: its
// ops decided as dry-run peeks, never refusing, never charged), or by a
// live marker of a block its exempt_known names, which lifts only the IP
// ceiling of a visitor rule (the visitor's own counter is its own). It
// never refuses. A fallback's guess (StoreError) knows no one.
func (k *Stage) Admit(s *rules.Scratch, m *rules.Match) (bool, time.Duration) {
	rq := k.hook.current(s)
	if rq == nil {
		return false, 0
	}
	rq.admit(s)
	if k.Visitors > 0 {
		i := callers.MatchIndex(s, m)
		for _, mk := range rq.markers {
			if res := s.PreResult(mk.peek); mk.match == i && !res.Allowed && !res.StoreError {
				s.TakeOut(m)
			}
		}
	}
	if m.Known || !rq.knownTo(k.exempt) {
		return false, 0
	}
	if m.CeilingOp >= 0 {
		op := &s.Ops[m.CeilingOp]
		op.Kind, op.Enforce, op.Attempts = rules.OpPeek, false, false
		m.CeilingOp = -1
		return false, 0
	}
	s.TakeOut(m)
	return false, 0
}

// knownTo reports whether one of blocks has a live marker for the
// request.
func (rq *request) knownTo(blocks []*Block) bool {
	for _, b := range blocks {
		if rq.blocks[b.index].live {
			return true
		}
	}
	return false
}
