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
	"github.com/edge-gateway/edge/otp"
)

// Fields gives the Engine the request values a key may name. The gateway
// implements it over its request without copying; a missing value is nil.
type Fields interface {
	Header(name []byte) []byte
	Cookie(name []byte) []byte
	Query(name []byte) []byte
	// RawQuery returns the query string as sent, without the '?'.
	RawQuery() []byte
	// Body returns the request's Content-Type and body (already capped at
	// max_body_bytes by the server). The Engine calls it only when a
	// matching rule needs a body field, and parses the body at most once
	// per identity.
	Body() (contentType, body []byte)
	// Cookies returns the request's cookies exactly as the origin
	// receives them: the cookie-pairs of every Cookie field line, joined
	// by "; " (RFC 6265 §4.2.1), or nil. The Engine calls it only for body
	// identities, which must agree with a cookie of the same name
	// (docs/body-identities.md §6).
	Cookies() []byte
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
	// Host is the host the request names (the absolute-form target's, or
	// Host) in AppendHost's name form: lower case, no port, no trailing
	// dot. The origin receives this host (docs/host-and-path.md §1).
	Host []byte
	// Path is the match form of the canonical path (AppendMatchPath).
	Path []byte
	// Client is the client address as it counts (ipv6.Extractor.Client): an
	// IPv6 address that embeds an IPv4 address is that IPv4 address
	// (docs/client-address.md). Never invalid.
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
	// OutcomeInvalid: the rule's key value is present but invalid and
	// invalid_identity is "reject".
	OutcomeInvalid
	// NumOutcomes bounds per-outcome tables.
	NumOutcomes = int(OutcomeInvalid) + 1
)

var outcomeNames = [...]string{"allow", "deny", "dry_run_deny", "skip", "missing_identity", "store_error_allow", "store_error_deny", "invalid_identity"}

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
	// Settle is true when a rule that counted the request needs the
	// origin's answer (reset_on_success): call Engine.Settle after it.
	Settle bool
}

