package nat

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/internal/httpsyntax"
	"github.com/edge-gateway/edge/internal/keybudget"
	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/counter"
)

// Feature returns the visitor feature: the visitor { } block, the visitor
// characteristic (IP plus visitor ID, with the IP as its ceiling), the
// visitor_valid condition and the mint budget every request without a
// valid cookie passes through (docs/policy.md, "visitor").
func Feature() rules.Feature {
	return rules.Feature{
		Name:            "nat",
		Blocks:          []rules.BlockType{{Type: "visitor", Decode: decodeVisitor}},
		Characteristics: []rules.CharacteristicType{{Name: "visitor", Tag: rules.TagVisitor, Compile: compileVisitor}},
		Conditions:      []rules.ConditionType{{Name: "visitor_valid", Compile: compileVisitorValid}},
	}
}

// Config is the compiled visitor { } block.
type Config struct {
	// Cookie is the cookie's name (default "__edge_vid").
	Cookie string
	// SecretEnv names the environment variable of the signing secrets,
	// comma-separated, the first signs (default "EDGE_VISITOR_SECRETS").
	SecretEnv string
	// MintLimit new IDs per MintPeriod per IP: a GCRA bucket of that rate
	// with a burst of MintLimit (defaults 10 per minute).
	MintLimit  int64
	MintPeriod time.Duration
	// MintReserve more new IDs per MintPeriod per IP (default MintLimit; 0:
	// none) for the clients that are not minting in bulk: once MintLimit
	// is spent, a client whose fingerprint (a keyed hash of its
	// User-Agent, Accept-Language and JA4) has minted nothing this
	// MintPeriod behind the address draws one from the reserve (mint.go).
	MintReserve int64
	// MaxAge is the cookie's lifetime (default 720h).
	MaxAge time.Duration
	// Secure sets the cookie's Secure attribute (default true).
	Secure bool
	// Mint is the mint budget's key budget in the memory store (one key
	// per IP for the bulk budget and one for the reserve): its share of
	// the store's max_keys. Fingerprints is its fingerprints' (one key per
	// IP and fingerprint), as large (mint.go).
	Mint, Fingerprints *rules.Budget

	slot       int // memo slot of the request's visitor (SetVisitor)
	ipv4, ipv6 int // the policy's client grouping, for the mint budget
}

// ConfigOf returns p's visitor block, or nil without one.
func ConfigOf(p *rules.Policy) *Config {
	c, _ := p.Block("visitor").(*Config)
	return c
}

// MintBudgetName labels the mint budget's key-budget metrics;
// FingerprintBudgetName its fingerprints' (mint.go).
const (
	MintBudgetName        = "(visitor mint)"
	FingerprintBudgetName = "(visitor mint fingerprints)"
)

// mintID names the mint budget's counters, as a rule's ID names its own
// (the NUL keeps it apart from every rule name).
var mintID = rules.BudgetID("\x00visitor-mint")

// fingerprintID names the mint budget's fingerprint counters (mint.go).
var fingerprintID = rules.BudgetID("\x00visitor-mint-fingerprint")

// visitorState is the request's visitor, as the gateway verified it,
// and its mint ops beside Memo.Op's bulk one (mint.go).
type visitorState struct {
	id    ID
	valid bool
	mint  mintState
	// cookie is the value of the cookie minted for the request; forward
	// where its new ID comes from (NoMint: none), reserve whether the
	// reserve's take is in Settle's call (extension.go).
	cookie  []byte
	forward MintSource
	reserve bool
}

// SetVisitor records the request's visitor ID, which the caller verified
// (Signer.Verify), for the visitor characteristic, visitor_valid and the
// mint budget. Call it after s.Begin(p) and before Engine.Check.
func (c *Config) SetVisitor(s *rules.Scratch, id ID, valid bool) {
	m := s.Memo(c.slot)
	st := stateOf(m)
	st.id, st.valid = id, valid
	m.Done = true
}

// stateOf returns the slot's visitor state, made the first time.
func stateOf(m *rules.Memo) *visitorState {
	return memo.State[visitorState](m)
}

// Visitor returns the visitor SetVisitor recorded for the request.
func (c *Config) Visitor(s *rules.Scratch) (ID, bool) {
	m := s.Memo(c.slot)
	st, _ := m.State.(*visitorState)
	if !m.Done || st == nil {
		return ID{}, false
	}
	return st.id, st.valid
}

// MintOp returns the index in s.Ops (and s.Res) of the request's mint
// budget op, or -1 when it has none (a valid cookie, a refused request).
func (c *Config) MintOp(s *rules.Scratch) int { return s.Memo(c.slot).Op }

