package rules

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/ipv6"
)

// Fields gives the Engine the request values a key may name. The gateway
// implements it over its request without copying; a missing value is nil.
type Fields interface {
	Header(name []byte) []byte
	Cookie(name []byte) []byte
	Query(name []byte) []byte
}

// Request is what the Engine needs to know about a request. The gateway
// fills a pooled one per request; the Engine never keeps it past Check.
type Request struct {
	// Method is the request method, upper case.
	Method []byte
	// Overrides are the methods named by X-HTTP-Method-Override,
	// X-HTTP-Method and X-Method-Override, as AppendMethodTokens writes
	// them ("POST GET "); the request is matched under each as well as its
	// own (DESIGN §2.3).
	Overrides []byte
	// Host is the Host header, lower case, without a port.
	Host []byte
	// Path is the match form of the canonical path (AppendMatchPath).
	Path []byte
	// Client is the client address (ipv6.Extractor.Client), never invalid.
	Client netip.Addr
	// Fields looks up headers, cookies and query parameters.
	Fields Fields
	// VisitorID is the visitor cookie's ID when VisitorValid (the gateway
	// verifies the cookie's signature and age).
	VisitorID    [16]byte
	VisitorValid bool
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
)

var outcomeNames = [...]string{"allow", "deny", "dry_run_deny", "skip", "missing_identity", "store_error_allow", "store_error_deny"}

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
	// Unavailable answers 503: a fail-closed rule could not reach its store.
	Unavailable
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
}

// Decision is the Engine's answer for one request.
type Decision struct {
	Verdict Verdict
	// Sensitive is true when any matching rule is sensitive: every answer
	// the edge gives for the request is then bare.
	Sensitive bool
	// RetryAfter is the longest wait among refusing rules.
	RetryAfter time.Duration
	// Refusing is the first rule that refused (nil when forwarded), for
	// logs and metrics; never shown to the client of a sensitive route.
	Refusing *Rule
	// StoreErr is the store's error when it could not decide.
	StoreErr error
	// Mint is true when the request is forwarded without a valid visitor
	// cookie and the IP's mint budget allowed a new visitor ID.
	Mint bool
}

// Scratch is the per-request working memory of Check, reused through a
// pool so the decision path allocates nothing.
type Scratch struct {
	// MintOp is the index of the visitor mint-budget op, or -1.
	MintOp  int
	Matches []Match
	Ops     []Op
	Res     []Result
	buf     []byte // encoded key values, for the keyed hash
	prev    []byte // the previous key's encoded values
	prevSum [15]byte
	sum     []byte
	mac     hash.Hash // HMAC-SHA256 under owner's secret
	owner   *Engine
}

// NewScratch returns a Scratch sized for n rules.
func NewScratch(n int) *Scratch {
	return &Scratch{
		Matches: make([]Match, 0, n),
		Ops:     make([]Op, 0, n),
		Res:     make([]Result, 0, n),
		buf:     make([]byte, 0, 512),
		prev:    make([]byte, 0, 512),
		sum:     make([]byte, 0, sha256.Size),
	}
}

func (s *Scratch) reset() {
	s.MintOp = -1
	s.Matches = s.Matches[:0]
	s.Ops = s.Ops[:0]
	s.Res = s.Res[:0]
	s.prev = s.prev[:0]
}

// EngineOptions configures an Engine. The zero value of each field works
// except Store, which is required.
type EngineOptions struct {
	// Store holds the counters.
	Store Store
	// Secret keys the hash of key values (HMAC-SHA256). Empty: a random
	// secret, which suits one node with a memory store only.
	Secret []byte
	// DryRun starts the node in dry-run: every rule decided, none refusing.
	DryRun bool
}

// Engine decides requests against a Policy. It is safe for concurrent use;
// the policy is passed to each Check so a reload swaps it atomically.
type Engine struct {
	store  Store
	secret []byte
	dryRun atomic.Bool
}

// ErrNoStore is returned by NewEngine without a store.
var ErrNoStore = errors.New("rules: engine needs a store")

// NewEngine returns an Engine over opts.Store.
func NewEngine(opts EngineOptions) (*Engine, error) {
	if opts.Store == nil {
		return nil, ErrNoStore
	}
	e := &Engine{store: opts.Store, secret: opts.Secret}
	if len(e.secret) == 0 {
		e.secret = make([]byte, 32)
		if _, err := rand.Read(e.secret); err != nil {
			return nil, err
		}
	}
	e.dryRun.Store(opts.DryRun)
	return e, nil
}

// SetDryRun switches node-wide dry-run on or off.
func (e *Engine) SetDryRun(on bool) { e.dryRun.Store(on) }

