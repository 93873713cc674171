package rules

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/otp"
)

// Policy is a compiled, validated policies.hcl. It is immutable once Load
// returns it: a reload builds a new Policy and swaps a pointer, so every
// request sees one policy from start to end.
type Policy struct {
	// Filename is the file the policy was loaded from, as given to Load.
	Filename string

	// Listen, AdminListen and Upstream come from the edge block
	// (defaults "127.0.0.1:8080", "127.0.0.1:9901", "http://127.0.0.1:9000").
	Listen      string
	AdminListen string
	Upstream    string

	// Client finds the client address from the peer and the forwarding
	// header the policy names.
	Client *ipv6.Extractor
	// ForwardedHeader is the canonical name of the one header read from
	// trusted proxies ("X-Forwarded-For" or "Forwarded").
	ForwardedHeader string
	// IPv4Prefix and IPv6Prefix group client addresses (defaults 32, 64).
	IPv4Prefix, IPv6Prefix int
	// MaxBodyBytes caps request bodies, in bytes (default 65536).
	MaxBodyBytes int
	// PathCaseInsensitive is path_case = "insensitive" (the default).
	PathCaseInsensitive bool
	// DryRun puts every rule in dry-run.
	DryRun bool
	// KeySecretEnv names the environment variable of the key secret.
	KeySecretEnv string

	// Store is the counter store the policy asks for.
	Store StoreConfig

	// Rules in file order; Rule.Index is the position here.
	Rules []*Rule

	// Sensitive reports whether any rule is sensitive.
	Sensitive bool

	// Visitor is the visitor block, nil without one.
	Visitor *VisitorConfig
	// Identity is the identity block, nil without one.
	Identity *IdentityConfig

	// headerNames are the request headers the policy reads (HeaderNames).
	headerNames []string
}

// HeaderNames returns the names of the request headers the policy reads:
// every rule key's header:NAME and every identity source's header:NAME,
// as written, one per name compared case-insensitively, in policy order;
// nil when the policy reads none. It is computed when the policy is
// compiled; the caller must not modify it. The edge forwards a header the
// policy read only under the spelling it read (docs/host-and-path.md §3).
func (p *Policy) HeaderNames() []string { return p.headerNames }

// IdentityConfig is the `identity { }` block: where identities come from,
// each a list of sources tried in order.
type IdentityConfig struct {
	Phone      []otp.Source
	OTPSession []otp.Source
	// PhoneRegion is the default region of national-format numbers.
	PhoneRegion string
}

// PhoneCountryCond is a phone_country_in (Not false) or
// phone_country_not_in (Not true) condition. A request without a phone
// meets neither; one whose phone does not parse is decided by the rule's
// invalid_identity (reject: 400, charged to the per-client rules; skip:
// the rule does not apply), never by the country lists.
type PhoneCountryCond struct {
	Countries []string
	Not       bool
}

// VisitorConfig is the `visitor { }` block: NAT-aware visitor IDs.
type VisitorConfig struct {
	// Cookie is the cookie's name (default "__edge_vid").
	Cookie string
	// SecretEnv names the environment variable of the signing secrets,
	// comma-separated, the first signs (default "EDGE_VISITOR_SECRETS").
	SecretEnv string
	// MintLimit new IDs per MintPeriod per IP: a GCRA bucket of that rate
	// with a burst of MintLimit (defaults 10 per minute).
	MintLimit  int64
	MintPeriod time.Duration
	// MaxAge is the cookie's lifetime (default 720h).
	MaxAge time.Duration
	// Secure sets the cookie's Secure attribute (default true).
	Secure bool
	// MintMaxKeys is the mint budget's key budget in the memory store (one
	// key per IP): its share of the store's max_keys (StoreConfig.MaxKeys).
	MintMaxKeys int
}

// StoreConfig is the policy's `store` block.
type StoreConfig struct {
	// Kind is "memory" (the default) or "redis".
	Kind string
	// MaxKeys is the memory store's max_keys (default 100000): the keys of
	// the rules that set no max_keys of their own and of the visitor mint
	// budget, split evenly among them (Rule.MaxKeys,
	// VisitorConfig.MintMaxKeys; docs/memory-store.md).
	MaxKeys int
	// URL is the Redis address for Kind "redis".
	URL string
	// Timeout is the per-call budget of a remote store (default 5ms).
	Timeout time.Duration
	// FleetSize divides limits for the "local" fallback (default 1).
	FleetSize int
}