// Scratch is the per-request working memory of Check, reused through a
// pool so the decision path allocates nothing.
type Scratch struct {
	// MintOp is the index of the visitor mint-budget op, or -1.
	MintOp int
	// BodyParsed reports whether the request's body was parsed for an
	// identity (only matching rules that need one cause it).
	BodyParsed bool
	phone      identity // phone number, resolved at most once
	session    identity // OTP session id, resolved at most once
	settle     []Op     // post-response ops (reset_on_success)
	settleRes  []Result
	Matches    []Match
	Ops        []Op
	Res        []Result
	buf        []byte // encoded key values, for the keyed hash
	prev       []byte // the previous key's encoded values
	prevSum    [15]byte
	sum        []byte
	mac        hash.Hash // HMAC-SHA256 under owner's secret
	owner      *Engine
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
	s.BodyParsed = false
	s.phone, s.session = identity{}, identity{}
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
	invalid := false    // an enforcing rule rejects for an invalid identity
	for _, r := range p.Rules {
		if !r.matches(req) {
			continue
		}
		cond := e.conditions(r, p, req, s)
		if cond == condNotMet || (cond == condInvalid && r.InvalidIdentity != IdentityReject) {
			continue
		}
		if r.Sensitive {
			d.Sensitive = true
		}
		m := Match{Rule: r, Op: -1, CeilingOp: -1, Enforce: !(nodeDry || r.DryRun || r.Action == ActionLog)}
		if cond == condInvalid {
			// A condition on an identity that is present but invalid cannot
			// be decided: the rule rejects as a key on that identity would
			// (invalid_identity), never as its action, so garbage gets one
			// answer whatever the condition and the rule's place, and is
			// charged to the other rules as an attempt.
			m.Outcome = OutcomeInvalid
			if m.Enforce {
				invalid = true
			}
			s.Matches = append(s.Matches, m)
			continue
		}
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
		key, status := e.key(r, p, req, s, false)
		switch {
		case status == keyInvalid && r.InvalidIdentity == IdentityReject:
			m.Outcome = OutcomeInvalid
			if m.Enforce {
				invalid = true
			}
		case status == keyMissing && r.MissingIdentity == IdentityReject:
			m.Outcome = OutcomeMissing
			if m.Enforce {
				missing = true
			}
		case status != keyPresent:
			m.Outcome = OutcomeSkip
		}
		if status != keyPresent {
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
			Sensitive: r.Sensitive,
			MaxKeys:   int32(r.MaxKeys), // ≤ MaxKeysLimit (load.go)
		})
		if r.IPCeiling > 0 {
			// All visitors of one IP share a ceiling (key: the IP instead
			// of the visitor), in the same call, so stockpiled visitor IDs
			// cannot multiply a client's budget.
			ck, _ := e.key(r, p, req, s, true)
			m.CeilingOp = len(s.Ops)
			op := s.Ops[m.Op]
			op.Key, op.Limit, op.Burst = ck, r.IPCeiling, r.CeilingBurst
			s.Ops = append(s.Ops, op)
		}
		s.Matches = append(s.Matches, m)
	}
	missing = missing || invalid // both reject with 400, charging the others as attempts
	if v := p.Visitor; v != nil && !req.VisitorValid && !denyAction && !missing {
		// The mint budget: a GCRA bucket per IP of mint_limit per
		// mint_period. Not enforcing: decided like a dry-run op, it never
		// refuses and consumes only when the request is forwarded, so a
		// refused request never gets a cookie.
		s.MintOp = len(s.Ops)
		s.Ops = append(s.Ops, Op{
			Kind: OpTake, Algorithm: GCRA, Key: e.mintKey(req, p, s),
			Limit: v.MintLimit, Burst: v.MintLimit, PeriodUS: v.MintPeriod.Microseconds(),
			Cost: 1, OnError: FailLocal, MaxKeys: int32(v.MintMaxKeys),
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
		if cap(s.Res) < len(s.Ops) {
			// More ops than the Scratch was sized for (a visitor rule's
			// ceiling, the mint budget): Ops grew by append, Res grows here,
			// once per pooled Scratch.
			s.Res = make([]Result, len(s.Ops))
		}
		s.Res = s.Res[:len(s.Ops)]
		if err := e.store.Take(ctx, now, s.Ops, s.Res); err != nil {
			d.StoreErr = err
			e.storeFailed(&d, s)
			d.setVerdict(denyAction, invalid, missing)
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
	for i := range s.Matches {
		if m := &s.Matches[i]; m.Rule.ResetOnSuccess && m.Op >= 0 && m.Outcome == OutcomeAllow {
			d.Settle = true
		}
	}
	d.setVerdict(denyAction, invalid, missing)
	return d
}

// setVerdict decides what the edge does with the request once every
// matching rule has its outcome. denyAction: an enforcing action = "deny"
// matched (d.Refusing is the first such rule); invalid, missing: an
// enforcing rule rejects the request's identity (missing includes
// invalid). The refusals no counter can change come first, and hold
// whether or not the store could decide (issue 9): a deny answers as its
// rule does (403; the bare 429 when the request is sensitive, DESIGN §6),
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
func (e *Engine) key(r *Rule, p *Policy, req *Request, s *Scratch, ceiling bool) (k Key, status keyStatus) {
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
				return k, keyMissing
			}
			buf = appendValue(buf, v)
		case CharJSON, CharForm:
			v, st := e.bodyField(ch.Source, nil, req, s)
			if st != keyPresent {
				return k, st
			}
			buf = appendValue(buf, []byte(v))
		case CharPhone, CharPhoneRange, CharPhoneCountry, CharOTPSession:
			ph := e.resolvePhone(p, req, s)
			if ph.status != keyPresent {
				return k, ph.status
			}
			switch ch.Kind {
			case CharPhone:
				buf = appendValue(buf, []byte(ph.phone.E164))
			case CharPhoneRange:
				buf = appendValue(buf, []byte(ph.phone.Range()))
			case CharPhoneCountry:
				buf = appendValue(buf, []byte(ph.phone.Region))
			case CharOTPSession:
				ss := e.resolveSession(p, req, s)
				if ss.status != keyPresent {
					return k, ss.status
				}
				buf = otp.AppendSessionKey(buf, ph.phone.E164, ss.value)
			}
		default:
			s.buf = buf
			return k, keyMissing
		}
	}
	s.buf = buf
	copy(k[9:], s.valueHash(buf))
	return k, keyPresent
}

