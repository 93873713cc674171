package rules

import "time"

// Stages are how a feature adds a behaviour to rules (docs/architecture.md,
// "Extension points"): a rule attribute (RuleAttrType) compiles to a Stage
// that the rule carries (Rule.AddStage), and Check runs, for each of the
// rule's matches, the phase methods the stage implements (Gater, Shaper,
// Judge), in the order its stages were added. A stage's per-request state
// lives in memo slots (Compiler.Slot, Scratch.Memo), never in Scratch
// fields, and its store ops ride in the calls the pipeline already makes:
// the gate's precheck (Scratch.PreOp), the main call (Shape adjusts the
// match's op) and the after call (Scratch.AfterOp), so a behaviour never
// adds a store call of its own.

// Stage is a rule behaviour's compiled form: one value per rule that has
// it, implementing any of Gater, Shaper, Judge and Settler (and Forgiver,
// Keeper for what it keeps in the store).
type Stage interface {
	// Behaviour names the behaviour ("queue"), for diagnostics and tests.
	Behaviour() string
}

// Gater is a Stage with a part in the gate phase, before anything is
// counted.
type Gater interface {
	Stage
	// Gate is called for each match m of the rule that counts (m.Op >= 0)
	// of req, a request not refused whatever the counters say; it queues
	// the store checks it needs with Scratch.PreOp (resolving what it
	// needs of req: ban_by's values).
	Gate(req *Request, s *Scratch, m *Match)
	// Admit is called for the same m once the precheck call returned
	// (Scratch.PreResult has its results) and reports whether the request
	// is refused before anything is counted: refused by m's rule, which
	// the request may retry after retryAfter. A store that cannot answer
	// the precheck gates nothing: Admit is not called.
	Admit(s *Scratch, m *Match) (refuse bool, retryAfter time.Duration)
}

// Shaper is a Stage with a part in the shape phase, between the gate and
// the main call: it sets what its rule's ops count beyond what the rule's
// numbers say (a calendar period's window, behaviour/calendar).
type Shaper interface {
	Stage
	// Shape is called for each match m of the rule that counts (m.Op >= 0)
	// of a request the gate let through, refused whatever the counters say
	// or not (its ops still go to the main call, as peeks or attempts), and
	// may adjust m's op, s.Ops[m.Op], in place. A visitor rule's match
	// also has its IP ceiling's op, s.Ops[m.CeilingOp] when m.CeilingOp >=
	// 0, a copy of m's with the ceiling's key, limit and burst: a Shaper
	// that changes what m counts changes both alike (the gate, before,
	// saw the op as the match phase built it). s.Now is the instant the
	// request is decided at.
	Shape(s *Scratch, m *Match)
}

// WindowShaper is a Shaper that sets each op's window itself
// (Op.WindowStartUS and PeriodUS, Op.Calendar), so that the rule's Period
// is only its nominal length: such a rule has no fixed RateLimit-Policy
// item (Rule.PolicyItem is nil: its w is the op's window), Engine.Forgive
// shapes the reset it sends as a request's op, with no request behind it,
// and a counter of the rule may live for LongestWindow
// (Policy.LongestKeyLifetime).
type WindowShaper interface {
	Shaper
	// LongestWindow is the longest window Shape sets (a calendar day
	// across a DST change: 25 hours).
	LongestWindow() time.Duration
}

// RequestGater is a part in the gate phase of every request of the
// policy, not only of its rule's matches: a ban of ban_scope = "sensitive"
// refuses its key on every sensitive route, whether its rule matches the
// request or not (behaviour/ban). Compiler.AddRequestGater registers one;
// the gate runs them after the matches' Gaters, in the order they were
// added.
type RequestGater interface {
	// Gate is called for every request req not refused whatever the
	// counters say, sensitive when a sensitive rule matched it
	// (Decision.Sensitive); it queues the store checks it needs with
	// Scratch.PreOp.
	Gate(req *Request, s *Scratch, sensitive bool)
	// Admit is called once the precheck call returned, as a Gater's
	// Admit, and returns the rule that refuses the request before
	// anything is counted (nil: none), which the request may retry after
	// retryAfter. A refusal by a rule the request does not match is that
	// rule's all the same, in metrics and logs.
	Admit(s *Scratch) (refusing *Rule, retryAfter time.Duration)
}

