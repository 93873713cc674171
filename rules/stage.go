package rules

import (
	"strings"
	"time"
)

// Stages are how a feature adds a behaviour to rules (docs/architecture.md,
// "Extension points", "The decision pipeline"): a rule attribute compiles
// to a Stage the rule carries (Rule.AddStage), whose phase methods Check,
// Settle and the in-flight lifecycle run in the order its stages were
// added. Its per-request state lives in memo slots, never in Scratch
// fields, and its ops ride in the calls the pipeline already makes
// (Scratch.PreOp, the op Shape shapes, Scratch.AfterOp, Settle's), so a
// behaviour never adds a store call of its own.

// Stage is a rule behaviour's compiled form: one value per rule that has
// it, implementing any of Exempter, Gater, Shaper, Judge, Settler, Holder,
// LocalLimit and Expander (and Resolver, Forgiver and KeyKeeper for what it
// resolves and keeps in the store).
type Stage interface {
	// Behaviour names the behaviour ("queue"), for diagnostics and tests.
	Behaviour() string
}

// Exempter is a Stage with a part at the start of the match phase, on a
// rule whose action is "skip" (behaviour/skip): such a rule counts nothing
// and refuses nothing, and is decided before every other rule, wherever it
// is written. When it matches a request, the rules its Exempters name do
// not apply to that request at all, as if they had not matched: each is
// recorded as OutcomeExempt, with no op, no count and no refusal, its
// conditions and key not evaluated. A skip rule is never exempt itself,
// so no order or cycle among them can matter.
type Exempter interface {
	Stage
	// Exempt is called for a request the stage's rule matches (its
	// methods, paths and hosts, and every when { } condition for every
	// value of an identity: one that cannot be decided exempts nobody),
	// before any other rule is matched; it names the rules the request is
	// exempt from with Scratch.Exempt or Scratch.ExemptAll.
	Exempt(s *Scratch)
}

// Gater is a Stage with a part in the gate phase, before anything is
// counted.
type Gater interface {
	Stage
	// Gate is called for each match m of the rule that counts (m.Op >= 0)
	// of req, a request not refused whatever the counters say; it queues
	// the store checks it needs with Scratch.PreOp (resolving what it
	// needs of req: known_visitors' marker, ban_by's values).
	Gate(req *Request, s *Scratch, m *Match)
	// Admit is called for the same m once the precheck call returned
	// (Scratch.PreResult has its results) and reports whether the request
	// is refused before anything is counted: refused by m's rule, which
	// the request may retry after retryAfter. It may instead take m out of
	// its rule (Scratch.TakeOut: a known caller), or lift m's IP ceiling;
	// a rule's stages' Admits run in the order they were added, so known's
	// takes a known caller out before the rule's ban (a later stage,
	// behaviour/ban) refuses, and a ban does not refuse a match taken
	// out. A store that cannot answer the precheck gates nothing: Admit
	// is not called (nor when no stage and no request hook queued a
	// precheck op).
	Admit(s *Scratch, m *Match) (refuse bool, retryAfter time.Duration)
}

// TakeOut takes m, a counting match, out of its rule, as a known caller's
// is (behaviour/known) and a forgiven key's (behaviour/forgive): m is
// decided but its ops (its IP ceiling's too) become dry-run peeks, never
// refusing and never consuming, and m.Known is set, which the judge (m's
// outcome is an allow), the rule's ban, its hooks and its cost's
// settlement honour. Only a Gater's Admit or Exemptions.Admit may call it.
func (s *Scratch) TakeOut(m *Match) {
	m.Known = true
	for _, j := range [2]int{m.Op, m.CeilingOp} {
		if j >= 0 {
			peekOnly(&s.Ops[j])
		}
	}
}

// KeyKeeper is a Stage that writes keys of its own, markers that may
// outlive its rule's counters (known_visitors', a ban's): a key format's migration
// window and a key secret's rotation window last as long as the longest
// of them (Policy.LongestKeyLifetime).
type KeyKeeper interface {
	Stage
	// KeyLifetime is the longest a key the stage writes lives.
	KeyLifetime() time.Duration
}