// visitorBlock is the HCL schema of visitor { }.
type visitorBlock struct {
	Cookie      *string `hcl:"cookie,optional"`
	SecretEnv   *string `hcl:"secret_env,optional"`
	MintLimit   *int    `hcl:"mint_limit,optional"`
	MintPeriod  *string `hcl:"mint_period,optional"`
	MintReserve *int    `hcl:"mint_reserve,optional"`
	MaxAge      *string `hcl:"max_age,optional"`
	Secure      *bool   `hcl:"secure,optional"`

	MintPeriodRange  hcl.Range `hcl:"mint_period,attr_value_range"`
	MaxAgeRange      hcl.Range `hcl:"max_age,attr_value_range"`
	MintLimitRange   hcl.Range `hcl:"mint_limit,attr_value_range"`
	MintReserveRange hcl.Range `hcl:"mint_reserve,attr_value_range"`
}

// decodeVisitor compiles the visitor block (defaults in docs/policy.md).
func decodeVisitor(c *rules.Compiler, blk *hcl.Block) any {
	var b visitorBlock
	if !c.Decode(blk, &b) {
		return nil
	}
	p := c.Policy()
	v := &Config{
		Cookie: DefaultCookie, SecretEnv: "EDGE_VISITOR_SECRETS", MintLimit: 10,
		MintPeriod: time.Minute, MaxAge: DefaultMaxAge, Secure: true,
		slot: c.Slot("nat.visitor"), ipv4: p.IPv4Prefix, ipv6: p.IPv6Prefix,
	}
	if b.Cookie != nil {
		v.Cookie = *b.Cookie
		if !httpsyntax.IsToken(v.Cookie) {
			c.Errorf(blk.DefRange, "Invalid cookie", "%q is not a cookie name", v.Cookie)
		}
	}
	if b.SecretEnv != nil {
		v.SecretEnv = *b.SecretEnv
	}
	if b.MintLimit != nil {
		v.MintLimit = int64(*b.MintLimit)
		if v.MintLimit < 1 {
			c.Errorf(b.MintLimitRange, "Invalid mint_limit", "mint_limit must be at least 1, got %d", v.MintLimit)
		}
	}
	if b.MintPeriod != nil {
		d, err := rules.ParseDuration(*b.MintPeriod)
		if err != nil || d <= 0 {
			c.Errorf(b.MintPeriodRange, "Invalid mint_period", "%q is not a positive duration such as \"1m\"", *b.MintPeriod)
		} else {
			v.MintPeriod = d
		}
	}
	if b.MaxAge != nil {
		d, err := rules.ParseDuration(*b.MaxAge)
		if err != nil || d <= 0 {
			c.Errorf(b.MaxAgeRange, "Invalid max_age", "%q is not a positive duration such as \"720h\"", *b.MaxAge)
		} else {
			v.MaxAge = d
		}
	}
	if b.Secure != nil {
		v.Secure = *b.Secure
	}
	v.MintReserve = v.MintLimit
	if b.MintReserve != nil {
		v.MintReserve = int64(*b.MintReserve)
		if v.MintReserve < 0 {
			c.Errorf(b.MintReserveRange, "Invalid mint_reserve", "mint_reserve must be 0 (no reserve) or more, got %d", v.MintReserve)
		}
	}
	if v.MintLimit > 0 && v.MintPeriod > 0 {
		if err := counter.ValidateLimits(counter.GCRA, v.MintLimit, v.MintLimit, v.MintPeriod.Microseconds()); err != nil {
			c.Errorf(b.MintLimitRange, "mint_limit out of range", "%v", err)
		}
		if v.MintReserve > 0 {
			if err := counter.ValidateLimits(counter.GCRA, v.MintReserve, v.MintReserve, v.MintPeriod.Microseconds()); err != nil {
				c.Errorf(b.MintReserveRange, "mint_reserve out of range", "%v", err)
			}
		}
	}
	v.Mint = c.AddKeyBudget(keybudget.Shared(mintID, MintBudgetName))
	if v.MintReserve > 0 {
		v.Fingerprints = c.AddKeyBudget(keybudget.Like(fingerprintID, FingerprintBudgetName, v.Mint))
	}
	c.AddRequestHook(v)
	return v
}

func compileVisitor(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
	v := ConfigOf(c.Policy())
	if v == nil {
		// The rule will not load; the characteristic still comes back so
		// the rule's other checks (ip_ceiling) see a visitor rule.
		c.Errorf(r.DefRange, "Missing visitor block", "rule %q counts per visitor; add a visitor { } block (cookie and secrets of the visitor IDs)", r.Name)
	}
	return visitorChar{v: v, r: r}
}

