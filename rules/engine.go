package rules

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/internal/dryrun"
	"github.com/edge-gateway/edge/internal/keyhash"
)

// Fields gives the Engine's features the request values a key may name.
// The gateway implements it over its request without copying; a missing
// value is nil.
type Fields interface {
	Header(name []byte) []byte
	Cookie(name []byte) []byte
	Query(name []byte) []byte
	// RawQuery returns the query string as sent, without the '?'.
	RawQuery() []byte
	// Body returns the request's Content-Type and body (already capped at
	// max_body_bytes by the server). Features call it only when a
	// matching rule needs a body field.
	Body() (contentType, body []byte)
	// Cookies returns the request's cookies exactly as the origin
	// receives them: the cookie-pairs of every Cookie field line, joined
	// by "; " (RFC 6265 §4.2.1), or nil. Body identities must agree with a
	// cookie of the same name (docs/body-identities.md §6).
	Cookies() []byte
}

// Request is what the Engine needs to know about a request. The gateway
// fills a pooled one per request; the Engine never keeps it past Check.
type Request struct {
	// Method is the request method, upper case.
	Method []byte
	// Overrides are the methods named by X-HTTP-Method-Override,
	// X-HTTP-Method and X-Method-Override, as route.AppendMethodTokens writes
	// them ("POST GET "); the request is matched under each as well as its
	// own (docs/host-and-path.md).
	Overrides []byte
	// Host is the host the request names (the absolute-form target's, or
	// Host) in route.AppendHost's name form: lower case, no port, no trailing
	// dot. The origin receives this host (docs/host-and-path.md §1).
	Host []byte
	// Path is the match form of the canonical path (route.AppendMatchPath).
	Path []byte
	// Client is the client address as it counts (ipv6.Extractor.Client): an
	// IPv6 address that embeds an IPv4 address is that IPv4 address
	// (docs/client-address.md). Never invalid.
	Client netip.Addr
	// Fields looks up headers, cookies, query parameters and the body.
	Fields Fields
	// JA4 is the JA4 fingerprint of the connection's TLS ClientHello, as
	// the edge computed it when it terminates TLS, or as a trusted proxy
	// forwarded it in the policy's ja4_header; nil when neither is known
	// (the ja4 characteristic is then Absent: rules keyed on it skip).
	JA4 []byte
}

// Outcome is what one matching rule decided.
type Outcome uint8

const (
	// OutcomeAllow: the rule admits the request.
	OutcomeAllow Outcome = iota
	// OutcomeDeny: the rule refuses the request.
	OutcomeDeny
	// OutcomeDryRunDeny: the rule would refuse but is in dry-run.
	OutcomeDryRunDeny
	// OutcomeSkip: the rule's key value is absent and missing_identity is
	// "skip"; the rule does not apply.
	OutcomeSkip
	// OutcomeMissing: the rule's key value is absent and missing_identity
	// is "reject".
	OutcomeMissing
	// OutcomeStoreErrorAllow: the store could not decide; failed open.
	OutcomeStoreErrorAllow
	// OutcomeStoreErrorDeny: the store could not decide; failed closed.
	OutcomeStoreErrorDeny
	// OutcomeInvalid: the rule's key value is present but invalid and
	// invalid_identity is "reject".
	OutcomeInvalid
	// OutcomeExempt: a matching action = "skip" rule exempts the request
	// from the rule, which does not apply (skip.go); metrics count it as
	// decision "skip".
	OutcomeExempt
	// NumOutcomes bounds per-outcome tables.
	NumOutcomes = int(OutcomeExempt) + 1
)

var outcomeNames = [...]string{"allow", "deny", "dry_run_deny", "skip", "missing_identity", "store_error_allow", "store_error_deny", "invalid_identity", "exempt"}

// String returns the outcome's name as metrics and logs use it.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Verdict is what the edge does with the request.
type Verdict uint8