// DryRun reports whether node-wide dry-run is on.
func (e *Engine) DryRun() bool { return e.dryRun.Load() }

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Check decides req at now against p, making exactly one Store.Take call
// when any matching rule counts. The matches, ops and results stay in s for
// the caller (response headers, metrics) until s is reused.
func (e *Engine) Check(ctx context.Context, now time.Time, p *Policy, req *Request, s *Scratch) Decision {
	s.reset()
	if s.owner != e {
		// Once per pooled Scratch: crypto/hmac keeps the keyed inner and
		// outer SHA-256 states, so each key then costs two compressions.
		s.mac = hmac.New(sha256.New, e.secret)
		s.owner = e
	}
	var d Decision
	nodeDry := p.DryRun || e.dryRun.Load()
	denyAction := false // an enforcing action = "deny" matched
	missing := false    // an enforcing rule rejects for a missing identity
	for _, r := range p.Rules {
		if !r.matches(req) {
			continue
		}
		if r.Sensitive {
			d.Sensitive = true
		}
		m := Match{Rule: r, Op: -1, CeilingOp: -1, Enforce: !(nodeDry || r.DryRun || r.Action == ActionLog)}
		if r.Action == ActionDeny {
			if m.Enforce {
				m.Outcome = OutcomeDeny
				denyAction = true
				if d.Refusing == nil {
					d.Refusing = r
				}
			} else {
				m.Outcome = OutcomeDryRunDeny
			}
			s.Matches = append(s.Matches, m)
			continue
		}
		key, present := e.key(r, req, s, false)
		if !present {
			if r.MissingIdentity == IdentityReject {
				m.Outcome = OutcomeMissing
				if m.Enforce {
					missing = true
				}
			} else {
				m.Outcome = OutcomeSkip
			}
			s.Matches = append(s.Matches, m)
			continue
		}
		m.Op = len(s.Ops)
		s.Ops = append(s.Ops, Op{
			Kind:      OpTake,
			Algorithm: r.Algorithm,
			Key:       key,
			Limit:     r.Limit,
			Burst:     r.Burst,
			PeriodUS:  r.PeriodUS(),
			Cost:      1,
			Enforce:   m.Enforce,
			Attempts:  r.Count == CountAttempts,
			OnError:   r.OnStoreError,
		})
		if r.IPCeiling > 0 {
			// All visitors of one IP share a ceiling (key: the IP instead
			// of the visitor), in the same call, so stockpiled visitor IDs
			// cannot multiply a client's budget.
			ck, _ := e.key(r, req, s, true)
			m.CeilingOp = len(s.Ops)
			op := s.Ops[m.Op]
			op.Key, op.Limit, op.Burst = ck, r.IPCeiling, r.CeilingBurst
			s.Ops = append(s.Ops, op)
		}
		s.Matches = append(s.Matches, m)
	}
	if v := p.Visitor; v != nil && !req.VisitorValid && !denyAction && !missing {
		// The mint budget: a GCRA bucket per IP of mint_limit per
		// mint_period. Not enforcing: decided like a dry-run op, it never
		// refuses and consumes only when the request is forwarded, so a
		// refused request never gets a cookie.
		s.MintOp = len(s.Ops)
		s.Ops = append(s.Ops, Op{
			Kind: OpTake, Algorithm: GCRA, Key: e.mintKey(req, p, s),
			Limit: v.MintLimit, Burst: v.MintLimit, PeriodUS: v.MintPeriod.Microseconds(),
			Cost: 1, OnError: FailLocal,
		})
	}
	if len(s.Ops) > 0 {
		if denyAction || missing {
			// The request is refused whatever the counters say: decide
			// every rule without consuming, but still charge attempts
			// (a malformed request is charged to its per-client rules).
			for i := range s.Ops {
				if s.Ops[i].Attempts || missing {
					s.Ops[i].Attempts = true
				} else {
					s.Ops[i].Kind = OpPeek
				}
			}
		}
		s.Res = s.Res[:len(s.Ops)]
		if err := e.store.Take(ctx, now, s.Ops, s.Res); err != nil {
			d.StoreErr = err
			e.storeFailed(&d, s)
			return d
		}
	}
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		res := &s.Res[m.Op]
		if m.CeilingOp >= 0 {
			// A visitor rule allows when both its visitor's bucket and its
			// IP's ceiling do.
			combined := s.Res[m.CeilingOp]
			if res.Allowed && combined.Allowed {
				combined = *res
			} else if !res.Allowed && (combined.Allowed || res.RetryAfter > combined.RetryAfter) {
				combined.Allowed, combined.RetryAfter = false, res.RetryAfter
			}
			combined.StoreError = combined.StoreError || res.StoreError
			res = &combined
		}
		if res.StoreError {
			d.StoreErr = ErrStoreFallback
			e.storeFallback(&d, m, res)
			continue
		}
		switch {
		case res.Allowed:
			m.Outcome = OutcomeAllow
		case m.Enforce:
			m.Outcome = OutcomeDeny
			if d.Refusing == nil {
				d.Refusing = m.Rule
			}
			if res.RetryAfter > d.RetryAfter {
				d.RetryAfter = res.RetryAfter
			}
		default:
			m.Outcome = OutcomeDryRunDeny
		}
	}
	if s.MintOp >= 0 && d.Refusing == nil && d.Verdict == Forward && !missing {
		d.Mint = s.Res[s.MintOp].Allowed
	}
	switch {
	case d.Verdict == Unavailable:
	case d.Refusing != nil && d.Refusing.Action == ActionDeny && !d.Sensitive:
		d.Verdict = RefuseForbidden
	case d.Refusing != nil:
		d.Verdict = RefuseLimit
	case missing:
		d.Verdict = RejectMissing
	}
	return d
}