// Judge is a Stage with a part in the judge phase, after the main store
// call.
type Judge interface {
	Stage
	// Judge is called for each match m of the rule that counted, once its
	// outcome is decided from res, its result (a visitor rule's combined
	// with its ceiling's), unless the store could not decide it, the
	// caller is known (Match.Known), or the request is only explained
	// (Engine.Explain). m.Outcome is what the store and the rule's stages
	// judged before this one (stages run in the order they were added).
	// It may queue ops for the after call (Scratch.AfterOp), and returns
	// what it makes of m.
	Judge(s *Scratch, m *Match, res Result) Judgement
}

// Settler is a Stage with a part in Engine.Settle, once the origin has
// answered a request: a Hook that reads the request's state (memo slots).
type Settler interface {
	Stage
	// Settle is called for each match m of the rule that counted the
	// request and allowed it, after the rule's Hooks; it appends to settle
	// the ops to run given the origin's status and X-Edge-Outcome (nil,
	// "success" or "failure"), and returns settle.
	Settle(s *Scratch, m *Match, status int, outcome []byte, settle []Op) []Op
}

// Forgiver is a Stage that keeps state of its own for a key of its rule
// (a ban's marker), which Engine.Forgive clears with the key's counter.
type Forgiver interface {
	Stage
	// Forgive appends to ops the ops that clear what the stage keeps for
	// k, a counter key of its rule, and returns ops. They go to the store
	// in Forgive's call, after the counter's reset.
	Forgive(k Key, ops []Op) []Op
}

// Keeper is a Stage that writes keys of its own (a ban's marker), which
// Policy.LongestKeyLifetime counts.
type Keeper interface {
	Stage
	// KeyLifetime is the longest any key the stage writes lives.
	KeyLifetime() time.Duration
}

// Judgement is what a Judge makes of a match. The zero value changes
// nothing.
type Judgement struct {
	// Refuse refuses m, an enforcing match the store allowed, as an
	// ordinary refusal of its rule (429), retryable after RetryAfter.
	Refuse     bool
	RetryAfter time.Duration
	// Delay holds the request this long before it is forwarded
	// (Decision.Delay is the longest of them).
	Delay time.Duration
}

// AddStage adds st to r's stages. A RuleAttrType's Compile (or a
// Feature's RuleDone) calls it; a stage that implements none of Gater,
// Shaper, Judge and Settler is kept (Stages) but takes no part in Check.
func (r *Rule) AddStage(st Stage) {
	r.stages = append(r.stages, st)
	if g, ok := st.(Gater); ok {
		r.gates = append(r.gates, g)
	}
	if sh, ok := st.(Shaper); ok {
		r.shapers = append(r.shapers, sh)
	}
	if j, ok := st.(Judge); ok {
		r.judges = append(r.judges, j)
	}
	if se, ok := st.(Settler); ok {
		r.settlers = append(r.settlers, se)
	}
}

// Stages returns r's stages, in the order they were added. A feature that
// compiles several attributes into one stage finds it here.
func (r *Rule) Stages() []Stage { return r.stages }

// Now returns the instant the request is decided at (Check's now).
func (s *Scratch) Now() time.Time { return s.now }

// PreOp adds op to the gate's precheck call and returns its index for
// PreResult. Only a Gater's Gate may call it.
func (s *Scratch) PreOp(op Op) int {
	s.pre = append(s.pre, op)
	return len(s.pre) - 1
}

// PreResult returns the result of precheck op i (PreOp's index). Only a
// Gater's Admit may call it.
func (s *Scratch) PreResult(i int) *Result { return &s.mres[s.preAt+i] }