// Resolver is a Stage that resolves characteristics of its own for a
// request, beside its rule's key and count_distinct (known_by): a rule
// whose stage resolves one from the body reads the body (node.ReadsBody).
type Resolver interface {
	Stage
	// Resolves returns those characteristics.
	Resolves() []Characteristic
}

// Shaper is a Stage that shapes the op of each of its rule's counting
// matches: what the op counts beyond what the rule's numbers say (a
// weighted cost, behaviour/cost; a calendar period's window,
// behaviour/calendar). It runs as the op is made (countMatch), before
// the gate, so that every reader of the op agrees on it.
type Shaper interface {
	Stage
	// Shape is called for each match m of the rule that counts, once m's
	// op (s.Ops[m.Op]) is made from the rule's numbers and key, for a
	// request refused whatever the counters say too (its ops still go to
	// the main call, as peeks or attempts); it may change that op in
	// place. It runs before the op of m's IP ceiling is made (m.CeilingOp
	// is -1), which copies what Shape set but its key, limit and burst.
	// s.Now is the instant the request is decided at; req is nil when
	// a forgive shapes the reset it sends with no request behind it
	// (WindowShaper). It must not allocate.
	Shape(req *Request, s *Scratch, m *Match)
}

// WindowShaper is a Shaper that sets each op's window itself
// (Op.WindowStartUS and PeriodUS, Op.Calendar), so that the rule's Period
// is only its nominal length: such a rule has no fixed RateLimit-Policy
// item (its w is the op's window: the gateway's rateLimitNames), a forgive
// shapes the reset it sends as a request's op, with no request behind it,
// and a counter of the rule may live for LongestWindow
// (Policy.LongestKeyLifetime).
type WindowShaper interface {
	Shaper
	// LongestWindow is the longest window Shape sets (a calendar day
	// across a DST change: 25 hours).
	LongestWindow() time.Duration
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

// Forgiver is a Stage that keeps state of its own for a key of its rule
// (a ban's marker), which a forgive (behaviour/forgive) clears with the
// key's counter.
type Forgiver interface {
	Stage
	// Forgive appends to ops the ops that clear what the stage keeps for
	// k, a counter key of its rule, and returns ops. They go to the store
	// in Forgive's call, after the counter's reset.
	Forgive(k Key, ops []Op) []Op
}

// Exemptions grants the exemptions a forgive gives (behaviour/forgive;
// docs/operations.md, "Forgive"): while one lasts, its rule does not hold
// the forgiven key to its limit. A feature sets a policy's
// (Compiler.SetExemptions). It gates first, before any Gater, so that no
// stage refuses a match it took out (a ban honours Match.Known); what it
// records of the exemptions made is node state (Engine.Kept).
type Exemptions interface {
	// Gate is called first in the gate phase of a request the gate sees;
	// it queues the checks of the request's exemptions (Scratch.PreOp).
	Gate(s *Scratch)
	// Admit is called once the precheck returned, before any Gater's
	// Admit; it takes the exempt matches out of their rule
	// (Scratch.TakeOut). A store that cannot answer the precheck exempts
	// no one: it is not called.
	Admit(s *Scratch)
}

// SetExemptions sets what grants the policy's exemptions (Exemptions).
func (c *Compiler) SetExemptions(x Exemptions) { c.p.exemptions = x }

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

// Settler is a Stage with a part in Engine.Settle, once the origin has
// answered a request the rule counted and allowed (settle_from:
// behaviour/cost; ban_by's guilt of a counted failure: behaviour/ban). A
// rule with one sets Decision.Settle for such a request.
type Settler interface {
	Stage
	// Settle is called for each match m of the rule that counted and was
	// allowed, after the rule's Hooks, with the origin's status and its
	// X-Edge-Outcome (nil, "success" or "failure"); Scratch.Response has
	// its headers. It appends the ops to run for m to settle (m's op is
	// s.Ops[m.Op], its ceiling's s.Ops[m.CeilingOp] when m.CeilingOp >= 0)
	// and returns settle: they go to the store in Settle's one call.
	Settle(s *Scratch, m *Match, status int, outcome []byte, settle []Op) []Op
}

// Holder is a Stage whose rule's counting matches hold their op's charge
// only while the request is in flight (a concurrency rule's lease,
// behaviour/concurrency): the in-flight lifecycle (inflight.go) gives it
// back once, in the after call of a request Check refuses once its store
// call answered, else in Engine.Settle's call or Engine.Release's.
type Holder interface {
	Stage
	// Answered is called for each counting match m of the rule once the
	// main store call returned, before the judge, and for Explain too;
	// failed when the call returned an error (s.Res is then undefined).
	// It may revise m's results in s.Res (a concurrency refusal's
	// Retry-After), queue for the after call (Scratch.AfterOp) the give-back
	// of what the store may hold for m without the edge knowing (a call
	// that failed, an op a failure-handling store answered by its
	// on_store_error), and reports whether m holds something now.
	Answered(s *Scratch, m *Match, failed bool) (holds bool)
	// GiveBack appends to ops the ops that give back what m holds (the
	// refund of its lease), and returns ops.
	GiveBack(s *Scratch, m *Match, ops []Op) []Op
}

// LocalLimit is a Stage that makes its rule a node-local limit on the
// requests in flight (adaptive { }: behaviour/adaptive) rather than a
// counter in the store: the rule needs no key (RuleBlockType.Keyless) and
// holds no key budget, its matches have no op (Match.Op < 0, OutcomeSkip)
// until an Admitter (load shedding, behaviour/shed), at the end of the
// gate phase, takes one of its Slots for the request or sheds it (Verdict
// Shed, 503; a dry-run rule's would-shed is OutcomeDryRunDeny). A rule
// has at most one. An Admitter's own node-local limit (load_shedding
// max_in_flight) is one too, of no rule (Engine.LocalSlots).
type LocalLimit interface {
	Stage
	// Slots returns the limiter the rule's requests are admitted by, given
	// prev, the one the Engine keeps for the rule's ID (nil the first
	// time): prev itself, rebound to this stage's settings when they
	// changed (a reload keeps what it learnt), or a new one. The Engine
	// calls it for every admission: it must not allocate when it returns
	// prev.
	Slots(prev Slots) Slots
}

// Slots is a node-local limiter of requests in flight (LocalLimit), safe
// for concurrent use, whose state outlives policies: the Engine keeps it
// by rule ID.
type Slots interface {
	// TryAcquire takes one slot when fewer than the limit × sharePerMille
	// ÷ 1000 (at least 1) are in flight, and reports whether it did;
	// sharePerMille is the request's priority's share (shed_at).
	TryAcquire(sharePerMille int64) bool
	// Admits reports whether TryAcquire would take a slot now, and takes
	// none (Engine.Explain).
	Admits(sharePerMille int64) bool
	// Release gives back one slot TryAcquire took, once, as a local slot
	// of the request's in-flight lifecycle (inflight.go): with the
	// request's round-trip time to the origin when it was answered, or
	// dropped when it was sent but not answered (an upstream error or
	// timeout); neither when it was never sent.
	Release(now time.Time, rtt time.Duration, answered, dropped bool)
}

// Expander is a Stage that counts a request of its rule under several
// keys: an identity whose sources gave several values (behaviour/values),
// one match per combination of them, right after the first
// (Match.Value 1, 2, ...), each decided, charged and given back as a
// rule's only match is. A rule has at most one.
type Expander interface {
	Stage
	// AppendKeyValue appends the value of the rule's characteristic at
	// (its index in Rule.Key, or -1 for count_distinct) for the
	// combination of values being keyed, as AppendValue does; ok false
	// leaves it to the characteristic's AppendValue (its first value).
	// It must not allocate.
	AppendKeyValue(at int, buf []byte, req *Request, s *Scratch) (out []byte, st Status, ok bool)
	// Expand is called once the rule's first counting match of req,
	// s.Matches[first], is appended with its op (shaped, its ceiling's
	// made); it appends the further matches (Scratch.CountMatch).
	Expand(req *Request, s *Scratch, first int)
	// AppendKeys appends to dst the counter keys of req's further
	// combinations that are present (Scratch.RuleKeys), and returns dst.
	AppendKeys(dst []Key, r *Rule, req *Request, s *Scratch) []Key
}

// LocalLimit returns r's LocalLimit stage, nil when r has none.
func (r *Rule) LocalLimit() LocalLimit { return r.local }

// AddStage adds st to r's stages. A RuleAttrType's Compile (or a
// Feature's RuleDone, an AlgorithmType's Compile) calls it; a stage that
// implements none of Exempter, Shaper, Gater, Judge, Settler, Holder,
// LocalLimit and Expander is kept (Stages) but takes no part in Check.
func (r *Rule) AddStage(st Stage) {
	r.stages = append(r.stages, st)
	if x, ok := st.(Exempter); ok {
		r.exempters = append(r.exempters, x)
	}
	if sh, ok := st.(Shaper); ok {
		r.shapers = append(r.shapers, sh)
	}
	if g, ok := st.(Gater); ok {
		r.gates = append(r.gates, g)
	}
	if j, ok := st.(Judge); ok {
		r.judges = append(r.judges, j)
	}
	if st, ok := st.(Settler); ok {
		r.settlers = append(r.settlers, st)
	}
	if h, ok := st.(Holder); ok {
		r.holders = append(r.holders, h)
	}
	if l, ok := st.(LocalLimit); ok {
		r.local = l
	}
	if x, ok := st.(Expander); ok {
		r.expander = x
	}
}

// Stages returns r's stages, in the order they were added. A feature that
// compiles several attributes into one stage finds it here.
func (r *Rule) Stages() []Stage { return r.stages }

// StageOf returns r's first stage of type T (a behaviour's own, such as
// *concurrency.Stage), and whether r has one: what a behaviour's Of reads.
func StageOf[T Stage](r *Rule) (T, bool) {
	for _, st := range r.stages {
		if t, ok := st.(T); ok {
			return t, true
		}
	}
	var none T
	return none, false
}

// Exempt exempts the request from r, a rule of its policy that is not a
// skip rule (those are never exempt). Only an Exempter's Exempt may call it.
func (s *Scratch) Exempt(r *Rule) {
	s.exempted[r.Index] = true
	s.exempting = true
}

// ExemptAll exempts the request from every rule that is not a skip rule.
// Only an Exempter's Exempt may call it.
func (s *Scratch) ExemptAll() {
	for i := range s.exempted {
		s.exempted[i] = true
	}
	s.exempting = true
}

// exemptions is the match phase's first step: p's skip rules, decided for
// req before any other rule, so that one applies wherever it is written. A
// skip rule that matches (its matcher, and every condition Present: one
// that cannot be decided exempts nobody) is recorded as an allowing match,
// makes the answer bare when it is sensitive, and its Exempters name the
// rules the request is exempt from. It does not allocate once s has been
// sized for p.
func (s *Scratch) exemptions(p *Policy, req *Request, d *Decision) {
	s.exempting = false
	if len(p.exempters) == 0 {
		return
	}
	if cap(s.exempted) < len(p.Rules) {
		s.exempted = make([]bool, len(p.Rules)) // once per pooled Scratch and policy size
	}
	s.exempted = s.exempted[:len(p.Rules)]
	clear(s.exempted)
	for _, r := range p.exempters {
		if !r.matches(req) || r.conditionsEvery(req, s) != Present {
			continue
		}
		if r.Sensitive {
			d.Sensitive = true
		}
		s.Matches = append(s.Matches, Match{Rule: r, Op: -1, CeilingOp: -1, Outcome: OutcomeAllow, Enforce: true})
		for _, x := range r.exempters {
			x.Exempt(s)
		}
	}
}

// exempt reports whether Check passes over r, a rule that matched req: a
// skip rule (exemptions decided it), or a rule a matching skip rule exempts
// the request from, which is recorded as OutcomeExempt (no op, no count,
// no refusal) without evaluating its conditions or its key.
func (s *Scratch) exempt(r *Rule) bool {
	if r.Action == ActionSkip {
		return true
	}
	if !s.exempting || !s.exempted[r.Index] {
		return false
	}
	s.Matches = append(s.Matches, Match{Rule: r, Op: -1, CeilingOp: -1, Outcome: OutcomeExempt})
	return true
}

// Now returns the instant the request is decided at (Check's now).
func (s *Scratch) Now() time.Time { return s.now }

// Policy returns the policy the request was decided under (Check's p), nil
// before its first Check.
func (s *Scratch) Policy() *Policy { return s.pol }

// PreOp adds op to the gate's precheck call and returns its index for
// PreResult. Only a Gater's Gate, a RequestGater's GateRequest or
// Exemptions.Gate may call it.
func (s *Scratch) PreOp(op Op) int {
	s.pre = append(s.pre, op)
	return len(s.pre) - 1
}

// PreResult returns the result of precheck op i (PreOp's index), for a
// Gater's Admit, a RequestGater's AdmitRequest or Exemptions.Admit.
func (s *Scratch) PreResult(i int) *Result { return &s.mres[i] }

// SetResponse gives Engine.Settle the origin's response headers, for the
// Settlers (settle_from); the gateway calls it before Settle. The Scratch
// holds h until the next request begins.
func (s *Scratch) SetResponse(h ResponseHeaders) { s.resp = h }

// Response returns the origin's response headers SetResponse gave for the
// request, nil when none. Only a Settler's Settle may call it.
func (s *Scratch) Response() ResponseHeaders { return s.resp }

// ResponseHeaders reads the origin's response headers for the Settlers
// (*fasthttp.ResponseHeader implements it): the first value of name, nil
// when absent.
type ResponseHeaders interface {
	PeekBytes(name []byte) []byte
}

// ReadsResponseHeader records that a Settler reads response header name
// from the origin's answer (Scratch.Response): the origin's word to the
// edge, which the gateway strips from what it relays (Policy.SettleHeaders).
func (c *Compiler) ReadsResponseHeader(name []byte) {
	for _, have := range c.p.settleHeaders {
		if strings.EqualFold(string(have), string(name)) {
			return
		}
	}
	c.p.settleHeaders = append(c.p.settleHeaders, name)
}

// SettleHeaders returns the response headers the policy's Settlers read
// (settle_from; Compiler.ReadsResponseHeader), one per name compared
// case-insensitively; the gateway strips them from the origin's answer.
// The caller must not modify them.
func (p *Policy) SettleHeaders() [][]byte { return p.settleHeaders }

// WantSettle asks for Engine.Settle's call once the origin answers the
// request, if it is forwarded (Decision.Settle): a request hook has ops
// to send then (a known block's marker, after a success). Only a Gater's
// Gate or a RequestGater's GateRequest may call it.
func (s *Scratch) WantSettle() { s.wantSettle = true }

// AfterOp adds op to the after call, which Check makes once the judge
// phase is done (its result is not read: an add, a refund, a reset). Only a
// Judge or a Holder's Answered may call it.
func (s *Scratch) AfterOp(op Op) { s.qops = append(s.qops, op) }

// queueGates runs the Gate of every counting match's Gaters, then the
// policy's request gaters' GateRequest (RequestGater), sensitive when a
// sensitive rule matched the request.
func (s *Scratch) queueGates(req *Request, sensitive bool) {
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Op >= 0 {
			for _, g := range m.Rule.gates {
				g.Gate(req, s, m)
			}
		}
	}
	for _, g := range s.pol.requestGaters {
		g.GateRequest(req, s, sensitive) // known { } blocks, sensitive bans
	}
}

// admitGates runs, once the precheck returned, the exemptions' Admit, then
// every counting match's Gaters' Admit, in their rules' order and each
// rule's stages' (a known caller is taken out before the rule's ban, a
// later stage, refuses), then the request gaters' AdmitRequest (a ban of
// ban_scope = "sensitive", which honours those taken out), and returns the
// first rule that refuses with the longest wait of those that do.
func (s *Scratch) admitGates() (refusing *Rule, left time.Duration) {
	if s.pol.exemptions != nil {
		s.pol.exemptions.Admit(s)
	}
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
		if r, wait := g.AdmitRequest(s); r != nil && (refusing == nil || wait > left) {
			refusing, left = r, wait
		}
	}
	return refusing, left
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
// then, for an identity whose sources gave several, each further
// combination's that is present (Expander); none when the first is not
// present (Missing, Invalid or Absent). A key may come more than once.
func (s *Scratch) RuleKeys(dst []Key, r *Rule, req *Request) []Key {
	k, st := s.owner.key(r, req, s, false)
	if st != Present {
		return dst
	}
	dst = append(dst, k)
	if r.expander != nil {
		dst = r.expander.AppendKeys(dst, r, req, s)
	}
	return dst
}