// visitorChar is "visitor": the client's IP (at the rule's grouping) and,
// with a valid cookie, its visitor ID; the IP's cookieless bucket
// otherwise (tampered, expired, unknown secret, absent). Its ceiling is
// the IP alone: all visitors of one IP share the rule's ip_ceiling.
type visitorChar struct {
	v *Config
	r *rules.Rule
}

func (c visitorChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	buf = ipv6.AppendKey(buf, req.Client, c.r.IPv4Prefix, c.r.IPv6Prefix)
	if id, ok := c.v.Visitor(s); ok {
		buf = append(buf, 1)
		return append(buf, id[:]...), rules.Present
	}
	return append(buf, 0), rules.Present
}

// SharedBucket reports a request without a valid cookie: its value is the
// address's cookieless bucket, which every such client shares, so no known
// block recognises it and a ban by visitor always falls on it
// (rules.BucketCharacteristic).
func (c visitorChar) SharedBucket(_ *rules.Request, s *rules.Scratch) bool {
	_, ok := c.v.Visitor(s)
	return !ok
}

// AppendCaller names the visitor by its signed ID alone, wherever it comes
// from (rules.CallerCharacteristic): a known marker then follows the
// browser across the addresses of a carrier's pool or a DHCP lease, where
// its counters (AppendValue: the address and the ID) start anew. Without a
// valid cookie it is the address's cookieless bucket, named by the address,
// as its counter is. The first byte keeps the two apart.
func (c visitorChar) AppendCaller(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	if id, ok := c.v.Visitor(s); ok {
		buf = append(buf, 1)
		return append(buf, id[:]...), rules.Present
	}
	buf = append(buf, 0)
	return ipv6.AppendKey(buf, req.Client, c.r.IPv4Prefix, c.r.IPv6Prefix), rules.Present
}

// AppendText is a visitor as the forgive of an identity names it
// (rules.TextCharacteristic): "ID@ADDRESS", its visitor ID in hex (32
// digits) and the address it counts at, since a visitor's counter is its
// ID at its address (AppendValue). Nobody types the ID: the admin API
// verifies the visitor's cookie value, as a request's is, and writes this
// form (gateway, admin_forgive.go); the address is grouped by the rule's
// prefixes, as a request's.
func (c visitorChar) AppendText(buf []byte, text string, p *rules.Policy) ([]byte, error) {
	idHex, addr, ok := strings.Cut(strings.TrimSpace(text), "@")
	var id ID
	if n, err := hex.Decode(id[:], []byte(idHex)); !ok || err != nil || n != len(id) || len(idHex) != 2*len(id) {
		return buf, errors.New("not a visitor: give its cookie's value and the ip it was at")
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return buf, fmt.Errorf("the visitor's ip is not an IP address: %w", err)
	}
	var x *ipv6.Extractor
	if p != nil {
		x = p.Client
	}
	buf = ipv6.AppendKey(buf, x.Counted(a), c.r.IPv4Prefix, c.r.IPv6Prefix)
	buf = append(buf, 1)
	return append(buf, id[:]...), nil
}

// Folds is false: a visitor's counter is its own at its address
// (rules.CallerCharacteristic).
func (visitorChar) Folds(*rules.Request, *rules.Scratch) bool { return false }

func (c visitorChar) AppendCeiling(buf []byte, req *rules.Request, _ *rules.Scratch) ([]byte, rules.Status) {
	return ipv6.AppendKey(buf, req.Client, c.r.IPv4Prefix, c.r.IPv6Prefix), rules.Present
}

func compileVisitorValid(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
	v := ConfigOf(c.Policy())
	if v == nil {
		c.Errorf(a.Range, "Missing visitor block", "visitor_valid needs a visitor { } block")
		return nil
	}
	var want bool
	if !c.Append(gohcl.DecodeExpression(a.Expr, nil, &want)) {
		return nil
	}
	return visitorValid{v: v, want: want}
}

// visitorValid is when { visitor_valid = B }: the rule applies only to
// requests whose visitor cookie is (true) or is not (false) valid.
type visitorValid struct {
	v    *Config
	want bool
}

// String returns the condition as a policy writes it.
func (c visitorValid) String() string {
	if c.want {
		return "visitor_valid = true"
	}
	return "visitor_valid = false"
}

func (c visitorValid) Eval(_ *rules.Request, s *rules.Scratch) rules.Status {
	if _, ok := c.v.Visitor(s); ok == c.want {
		return rules.Present
	}
	return rules.Missing
}

var (
	_ rules.CeilingCharacteristic = visitorChar{}
	_ rules.BucketCharacteristic  = visitorChar{}
	_ rules.CallerCharacteristic  = visitorChar{}
	_ rules.TextCharacteristic    = visitorChar{}
)