const (
	// Forward the request to the origin.
	Forward Verdict = iota
	// RefuseLimit answers 429 (bare when the request is sensitive).
	RefuseLimit
	// RefuseForbidden answers 403: a non-sensitive action = "deny" rule.
	RefuseForbidden
	// RejectMissing answers 400: a sensitive rule's identity is absent.
	RejectMissing
	// RejectInvalid answers 400: a rule's identity is present but invalid
	// (a phone number that does not parse or is not possible).
	RejectInvalid
	// Unavailable answers 503: a fail-closed rule could not reach its store.
	Unavailable
	// Shed answers 503: the origin is saturated (the node's max_in_flight
	// or an adaptive limit is reached for the request's priority) and the
	// request was shed before anything was counted (Admitter:
	// behaviour/shed). It judges the system, not the caller: never 429.
	Shed
)

// Match is one rule that matched the request, and what it decided.
type Match struct {
	Rule *Rule
	// Op is the index of the rule's op in Scratch.Ops, or -1 (a deny
	// action or a skipped rule has none).
	Op int
	// CeilingOp is the index of a visitor rule's IP-ceiling op, or -1.
	CeilingOp int
	Outcome   Outcome
	// Enforce is false when the rule was in dry-run for this request.
	Enforce bool
	// Known is true when the match was taken out of its rule
	// (Scratch.TakeOut): a known caller (behaviour/known: known_visitors,
	// exempt_known) or a forgiven key. The rule decided it but neither
	// refused nor charged it.
	Known bool
	// Value is 0 for a rule's first match of the request; a rule keyed on
	// an identity whose sources gave several values has a match for each
	// further combination of them right after it, with Value 1, 2, ...
	// (Expander: behaviour/values). Metrics and logs count a rule once,
	// by Worst.
	Value uint8
	// Several is true on every match of a rule whose identity gave the
	// request several values: a success then makes no known visitor
	// (behaviour/known) and clears no counter (reset_on_success).
	Several bool
	// Folded is true on a match of a reset_on_success rule whose key
	// folds what the request sent into a form other callers share
	// (CallerCharacteristic.Folds: an account written "Rene", counted as
	// "rene"): a success then clears no counter, since the origin may have
	// logged in another account than the one whose failures it holds.
	Folded bool
}

// Decision is the Engine's answer for one request.
type Decision struct {
	Verdict Verdict
	// Sensitive is true when any matching rule is sensitive: every answer
	// the edge gives for the request is then bare.
	Sensitive bool
	// RetryAfter is the longest wait among refusing rules.
	RetryAfter time.Duration
	// Delay is, when Verdict is Forward, how long the gateway holds the
	// request before forwarding it: the longest Judgement.Delay of the
	// rules' stages (queue = true: behaviour/queue), 0 without.
	Delay time.Duration
	// Refusing is the first rule that refused (nil when forwarded), for
	// logs and metrics; never shown to the client of a sensitive route.
	Refusing *Rule
	// StoreErr is the store's error when it could not decide.
	StoreErr error
	// Settle is true when a rule that counted the request needs the
	// origin's answer (a Hook: reset_on_success; a Settler: settle_from,
	// behaviour/cost), or the request holds
	// in-flight leases or slots (inflight.go): call Engine.Settle after the
	// origin answers, and Engine.Release on every path where it does not.
	Settle bool
}

// Scratch is the per-request working memory of Check, reused through a
// pool so the decision path allocates nothing. A request's use of it
// starts with Begin (features' memo slots) and ends when it is reused.
type Scratch struct {
	// BodyParsed reports whether the request's body was read for an
	// identity (only matching rules that need one cause it). Features set
	// it.
	BodyParsed bool
	Matches    []Match
	Ops        []Op
	Res        []Result
	memo       []Memo
	begun      *Policy // the policy Begin prepared the memo slots for
	settle     []Op    // post-response ops (Hooks)
	settleRes  []Result
	settled    bool     // Settle's store call decided settleRes (SettleResult)
	mres       []Result // the precheck's results (Scratch.PreOp)
	qops       []Op     // the after call's ops (Scratch.AfterOp, pipeline.go)
	qres       []Result
	buf        []byte         // encoded key values, for the keyed hash
	keys       keyhash.Hasher // the request's keyed hashes, in its key format (keyformat.go)
	owner      *Engine
	exempted   []bool // exempted[i]: the request is exempt from Policy.Rules[i] (stage.go), when exempting
	exempting  bool
	peekOnly   bool      // Explain: every op a peek, no ban written (explain.go)
	now        time.Time // the instant Check decides the request at (Scratch.Now)

	// denyAction: an enforcing action = "deny" matched; missing, invalid:
	// an enforcing rule rejects the request's identity (after the gate,
	// missing includes invalid). Check's phases set them (pipeline.go).
	denyAction, missing, invalid bool
	// pre are the precheck call's ops (Scratch.PreOp, stage.go).
	pre []Op

	// wantSettle: a hook asked for Settle's call (Scratch.WantSettle).
	wantSettle bool
	pol        *Policy // the policy of the request Check decided

	// resp is the origin's answer, for the Settlers (SetResponse,
	// stage.go).
	resp ResponseHeaders

	// kept is the last Kept lookup, of the engine owner was then: a
	// feature reads its node state on every request (forgive's record),
	// and the engine's map costs more than a comparison.
	kept struct {
		owner  *Engine
		key, v any
	}

	// fl is what the request holds while in flight (inflight.go).
	fl inflight
}