// AfterOp adds op to the after call, which Check makes once the judge
// phase is done (its result is not read: an add, a refund, a reset). Only a
// Judge may call it.
func (s *Scratch) AfterOp(op Op) { s.qops = append(s.qops, op) }

// queueGates runs the Gate of every counting match's Gaters, then the
// policy's RequestGaters'.
func (s *Scratch) queueGates(req *Request, sensitive bool) {
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Op >= 0 {
			for _, g := range m.Rule.gates {
				g.Gate(req, s, m)
			}
		}
	}
	for _, g := range s.pol.requestGaters {
		g.Gate(req, s, sensitive)
	}
}

// admitGates runs the Admit of every counting match's Gaters once the
// precheck returned, then the policy's RequestGaters', and returns the
// first rule that refuses with the longest wait of those that do.
func (s *Scratch) admitGates() (refusing *Rule, left time.Duration) {
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		for _, g := range m.Rule.gates {
			if refuse, wait := g.Admit(s, m); refuse && (refusing == nil || wait > left) {
				refusing, left = m.Rule, wait
			}
		}
	}
	for _, g := range s.pol.requestGaters {
		if r, wait := g.Admit(s); r != nil && (refusing == nil || wait > left) {
			refusing, left = r, wait
		}
	}
	return refusing, left
}

// shape runs the Shape of every counting match's Shapers.
func (s *Scratch) shape() {
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Op >= 0 {
			for _, sh := range m.Rule.shapers {
				sh.Shape(s, m)
			}
		}
	}
}

// shapeWindow gives op, one of r's sent outside a request (Forgive's
// reset), the window r's WindowShapers set on a request's op at now.
func (r *Rule) shapeWindow(now time.Time, op *Op) {
	var s *Scratch
	m := Match{Rule: r, Op: 0, CeilingOp: -1, Enforce: op.Enforce}
	for _, sh := range r.shapers {
		if w, ok := sh.(WindowShaper); ok {
			if s == nil {
				s = &Scratch{now: now, Ops: []Op{*op}}
			}
			w.Shape(s, &m)
		}
	}
	if s != nil {
		*op = s.Ops[0]
	}
}

// longestWindow is the longest window an op of r counts: its Period, or a
// WindowShaper's LongestWindow when longer; shaped reports whether a
// WindowShaper sets r's windows.
func (r *Rule) longestWindow() (d time.Duration, shaped bool) {
	d = r.Period
	for _, sh := range r.shapers {
		if w, ok := sh.(WindowShaper); ok {
			d, shaped = max(d, w.LongestWindow()), true
		}
	}
	return d, shaped
}

// RuleKeys appends to dst the counter keys of rule r for req, for a stage
// that checks a rule the request need not match (a ban of ban_scope =
// "sensitive"): its key for the request's first combination of values,
// then, for an identity whose sources gave several (values.go), each
// further combination's that is present; none when the first is not
// present (Missing, Invalid or Absent). A key may come more than once.
func (s *Scratch) RuleKeys(dst []Key, r *Rule, req *Request) []Key {
	k, st := s.owner.key(r, req, s, false)
	if st != Present {
		return dst
	}
	dst = append(dst, k)
	if r.multi == nil {
		return dst
	}
	total := s.combinations(r, req)
	for j := 1; j < total; j++ {
		s.setCombination(r, j)
		if k, st := s.owner.key(r, req, s, false); st == Present {
			dst = append(dst, k)
		}
	}
	s.combo = valueCombo{}
	return dst
}

// AppendNames appends to buf the request's values of chars, each after
// its tag (tags[i]), the values their rules count, for a marker that
// names the caller by them (ban_by's guilt: every spelling that shares a
// counter is named with it; Scratch.HashKey hashes the result). ok is
// false when one of them names no one: missing or invalid, several values
// (sources that disagree), or a bucket many clients share
// (BucketCharacteristic). buf comes back grown either way.
func (s *Scratch) AppendNames(buf []byte, chars []Characteristic, tags []byte, req *Request) ([]byte, bool) {
	return appendCallerValues(buf, chars, tags, 0, req, s)
}