// ErrStoreFallback marks a Decision some of whose ops a failure-handling
// store answered from their on_store_error mode instead of the backing store.
var ErrStoreFallback = errors.New("rules: store unavailable, answered by on_store_error")

// storeFallback records an op that a failure-handling store answered from
// its mode: a fail-closed refusal makes the request unavailable (503); a
// local bucket's refusal is an ordinary over-the-limit refusal (429).
func (e *Engine) storeFallback(d *Decision, m *Match, res *Result) {
	if res.Allowed || !m.Enforce {
		m.Outcome = OutcomeStoreErrorAllow
		if !res.Allowed {
			m.Outcome = OutcomeDryRunDeny
		}
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
// decide: one fail-closed enforcing rule makes the request unavailable.
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

// matches reports whether r applies to req.
func (r *Rule) matches(req *Request) bool {
	if !r.matchPath(req.Path) || !r.matchHost(req.Host) {
		return false
	}
	if r.WhenVisitorValid != nil && *r.WhenVisitorValid != req.VisitorValid {
		return false
	}
	if r.matchMethod(req.Method) {
		return true
	}
	for o := req.Overrides; len(o) > 0; {
		i := bytes.IndexByte(o, ' ')
		if i < 0 {
			return r.matchMethod(o)
		}
		if i > 0 && r.matchMethod(o[:i]) {
			return true
		}
		o = o[i+1:]
	}
	return false
}

// key encodes r's characteristic values for req and returns the counter
// key. present is false when a value the key needs is absent or empty:
// nothing ever becomes an empty or shared key.
//
// ceiling builds the key of a visitor rule's IP ceiling: the visitor
// characteristic counts as its IP alone.
func (e *Engine) key(r *Rule, req *Request, s *Scratch, ceiling bool) (k Key, present bool) {
	copy(k[0:8], r.ID[:])
	k[8] = byte(r.Key[0].Kind)
	if len(r.Key) > 1 {
		k[8] |= 0x80
	}
	if ceiling {
		k[8] |= 0x40
	}
	buf := s.buf[:0]
	for _, ch := range r.Key {
		buf = append(buf, byte(ch.Kind))
		switch ch.Kind {
		case CharIP:
			buf = ipv6.AppendKey(buf, req.Client, r.IPv4Prefix, r.IPv6Prefix)
		case CharVisitor:
			// IP + visitor ID with a valid cookie; the IP's cookieless
			// bucket otherwise (tampered, expired, unknown secret, absent).
			buf = ipv6.AppendKey(buf, req.Client, r.IPv4Prefix, r.IPv6Prefix)
			switch {
			case ceiling:
			case req.VisitorValid:
				buf = append(buf, 1)
				buf = append(buf, req.VisitorID[:]...)
			default:
				buf = append(buf, 0)
			}
		case CharRoute:
			buf = appendValue(buf, req.Path)
		case CharGlobal:
		case CharHeader, CharCookie, CharQuery:
			var v []byte
			if req.Fields != nil {
				switch ch.Kind {
				case CharHeader:
					v = req.Fields.Header(ch.Name)
				case CharCookie:
					v = req.Fields.Cookie(ch.Name)
				default:
					v = req.Fields.Query(ch.Name)
				}
			}
			if len(v) == 0 {
				s.buf = buf
				return k, false
			}
			buf = appendValue(buf, v)
		default:
			s.buf = buf
			return k, false
		}
	}
	s.buf = buf
	copy(k[9:], s.valueHash(buf))
	return k, true
}

// valueHash is the keyed hash (HMAC-SHA256, truncated to 15 bytes) of
// encoded key values. Keys alike in one request (a limit and its shadow, a
// rule and the mint budget) share one hash.
func (s *Scratch) valueHash(buf []byte) []byte {
	if len(s.prev) == 0 || !bytes.Equal(buf, s.prev) {
		s.mac.Reset()
		s.mac.Write(buf)
		s.sum = s.mac.Sum(s.sum[:0])
		copy(s.prevSum[:], s.sum[:15])
		s.prev = append(s.prev[:0], buf...)
	}
	return s.prevSum[:]
}

// mintKeyID names the mint-budget counters, as a rule's ID names its own.
var mintKeyID = ruleID("\x00visitor-mint")

// mintKey is the key of the IP's visitor mint budget, at the policy's
// client grouping.
func (e *Engine) mintKey(req *Request, p *Policy, s *Scratch) Key {
	var k Key
	copy(k[0:8], mintKeyID[:])
	k[8] = byte(CharIP)
	s.buf = ipv6.AppendKey(s.buf[:0], req.Client, p.IPv4Prefix, p.IPv6Prefix)
	copy(k[9:], s.valueHash(s.buf))
	return k
}

// appendValue appends a length-prefixed value, so "ab"+"c" and "a"+"bc"
// never encode alike.
func appendValue(buf, v []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(v)))
	return append(buf, v...)
}