// NewScratch returns a Scratch sized for n rules.
func NewScratch(n int) *Scratch {
	return &Scratch{
		Matches: make([]Match, 0, n),
		Ops:     make([]Op, 0, n),
		Res:     make([]Result, 0, n),
		buf:     make([]byte, 0, 512),
	}
}

// Begin starts a request under p: it clears every memo slot p's features
// use, so nothing resolved for one request is seen by the next. A caller
// that fills memo slots before Check (the gateway sets the verified
// visitor ID) calls Begin first; Check calls it when the caller did not.
func (s *Scratch) Begin(p *Policy) {
	if cap(s.memo) < p.slots {
		s.memo = make([]Memo, p.slots) // once per pooled Scratch and policy size
	}
	s.memo = s.memo[:p.slots]
	for i := range s.memo {
		m := &s.memo[i]
		m.Done, m.Status, m.Value, m.Op = false, Missing, m.Value[:0], -1
	}
	s.begun = p
}

// Memo returns memo slot i (Compiler.Slot) of the current request.
func (s *Scratch) Memo(i int) *Memo { return &s.memo[i] }

// AddOp adds op to the request's store call and returns its index in Ops
// (and, after Check, in Res). Only a RequestHook's BeforeStore may call it.
func (s *Scratch) AddOp(op Op) int {
	s.Ops = append(s.Ops, op)
	return len(s.Ops) - 1
}

func (s *Scratch) reset() {
	s.BodyParsed = false
	s.settled = false
	s.denyAction, s.missing, s.invalid = false, false, false
	s.pre = s.pre[:0]
	s.wantSettle = false
	s.Matches = s.Matches[:0]
	s.Ops = s.Ops[:0]
	s.Res = s.Res[:0]
	s.resp = nil
	s.resetInflight()
}

// EngineOptions configures an Engine. The zero value of each field works
// except Store, which is required.
type EngineOptions struct {
	// Store holds the counters.
	Store Store
	// Secret keys the hash of key values (KeyFormats). Empty: a random
	// secret, which suits one node with a memory store only.
	Secret []byte
	// KeyFormats is the format counter keys are hashed in; the zero value
	// is format 2, which a memory store always uses. A node of a fleet on
	// one Redis takes the fleet's (redisstore.ClaimKeyFormat).
	KeyFormats KeyFormats
	// PreviousSecret, when set, is the key secret before Secret, read in
	// a rotation window (KeyFormats.RotateUntil; docs/operations.md,
	// "Rotating the key secret"). It must differ from Secret.
	PreviousSecret []byte
	// DryRun starts the node in dry-run: every rule decided, none refusing.
	DryRun bool
}

// Engine decides requests against a Policy. It is safe for concurrent use;
// the policy is passed to each Check so a reload swaps it atomically.
type Engine struct {
	store  Store
	dryRun atomic.Bool
	// dry holds the run-time dry-run toggles (dryrun.go).
	dry dryrun.Toggles
	// kept holds the features' node state (Engine.Kept, extend.go).
	kept sync.Map
	// local holds the node-local limits' Slots by ID (LocalSlots,
	// inflight.go).
	local localLimits
	// keys are the key secrets and formats (keyformat.go).
	keys *keyhash.Keys
}

// ErrNoStore is returned by NewEngine without a store.
var ErrNoStore = errors.New("rules: engine needs a store")