// CharKind is the kind of a characteristic in a rule's key.
type CharKind uint8

// Characteristic kinds, as POLICY.md names them.
const (
	CharIP CharKind = iota + 1
	CharVisitor
	CharHeader
	CharCookie
	CharQuery
	CharJSON
	CharForm
	CharPhone
	CharPhoneRange
	CharPhoneCountry
	CharAccount
	CharOTPSession
	CharASN
	CharCountry
	CharRoute
	CharGlobal
)

// charNames maps the plain characteristic names; the prefixed ones
// (header:, cookie:, query:, json:, form:) are in charPrefixes.
var charNames = map[string]CharKind{
	"ip":            CharIP,
	"visitor":       CharVisitor,
	"phone":         CharPhone,
	"phone_range":   CharPhoneRange,
	"phone_country": CharPhoneCountry,
	"account":       CharAccount,
	"otp_session":   CharOTPSession,
	"asn":           CharASN,
	"country":       CharCountry,
	"route":         CharRoute,
	"global":        CharGlobal,
}

var charPrefixes = map[string]CharKind{
	"header": CharHeader,
	"cookie": CharCookie,
	"query":  CharQuery,
	"json":   CharJSON,
	"form":   CharForm,
}

// charSupported lists the characteristics this build can compute. The others
// parse, and validation says they are not available yet rather than
// accepting a rule that could never count.
var charSupported = map[CharKind]bool{
	CharIP: true, CharVisitor: true, CharHeader: true, CharCookie: true, CharQuery: true,
	CharJSON: true, CharForm: true, CharPhone: true, CharPhoneRange: true, CharPhoneCountry: true, CharOTPSession: true,
	CharRoute: true, CharGlobal: true,
}

// Characteristic is one element of a rule's key.
type Characteristic struct {
	Kind CharKind
	// Name is the header, cookie or query parameter name, or the JSON path
	// or form field, for the prefixed kinds; nil otherwise. Header names
	// are as written (fasthttp compares them case-insensitively).
	Name []byte
	// Source is the body field of json: and form: characteristics.
	Source otp.Source
}

// CountMode is a rule's `count`.
type CountMode uint8

const (
	// CountRequests: a refused request consumes from no rule.
	CountRequests CountMode = iota
	// CountAttempts: every attempt counts, refused or not.
	CountAttempts
	// CountFailures: one unit charged before proxying, refunded unless the
	// origin's answer is a failure.
	CountFailures
)

// Action is a rule's `action`.
type Action uint8

const (
	// ActionLimit counts and refuses over the limit.
	ActionLimit Action = iota
	// ActionDeny refuses every match.
	ActionDeny
	// ActionLog counts and logs, never refuses.
	ActionLog
)

// StoreErrorMode is a rule's `on_store_error`.
type StoreErrorMode uint8

const (
	// FailOpen allows the request when the store cannot decide.
	FailOpen StoreErrorMode = iota
	// FailClosed refuses it with 503.
	FailClosed
	// FailLocal decides from a local bucket at limit ÷ fleet_size.
	FailLocal
)

// IdentityMode is a rule's invalid_identity or missing_identity.
type IdentityMode uint8

const (
	// IdentitySkip: the rule does not apply to the request.
	IdentitySkip IdentityMode = iota
	// IdentityReject: the request is answered 400 and not forwarded.
	IdentityReject
)