// keyStatus says whether a rule's key values are all present and valid.
type keyStatus uint8

const (
	keyPresent keyStatus = iota
	keyMissing
	keyInvalid
)

// identity is an identity resolved for one request.
type identity struct {
	resolved bool
	status   keyStatus
	phone    otp.Phone
	value    string
}

// lookup reads one identity source of an identity whose sources are all
// (the identity block's list, which holds src). A body field is read the
// way the origin's parser would (bodyField): an ambiguous, malformed or
// unreadable one is invalid, never a guess.
func (e *Engine) lookup(src otp.Source, all []otp.Source, req *Request, s *Scratch) (string, keyStatus) {
	if req.Fields == nil {
		return "", keyMissing
	}
	var v []byte
	switch src.Kind {
	case otp.SourceHeader:
		v = req.Fields.Header([]byte(src.Name))
	case otp.SourceQuery:
		// Read as origins read it: a parameter given twice with
		// different values is ambiguous, hence invalid.
		q, found, err := otp.QueryField(req.Fields.RawQuery(), src.Name)
		switch {
		case err != nil:
			return "", keyInvalid
		case !found || q == "":
			return "", keyMissing
		}
		// Origins that merge the query and the body read a body field of
		// the name first (Go's FormValue, Rails' params): when the
		// identity lists one, the body must agree with the query
		// (docs/body-identities.md §6).
		for _, b := range all {
			if b.MergedName() == src.Name {
				if _, st := e.bodyField(b, all, req, s); st == keyInvalid {
					return "", keyInvalid
				}
			}
		}
		return q, keyPresent
	case otp.SourceCookie:
		v = req.Fields.Cookie([]byte(src.Name))
	case otp.SourceJSON, otp.SourceForm:
		return e.bodyField(src, all, req, s)
	}
	if len(v) == 0 {
		return "", keyMissing
	}
	return string(v), keyPresent
}

// contentEncoding is the header that makes a body identity unreadable.
var contentEncoding = []byte("Content-Encoding")

// bodyField reads a json: or form: field from the body, only where every
// origin reads the same value (docs/body-identities.md). all is the
// identity's list of sources (nil for a key that names the field itself).
//
//   - a request with a Content-Encoding is invalid (§3: Express inflates
//     gzip and deflate bodies, other stacks read the compressed bytes);
//   - a body otp.BodyKind finds ambiguous or unreadable is invalid (§1,
//     §2: a Content-Type that does not parse, names another type or
//     charset, or is missing before a body; multipart; a BOM);
//   - a JSON or form body is read by the source of its format (a source
//     of the other format is missing: the next source is tried), and
//     malformed, ambiguous or non-string fields are invalid (§4, §5);
//   - the field's name in the query string or a cookie must agree with
//     the body's reading (§6: PHP's $_REQUEST, Go's FormValue, Flask's
//     request.values and Rails' params merge them). A name only in the
//     query, the body lacking it or having none, is missing when all
//     lists a query: source of that name (which reads it as the merging
//     origin does) and invalid otherwise: a rule that skips a missing
//     identity would let the origin act on a value no counter saw.
func (e *Engine) bodyField(src otp.Source, all []otp.Source, req *Request, s *Scratch) (string, keyStatus) {
	if req.Fields == nil {
		return "", keyMissing
	}
	ct, body := req.Fields.Body()
	s.BodyParsed = true
	if len(req.Fields.Header(contentEncoding)) > 0 {
		return "", keyInvalid
	}
	kind := otp.BodyKind(ct, body)
	if kind != otp.BodyNone && kind != otp.BodyAmbiguous && kind != otp.BodyUnreadable && kind != src.Body() {
		return "", keyMissing // a body of the other format: its source reads it
	}
	v, found, err := src.BodyField(kind, body)
	if err != nil {
		return "", keyInvalid
	}
	switch err := src.CheckMerged(req.Fields.RawQuery(), req.Fields.Cookies(), v, found); {
	case err == nil:
	case err == otp.ErrOnlyInQuery && hasQuerySource(all, src.MergedName()):
		return "", keyMissing
	default:
		return "", keyInvalid
	}
	if !found || v == "" {
		return "", keyMissing
	}
	return v, keyPresent
}