// ErrSamePreviousSecret is returned by NewEngine when PreviousSecret is
// Secret: a rotation needs two secrets.
var ErrSamePreviousSecret = keyhash.ErrSamePrevious

// NewEngine returns an Engine over opts.Store.
func NewEngine(opts EngineOptions) (*Engine, error) {
	if opts.Store == nil {
		return nil, ErrNoStore
	}
	e := &Engine{store: opts.Store}
	keys, err := keyhash.New(opts.Secret, opts.PreviousSecret, opts.KeyFormats)
	if err != nil {
		return nil, err
	}
	e.keys = keys
	e.dryRun.Store(opts.DryRun)
	return e, nil
}

// SetDryRun switches node-wide dry-run on or off.
func (e *Engine) SetDryRun(on bool) { e.dryRun.Store(on) }

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// countMatch appends m, r's match of req counting key (and member, a
// count_distinct value or a concurrency lease), with its op of cost as the
// rule's stages shape it (Shaper: a weighted cost, a calendar window) and,
// for a visitor rule, its IP ceiling's op. It returns the status of the
// ceiling's value: unless Present, nothing is added.
func (e *Engine) countMatch(now time.Time, r *Rule, req *Request, s *Scratch, m Match, key Key, member uint64, cost int64) Status {
	var ceiling Key
	if r.IPCeiling > 0 {
		// All visitors of one IP share a ceiling (key: the IP instead
		// of the visitor), in the same call, so stockpiled visitor IDs
		// cannot multiply a client's budget.
		ck, cst := e.key(r, req, s, true)
		if cst != Present {
			return cst
		}
		ceiling = ck
	}
	m.Op = len(s.Ops)
	s.Ops = append(s.Ops, Op{
		Kind:      OpTake,
		Algorithm: r.Algorithm,
		Key:       key,
		Limit:     r.Limit,
		Burst:     r.Burst,
		PeriodUS:  r.PeriodUS(),
		Cost:      cost, // 1, or a count_distinct's further values (Expander); a Shaper may change it
		Member:    member,
		Enforce:   m.Enforce,
		Attempts:  r.Count == CountAttempts,
		OnError:   r.OnStoreError,
		Sensitive: r.Sensitive,
		MaxKeys:   int32(r.MaxKeys), // ≤ MaxKeysLimit (compile_rule.go)
		// What one network may make of the budget (network.go).
		NetworkKeys: int32(r.NetworkKeys),
	})
	if r.ResetOnSuccess {
		m.Folded = r.folds(req, s)
	}
	s.Matches = append(s.Matches, m)
	mp := &s.Matches[len(s.Matches)-1]
	for _, sh := range r.shapers {
		sh.Shape(req, s, mp) // its ceiling's op copies it
	}
	if r.IPCeiling > 0 {
		mp.CeilingOp = len(s.Ops)
		op := s.Ops[mp.Op]
		op.Key, op.Limit, op.Burst = ceiling, r.IPCeiling, r.CeilingBurst
		s.Ops = append(s.Ops, op)
	}
	return Present
}

// setVerdict decides what the edge does with the request once every
// matching rule has its outcome. denyAction: an enforcing action = "deny"
// matched (d.Refusing is the first such rule); invalid, missing: an
// enforcing rule rejects the request's identity (missing includes
// invalid). The refusals no counter can change come first, and hold
// whether or not the store could decide (issue 9): a deny answers as its
// rule does (403; the bare 429 when the request is sensitive, docs/policy.md, "sensitive"),
// and a rejected identity is a 400 rather than the 503 of a fail-closed
// store failure. Otherwise a fail-closed store failure is a 503 (Verdict
// already Unavailable), a counter's refusal a 429 (it wins over a 400: the
// attempts a malformed request is charged with can run out), and a
// rejected identity a 400.
func (d *Decision) setVerdict(denyAction, invalid, missing bool) {
	switch {
	case denyAction && !d.Sensitive:
		d.Verdict = RefuseForbidden
	case denyAction:
		d.Verdict = RefuseLimit
	case d.Verdict == Unavailable && invalid:
		d.Verdict = RejectInvalid
	case d.Verdict == Unavailable && missing:
		d.Verdict = RejectMissing
	case d.Verdict == Unavailable:
	case d.Refusing != nil:
		d.Verdict = RefuseLimit
	case invalid:
		d.Verdict = RejectInvalid
	case missing:
		d.Verdict = RejectMissing
	}
}