// Rule is one compiled `rule` block.
type Rule struct {
	// Name is the rule's label; Index its position in Policy.Rules.
	Name  string
	Index int
	// ID is a hash of the name: counters follow a rule across reloads.
	ID [8]byte

	methods  []string // upper case; empty means any method
	exact    []string // match-form paths, trailing slash dropped
	prefixes []string // match-form prefixes, ending in "/"
	anyPath  bool     // "/*" or no paths
	hosts    []string // lower case, no port; empty means any host

	// Key is the list of characteristics.
	Key []Characteristic

	Algorithm Algorithm
	// Limit units per Period; Burst is the bucket size (bucket algorithms).
	Limit, Burst int64
	Period       time.Duration
	// Count is the count mode.
	Count CountMode
	// Action is limit, deny or log.
	Action Action
	// Sensitive rules answer bare and fail closed by default.
	Sensitive bool
	// OnStoreError is the failure mode when the store cannot decide.
	OnStoreError StoreErrorMode
	// DryRun rules are decided but never refuse.
	DryRun bool
	// IPv4Prefix and IPv6Prefix group the ip characteristic for this rule.
	IPv4Prefix, IPv6Prefix int
	// MissingIdentity and InvalidIdentity say what an absent or invalid
	// key value does.
	MissingIdentity, InvalidIdentity IdentityMode
	// IPCeiling is, for rules keyed on visitor, the limit across all
	// visitors of one IP per Period (0 otherwise); CeilingBurst its bucket
	// size, scaled from the rule's burst.
	IPCeiling, CeilingBurst int64
	// WhenVisitorValid, when set, makes the rule apply only to requests
	// whose visitor cookie is (true) or is not (false) valid.
	WhenVisitorValid *bool
	// WhenPhoneCountry are the rule's phone-country conditions.
	WhenPhoneCountry []*PhoneCountryCond
	// ResetOnSuccess clears the rule's counter for the key when the
	// origin's answer is a success (SuccessStatus, or X-Edge-Outcome).
	ResetOnSuccess bool
	// FailureStatus and SuccessStatus classify the origin's answers
	// (defaults [401, 403] and [200, 201, 204]).
	FailureStatus, SuccessStatus []int
	// MaxKeys is the rule's key budget in the memory store (Op.MaxKeys):
	// the most keys it holds at once, its ip_ceiling keys included. It is
	// the rule's max_keys, or else an equal share of the store's max_keys,
	// ⌈max_keys ÷ n⌉ for the n counting rules without one (plus the
	// visitor mint budget); 0 for a rule that counts nothing (action =
	// "deny"). A sensitive rule whose budget is full of live state answers
	// a new key by its on_store_error; another evicts its least recently
	// used key (docs/memory-store.md).
	MaxKeys int
	// maxKeysSet is true when the rule sets max_keys itself.
	maxKeysSet bool
}

// PeriodUS is the period in microseconds.
func (r *Rule) PeriodUS() int64 { return r.Period.Microseconds() }

// Methods returns the methods the rule matches (empty: any).
func (r *Rule) Methods() []string { return r.methods }

// matchPath reports whether a match-form path (from AppendMatchPath) is one
// of the rule's paths.
func (r *Rule) matchPath(p []byte) bool {
	if r.anyPath {
		return true
	}
	for _, e := range r.exact {
		if string(p) == e {
			return true
		}
	}
	for _, pre := range r.prefixes {
		// "/api/*" matches "/api" and everything under "/api/".
		if len(p)+1 == len(pre) && string(p) == pre[:len(pre)-1] {
			return true
		}
		if len(p) >= len(pre) && string(p[:len(pre)]) == pre {
			return true
		}
	}
	return false
}

// matchMethod reports whether the rule matches method m (upper case).
func (r *Rule) matchMethod(m []byte) bool {
	if len(r.methods) == 0 {
		return true
	}
	for _, x := range r.methods {
		if string(m) == x {
			return true
		}
	}
	return false
}

// matchHost reports whether the rule matches host h (lower case, no port).
func (r *Rule) matchHost(h []byte) bool {
	if len(r.hosts) == 0 {
		return true
	}
	for _, x := range r.hosts {
		if string(h) == x {
			return true
		}
	}
	return false
}

// ruleID hashes a rule name into the first bytes of its keys.
func ruleID(name string) [8]byte {
	sum := sha256.Sum256([]byte("edge rule\x00" + name))
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], binary.BigEndian.Uint64(sum[:8]))
	return id
}

// MintBudgetID is the rule ID the visitor mint budget's keys start with,
// as a rule's keys start with its Rule.ID: the memory store's key budget of
// the mint keys goes by it.
func MintBudgetID() [8]byte { return mintKeyID }

// Rule returns the rule named name, or nil.
func (p *Policy) Rule(name string) *Rule {
	for _, r := range p.Rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}