// hasQuerySource reports whether all lists query:name.
func hasQuerySource(all []otp.Source, name string) bool {
	for _, o := range all {
		if o.Kind == otp.SourceQuery && o.Name == name && name != "" {
			return true
		}
	}
	return false
}

// resolvePhone finds the request's phone number, at most once per request:
// the first of the identity block's phone sources that is present, in
// E.164. Present but not a possible number: invalid.
func (e *Engine) resolvePhone(p *Policy, req *Request, s *Scratch) *identity {
	id := &s.phone
	if id.resolved {
		return id
	}
	id.resolved, id.status = true, keyMissing
	if p.Identity == nil {
		return id
	}
	for _, src := range p.Identity.Phone {
		v, st := e.lookup(src, p.Identity.Phone, req, s)
		if st == keyMissing {
			continue
		}
		if st == keyInvalid {
			id.status = keyInvalid
			return id
		}
		ph, err := otp.Normalize(v, p.Identity.PhoneRegion)
		if err != nil {
			id.status = keyInvalid
			return id
		}
		id.phone, id.status = ph, keyPresent
		return id
	}
	return id
}

// resolveSession finds the request's OTP session id, at most once.
func (e *Engine) resolveSession(p *Policy, req *Request, s *Scratch) *identity {
	id := &s.session
	if id.resolved {
		return id
	}
	id.resolved, id.status = true, keyMissing
	if p.Identity == nil {
		return id
	}
	for _, src := range p.Identity.OTPSession {
		v, st := e.lookup(src, p.Identity.OTPSession, req, s)
		if st == keyMissing {
			continue
		}
		id.value, id.status = v, st
		if st == keyPresent && len(v) > 256 {
			id.status = keyInvalid
		}
		return id
	}
	return id
}

// condStatus is what a rule's when { } conditions make of a request.
type condStatus uint8

const (
	condMet     condStatus = iota // every condition holds
	condNotMet                    // a condition does not hold, or its identity is absent
	condInvalid                   // a condition needs an identity that is present but invalid
)

// conditions evaluates a rule's when { } conditions that need request
// features (the phone's country). A request without a phone meets no
// phone-country condition (the rule does not apply); one whose phone is
// present but invalid (it does not parse, is not a possible number, or its
// body field is ambiguous) is condInvalid, for the rule's invalid_identity
// to decide: no country can be told from garbage, so neither
// phone_country_in nor phone_country_not_in may decide it.
func (e *Engine) conditions(r *Rule, p *Policy, req *Request, s *Scratch) condStatus {
	for _, c := range r.WhenPhoneCountry {
		ph := e.resolvePhone(p, req, s)
		switch ph.status {
		case keyInvalid:
			return condInvalid
		case keyMissing:
			return condNotMet
		}
		in := false
		for _, cc := range c.Countries {
			if ph.phone.Region == cc {
				in = true
				break
			}
		}
		if in == c.Not {
			return condNotMet
		}
	}
	return condMet
}

// Settle runs what happens after the origin answered, in one more store
// call and only when a matching rule needs it: reset_on_success clears the
// rule's counter for the key when the answer is a success (the origin's
// X-Edge-Outcome, "success" or "failure", overrides the status). It reports
// whether it called the store.
func (e *Engine) Settle(ctx context.Context, now time.Time, s *Scratch, status int, outcome []byte) (bool, error) {
	s.settle = s.settle[:0]
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 || !m.Rule.ResetOnSuccess || m.Outcome != OutcomeAllow {
			continue
		}
		if !isSuccess(m.Rule, status, outcome) {
			continue
		}
		op := s.Ops[m.Op]
		op.Kind = OpReset
		s.settle = append(s.settle, op)
	}
	if len(s.settle) == 0 {
		return false, nil
	}
	if cap(s.settleRes) < len(s.settle) {
		s.settleRes = make([]Result, len(s.settle))
	}
	s.settleRes = s.settleRes[:len(s.settle)]
	return true, e.store.Take(ctx, now, s.settle, s.settleRes)
}

// isSuccess classifies the origin's answer for a rule.
func isSuccess(r *Rule, status int, outcome []byte) bool {
	switch string(outcome) {
	case "success":
		return true
	case "failure":
		return false
	}
	for _, st := range r.SuccessStatus {
		if st == status {
			return true
		}
	}
	return false
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