// ErrStoreFallback marks a Decision some of whose ops a failure-handling
// store answered from their on_store_error mode instead of the backing store.
var ErrStoreFallback = errors.New("rules: store unavailable, answered by on_store_error")

// storeFallback records an op that a failure-handling store answered from
// its mode: a fail-closed refusal makes the request unavailable (503); a
// local bucket's refusal is an ordinary over-the-limit refusal (429). A
// dry-run rule's op is a store_error_allow whatever its mode answered, as
// in storeFailed: what the fallback would refuse says nothing of the rule,
// and the store error must show in the rule's counts.
func (e *Engine) storeFallback(d *Decision, m *Match, res *Result) {
	if res.Allowed || !m.Enforce {
		m.Outcome = OutcomeStoreErrorAllow
		return
	}
	m.Outcome = OutcomeStoreErrorDeny
	if m.Rule.OnStoreError == FailClosed {
		d.Verdict = Unavailable
	} else if res.RetryAfter > d.RetryAfter {
		d.RetryAfter = res.RetryAfter
	}
	if d.Refusing == nil {
		d.Refusing = m.Rule
	}
}

// storeFailed applies each rule's on_store_error when the store could not
// decide: one fail-closed enforcing rule makes the request unavailable,
// unless the request is refused whatever the counters say (a deny action, a
// rejected identity), which setVerdict then answers as it would with a
// working store.
func (e *Engine) storeFailed(d *Decision, s *Scratch) {
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		if m.Enforce && m.Rule.OnStoreError == FailClosed {
			m.Outcome = OutcomeStoreErrorDeny
			d.Verdict = Unavailable
			if d.Refusing == nil {
				d.Refusing = m.Rule
			}
		} else {
			m.Outcome = OutcomeStoreErrorAllow
		}
	}
}

// key encodes r's characteristic values for req and returns the counter
// key, with Present; Missing when a value the key needs is absent or empty
// (nothing ever becomes an empty or shared key), Invalid when one is
// unusable.
//
// ceiling builds the key of the rule's ceiling (IPCeiling): the
// characteristic with a ceiling counts by its coarser value (a visitor by
// its IP).
func (e *Engine) key(r *Rule, req *Request, s *Scratch, ceiling bool) (k Key, status Status) {
	buf := s.buf[:0]
	for i, ch := range r.Key {
		buf = append(buf, r.keyTags[i])
		n := len(buf)
		var out []byte
		switch {
		case ceiling && i == r.ceilingChar:
			out, status = ch.(CeilingCharacteristic).AppendCeiling(buf, req, s)
		case r.expander != nil:
			out, status = r.appendValue(i, ch, buf, req, s)
		default:
			out, status = ch.AppendValue(buf, req, s)
		}
		switch {
		case status == Missing, status == Absent:
		case status != Present:
			status = Invalid // Invalid, or a status no feature may return
		case len(out) < n || !bytes.Equal(out[:n], buf):
			// A characteristic must append to the buffer it was given: one
			// that returned another dropped the key's earlier values, which
			// would merge their counters. Never a shared key: Invalid.
			status = Invalid
		case len(out) == n && !r.keyShared[i]:
			// Present with no value: every request would share the key.
			// Only a characteristic declared Shared (global) may.
			status = Missing
		}
		if status != Present {
			s.buf = buf // keep what the buffer grew to
			return k, status
		}
		buf = out
	}
	s.buf = buf
	// Scratch.RuleKey's key, written in place: this is every request's
	// path, and the calls and copies of a 24-byte Key cost it.
	copy(k[0:8], r.ID[:])
	k[8] = r.keyTag()
	if ceiling {
		k[8] |= 0x40
	}
	copy(k[9:], s.keys.Hash(buf))
	return k, Present
}

// appendValue appends the value of ch, r's characteristic at (its index
// in Key, -1 for Distinct), for req: the Expander's pick of the values
// being keyed, else the characteristic's own (its first).
func (r *Rule) appendValue(at int, ch Characteristic, buf []byte, req *Request, s *Scratch) ([]byte, Status) {
	if r.expander != nil {
		if out, st, ok := r.expander.AppendKeyValue(at, buf, req, s); ok {
			return out, st
		}
	}
	return ch.AppendValue(buf, req, s)
}

// member is the Op.Member of a count_distinct rule: the first 8 bytes of
// the keyed hash of its distinct characteristic's value, encoded as in a
// key. Never the raw value: a store sees only hashes.
func (e *Engine) member(r *Rule, req *Request, s *Scratch) (uint64, Status) {
	buf := append(s.buf[:0], r.distinctTag)
	n := len(buf)
	var out []byte
	var st Status
	out, st = r.appendValue(-1, r.Distinct, buf, req, s)
	switch {
	case st == Missing, st == Absent:
	case st != Present || len(out) < n || !bytes.Equal(out[:n], buf):
		st = Invalid
	case len(out) == n:
		st = Missing
	}
	if st != Present {
		s.buf = buf
		return 0, st
	}
	s.buf = out
	return binary.BigEndian.Uint64(s.keys.Hash(out)[:8]), Present
}

// conditions evaluates r's when { } conditions: Present when all hold,
// Missing when one does not (or its identity is absent), Invalid when one
// needs an identity that is present but unusable (the rule's
// invalid_identity decides; no condition may decide garbage). A condition
// that does not hold wins over one that cannot be decided, wherever each is
// written: the rule does not apply to the request at all (visitor_valid =
// true on a cookieless request whose phone is garbage), as when the
// matcher itself excludes it.
func (r *Rule) conditions(req *Request, s *Scratch) Status {
	return r.evalConditions(req, s, false)
}

// Settle runs what happens after the origin answered, in one more store
// call and only when a matching rule needs it: each counted and allowed
// rule's Hooks (reset_on_success clears the rule's counter for the key when
// the answer is a success; the origin's X-Edge-Outcome, "success" or
// "failure", overrides the status) and its stages' Settle (Settler:
// settle_from adds or refunds the real cost), the request hooks' own
// (RequestSettler: known callers' markers after a success, behaviour/known;
// the mint reserve's draw), and what the request holds in flight (a
// lease's refund, Holder; inflight.go); it also gives back the request's
// local slots, with its round-trip time since Scratch.Forwarding. It
// reports whether it called the store.
func (e *Engine) Settle(ctx context.Context, now time.Time, s *Scratch, status int, outcome []byte) (bool, error) {
	s.settle = s.release(now, true, s.settle[:0]) // the in-flight lifecycle (inflight.go)
	s.settled = false
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 || m.Outcome != OutcomeAllow {
			continue
		}
		for _, h := range m.Rule.Hooks {
			s.settle = h.AfterOrigin(m, s.Ops, status, outcome, s.settle)
		}
		for _, st := range m.Rule.settlers {
			s.settle = st.Settle(s, m, status, outcome, s.settle) // settle_from (behaviour/cost), ban_by's guilt (behaviour/ban)
		}
	}
	if s.pol != nil {
		for _, h := range s.pol.requestSettlers {
			s.settle = h.AfterOrigin(s, status, outcome, s.settle)
		}
	}
	if len(s.settle) == 0 {
		return false, nil
	}
	if cap(s.settleRes) < len(s.settle) {
		s.settleRes = make([]Result, len(s.settle))
	}
	s.settleRes = s.settleRes[:len(s.settle)]
	err := e.take(ctx, now, s, s.settle, s.settleRes)
	s.settled = err == nil
	return true, err
}

// HashKey returns the counter key of a RequestHook's op: id names the
// counters as a rule's ID does, tag marks the value as a characteristic's
// tag does, and buf holds the encoded value (the keyed hash covers it).
// buf must be caller-owned; it is not kept.
func (s *Scratch) HashKey(id [8]byte, tag byte, buf []byte) Key {
	var k Key
	copy(k[0:8], id[:])
	k[8] = tag
	copy(k[9:], s.keys.Hash(buf))
	return k
}

// AppendValue appends a length-prefixed value, so "ab"+"c" and "a"+"bc"
// never encode alike: the encoding characteristics use for a value of
// their own.
func AppendValue[T ~string | ~[]byte](buf []byte, v T) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(v)))
	return append(buf, v...)
}
