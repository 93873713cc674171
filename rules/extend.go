package rules

import (
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/rules/counter"
)

// This file is the engine's extension points (docs/architecture.md,
// "Extension points"): what a Feature adds to the policy language without
// rules knowing it by name, and what rules asks of each part.

// Feature is one plug-in: the blocks, characteristics and conditions it
// adds. The caller (cmd/edge, through builtin.Features) passes the list to
// Load explicitly; nothing registers itself.
type Feature struct {
	// Name names the feature in diagnostics ("otp", "nat").
	Name string
	// Blocks are the top-level blocks the feature decodes.
	Blocks []BlockType
	// Characteristics are the key elements the feature resolves.
	Characteristics []CharacteristicType
	// Conditions are the when { } attributes the feature evaluates.
	Conditions []ConditionType
	// RuleAttrs are attributes the feature adds to rule { } blocks.
	RuleAttrs []RuleAttrType
	// Periods are words a rule's period may be instead of a duration.
	Periods []PeriodType
	// Algorithms are words a rule's algorithm may be beside the counter
	// algorithms' own.
	Algorithms []AlgorithmType
	// RuleBlocks are blocks the feature adds inside rule { } blocks.
	RuleBlocks []RuleBlockType
	// RuleDone, when set, runs for every rule once its attributes (its own
	// and every feature's) are compiled: it checks the feature's attributes
	// that only make sense together, and sets their defaults (queue's
	// max_delay). Features' run in the order Load was given them.
	RuleDone func(c *Compiler, r *Rule)
	// PolicyDone, when set, runs once every rule block is compiled (those
	// with errors too, which are not in Policy.Rules), before the key
	// budgets are shared out: it checks what the feature's attributes say
	// across rules (a skip list's rule names, behaviour/skip) and compiles
	// what the feature keeps for the whole policy (load_shedding { },
	// which package node decodes with the edge block: behaviour/shed); it
	// may keep a value of its own (Compiler.SetValue) and add request hooks
	// (Compiler.AddRequestHook). Features' run in the order Load was given
	// them.
	PolicyDone func(c *Compiler)
}

// RuleAttrType is an attribute a feature adds to rule { } blocks: its
// Compile may set what the rule does around the origin (append to
// Rule.Hooks) or refuse the attribute where it cannot apply.
type RuleAttrType struct {
	// Name is the attribute's name.
	Name string
	// Compile compiles the attribute for rule r, reporting problems
	// through c. It runs after the rule's own attributes, its key and its
	// conditions are compiled.
	Compile func(c *Compiler, r *Rule, attr *hcl.Attribute)
}

// PeriodType is a word a rule's period may be instead of a duration
// (period = "month"): a window the feature's WindowShaper sets on each of
// the rule's ops.
type PeriodType struct {
	// Name is the word.
	Name string
	// Compile compiles period = Name for rule r, once its algorithm and
	// limit are compiled; rng is the value's range. It returns r's
	// nominal period (Rule.Period, which the limit's checks and a ban's
	// guilt read), or 0 after reporting why not through c.
	Compile func(c *Compiler, r *Rule, rng hcl.Range) time.Duration
}

// AlgorithmType is a word a rule's algorithm may be beside the counter
// algorithms' (algorithm = "concurrency": behaviour/concurrency): a way of
// counting that a feature builds on one of them, whose numbers are the
// feature's: rules compiles no limit, period or burst for its rules, and
// leaves them (and count_distinct) to the feature to compile or refuse,
// which it does in its Compile and its RuleDone.
type AlgorithmType struct {
	// Name is the word.
	Name string
	// Compile compiles algorithm = Name for rule r, once its action, key
	// and count_distinct are compiled; rng is the value's range. It
	// returns the counter algorithm of r's ops.
	Compile func(c *Compiler, r *Rule, rng hcl.Range) Algorithm
}

// RuleBlockType is a block a feature adds inside rule { } blocks, such as
// adaptive { }. Its blocks are compiled with the features' attributes, in
// the order written.
type RuleBlockType struct {
	// Type is the block's type name ("adaptive"). It takes no labels.
	Type string
	// Multiple allows the block more than once in a rule; otherwise a
	// second one is a "Duplicate block" error (the first is compiled).
	Multiple bool
	// Keyless marks a block that makes its rule need no key: a rule with
	// it is not held to key = [...] (adaptive { }: the limit is the
	// route's own on this node, no client's).
	Keyless bool
	// Compile compiles the block for rule r, reporting problems through c.
	// It runs after the rule's own attributes, its key and its conditions
	// are compiled.
	Compile func(c *Compiler, r *Rule, b *hcl.Block)
}

// BlockType is a top-level block a feature decodes, such as visitor { }.
// Feature blocks are decoded before any rule, in file order, so a
// characteristic's Compile can read them (Compiler.Block).
type BlockType struct {
	// Type is the block's type name ("visitor").
	Type string
	// Labels names the block's labels (test "NAME" has one); nil: none.
	Labels []string
	// Multiple allows the block more than once (test blocks); otherwise a
	// second one is a "Duplicate block" error.
	Multiple bool
	// First marks a block of the node's own configuration (package node's
	// edge { } and store { }): the blocks of First types are decoded
	// before every other block, type by type in the order the features
	// list them (edge before store, wherever the file has them), so that
	// what they set (Compiler.SetNode) is final when the others and the
	// rules compile.
	First bool
	// Last marks a block that compiles characteristics (known { }'s by):
	// the blocks of Last types are decoded after every other block, in
	// file order, so that what those characteristics read (identity { },
	// visitor { }) is decoded, wherever the file has it.
	Last bool
	// Attrs, when set, are the only attributes of the block this feature
	// decodes, and several features may then share the block type, each
	// with attributes of its own (the identity block: otp's phone and
	// otp_session, login's account). Decode sees a block whose body holds
	// only its Attrs; an attribute no owner lists is an error, reported
	// once. Every owner of a shared type must list its Attrs.
	Attrs []string
	// Identities are the attributes of Attrs that are identities, lists
	// of sources (identity { }'s account, phone, otp_session). A block
	// whose owners name any also takes on_conflict, which rules decodes
	// (values.go) and owners read through Compiler.OnConflict: what a
	// request whose sources of one identity disagree gets.
	Identities []string
	// Decode compiles one block, reporting problems through c, and returns
	// what the policy keeps for it (Policy.Block, Policy.Blocks); nil
	// keeps nothing. Owners of a shared block each add their value.
	Decode func(c *Compiler, b *hcl.Block) any
}

// CharacteristicType is a kind of key element. A plain one is named alone
// ("phone"); a prefixed one takes an argument after a colon
// ("json:user.phone").
type CharacteristicType struct {
	// Name is the characteristic's name, or its prefix without the colon.
	Name string
	// Prefixed is true for NAME:ARG characteristics.
	Prefixed bool
	// Example shows a prefixed characteristic in use ("json:user.phone"),
	// for diagnostics.
	Example string
	// Tag is the byte that marks the characteristic's value in a counter
	// key (and the first characteristic's in the key's header). It must be
	// unique and never change: counters outlive releases, and a new tag
	// would forget every counter keyed on it. 1-15 belong to the built-in
	// features (see the Tag* constants); new features take 17 to 31. The
	// byte's three top bits are the key's flags (0x80: several parts,
	// 0x40: a ceiling, 0x20: a marker), which no tag may use.
	Tag byte
	// Hidden leaves the characteristic out of the names diagnostics list
	// (one a later build will have, which Compile refuses by name).
	Hidden bool
	// Shared marks the one characteristic whose value is empty by design:
	// global, one counter for every request. Any other that answers
	// Present without appending a value is taken as Missing, so nothing
	// becomes a shared key by accident.
	Shared bool
	// Compile compiles one use in rule r's key. arg is what follows the
	// colon of a prefixed characteristic ("" otherwise), rng the element's
	// range. It returns nil after reporting an error through c.
	Compile func(c *Compiler, r *Rule, arg string, rng hcl.Range) Characteristic
}

// MaxTag is the largest characteristic tag: the tag byte's three top bits
// are the key's flags.
const MaxTag byte = 31

// Tags of the characteristics in a counter key. They are the values keys
// have always carried, so counters survive an upgrade.
const (
	TagIP           byte = 1
	TagVisitor      byte = 2
	TagHeader       byte = 3
	TagCookie       byte = 4
	TagQuery        byte = 5
	TagJSON         byte = 6
	TagForm         byte = 7
	TagPhone        byte = 8
	TagPhoneRange   byte = 9
	TagPhoneCountry byte = 10
	TagAccount      byte = 11
	TagOTPSession   byte = 12
	TagASN          byte = 13
	TagCountry      byte = 14
	TagRoute        byte = 15
	TagGlobal       byte = 16
	// TagEmail is login's email (17 is ja4's).
	TagEmail byte = 18
)

// Status is what resolving a request's identity found.
type Status uint8

const (
	// Present: the value is there and valid.
	Present Status = iota
	// Missing: the value is absent or empty (the rule's missing_identity
	// decides: skip, or reject with 400).
	Missing
	// Invalid: the value is there but unusable: it does not parse, or the
	// origin could read it another way (the rule's invalid_identity
	// decides; docs/body-identities.md).
	Invalid
	// Absent: the request cannot have the value, through no doing of its
	// client: a TLS fingerprint (ja4) on a connection the edge did not
	// terminate and no trusted proxy described. The rule skips, whatever
	// missing_identity and sensitive say: rejecting would refuse every
	// such request, and no client could supply the value.
	Absent
)

// Characteristic is one compiled element of a rule's key.
type Characteristic interface {
	// AppendValue appends the request's value, encoded so that no two
	// values encode alike (AppendValue helps), to buf, a caller-owned
	// buffer, and returns it with Present; with Missing or Invalid the
	// returned buffer is ignored. The Engine holds it to that: a returned
	// buffer that does not extend buf is Invalid, and Present with nothing
	// appended is Missing (unless the type is Shared). It must not allocate per request: a
	// value several characteristics share is resolved once through a memo
	// slot (Compiler.Slot, Scratch.Memo).
	AppendValue(buf []byte, req *Request, s *Scratch) ([]byte, Status)
}

// CeilingCharacteristic is a characteristic whose values group under a
// coarser one every rule keyed on it also limits: many visitor IDs share
// one IP, so a client that stockpiles IDs still meets the IP's ceiling
// (ip_ceiling, docs/policy.md).
type CeilingCharacteristic interface {
	Characteristic
	// AppendCeiling appends the coarser value (the visitor's IP).
	AppendCeiling(buf []byte, req *Request, s *Scratch) ([]byte, Status)
}

// BucketCharacteristic is a characteristic some of whose values stand for
// a bucket many clients share rather than one caller: visitor's cookieless
// bucket, every client of an address without a valid cookie. A known { }
// block never recognises such a value (nobody is known by it), and a ban
// by it (ban_by) refuses it whenever the key is banned: its clients cannot
// be told apart from the attacker (behaviour/known, behaviour/ban).
type BucketCharacteristic interface {
	Characteristic
	// SharedBucket reports whether the request's value is the shared
	// bucket.
	SharedBucket(req *Request, s *Scratch) bool
}

// CallerCharacteristic is a characteristic whose counted value is not the
// caller a marker that exempts must name (behaviour/known): an account
// counted in its normal form, where "rené" and "rene" share one counter,
// but which an origin that keeps them apart logs in as two accounts; a
// visitor counted per address, which is one browser wherever it comes
// from. Markers that exempt a caller (known_visitors, known { }) name it
// by AppendCaller, so a success on one account makes its visitor known for
// that account as it was sent and for no other spelling; counters keep
// AppendValue.
type CallerCharacteristic interface {
	Characteristic
	// AppendCaller appends the value that names the request's caller
	// exactly (an account as it was sent, before any folding; a visitor's
	// signed ID alone), encoded so that no two callers encode alike, and
	// returns it with Present. Missing as AppendValue would be; Invalid
	// when the request names several callers (its sources disagree, even
	// where they normalise alike) or none usable: nobody is named.
	AppendCaller(buf []byte, req *Request, s *Scratch) ([]byte, Status)
	// Folds reports whether the request's counted value folds what it sent
	// into a form other callers' values share (an account written "Rene"
	// is counted as "rene"; sources that disagree however they normalise):
	// the counter may hold another account's failures, so a success of
	// this request clears it for no one (reset_on_success gives back its
	// own charge instead). Called after AppendValue answered Present.
	Folds(req *Request, s *Scratch) bool
}

// ConditionType is a when { } attribute.
type ConditionType struct {
	// Name is the attribute's name ("phone_country_in").
	Name string
	// Hidden leaves the condition out of the names diagnostics list.
	Hidden bool
	// Compile compiles the attribute for rule r; nil after an error.
	Compile func(c *Compiler, r *Rule, attr *hcl.Attribute) Condition
}

// Condition is one compiled when { } attribute. A condition should also
// be a fmt.Stringer that prints it as written (explanations, tests).
type Condition interface {
	// Eval reports whether req meets the condition: Present (met), Missing
	// (not met, or its identity is absent: the rule does not apply) or
	// Invalid (the identity is there but unusable: the rule's
	// invalid_identity decides, never the condition).
	Eval(req *Request, s *Scratch) Status
}

// Hook is what a rule does once the origin has answered a request it
// counted and allowed, before its stages' Settle (behaviour/answer:
// reset_on_success clears the counter after a success, count = "failures"
// refunds the unit a success did not use). Engine.Settle calls it, and
// the ops it returns go to the store in one call.
type Hook interface {
	// AfterOrigin appends to settle the ops to run for m given the
	// origin's status and X-Edge-Outcome (nil, "success" or "failure"),
	// and returns settle. ops are the request's ops: m's own is ops[m.Op],
	// its ceiling's ops[m.CeilingOp] when m.CeilingOp >= 0.
	AfterOrigin(m *Match, ops []Op, status int, outcome []byte, settle []Op) []Op
}

// RequestHook takes part in every request of a policy, not one rule: the
// visitor mint budget is one. Register it with Compiler.AddRequestHook.
type RequestHook interface {
	// BeforeStore is called after every rule matched and before the one
	// store call, unless the request is refused whatever the counters say
	// (a deny action, a rejected identity). It may add ops to that call
	// with Scratch.AddOp and read their results after Check returns.
	BeforeStore(req *Request, s *Scratch)
}

// RequestGater is a RequestHook with a part in the gate phase of every
// request the gate sees (not one refused whatever the counters say), not
// only of one rule's matches: its checks ride in the precheck call, before
// anything is counted, with the rules' stages' (Gater). A known { }
// block's hook reads who the caller is (behaviour/known); a ban of
// ban_scope = "sensitive" refuses its key on every sensitive route,
// whether its rule matches the request or not (behaviour/ban).
// Compiler.AddRequestHook registers one; the gate runs them in the order
// they were added.
type RequestGater interface {
	RequestHook
	// GateRequest is called after the stages' Gate, sensitive when a
	// sensitive rule matched the request (Decision.Sensitive); it may
	// queue precheck ops (Scratch.PreOp) and ask for Settle's call
	// (Scratch.WantSettle).
	GateRequest(req *Request, s *Scratch, sensitive bool)
	// AdmitRequest is called once the precheck returned, after the
	// stages' Admit (a match a Gater took out of its rule is Known), to
	// read its results (Scratch.PreResult), and returns the rule that
	// refuses the request before anything is counted (nil: none), which
	// the request may retry after retryAfter. A refusal by a rule the
	// request does not match is that rule's all the same, in metrics and
	// logs. A store that cannot answer the precheck gates nothing: it is
	// not called.
	AdmitRequest(s *Scratch) (refusing *Rule, retryAfter time.Duration)
}

// RequestSettler is a RequestHook with a part after the origin's answer:
// Engine.Settle calls AfterOrigin and sends the ops it appends in its one
// call (the visitor mint reserve's draw, before the cookie is set), whose
// results it reads with Scratch.SettleResult once Settle returns. A
// caller that wants them sent calls Settle even when Decision.Settle is
// false (the feature says when).
type RequestSettler interface {
	RequestHook
	// AfterOrigin appends to settle the request's ops given the origin's
	// status and X-Edge-Outcome, and returns settle.
	AfterOrigin(s *Scratch, status int, outcome []byte, settle []Op) []Op
}

// Admitter is a RequestHook with the gate phase's last step, which makes
// no store call (load shedding: behaviour/shed). Admit is called once
// nothing refused the request before anything is counted (a deny action,
// a rejected identity, a Gater) and reports whether to shed it rather
// than let it go on to the store and the origin now; it may take local
// slots the request holds in flight (Scratch.HoldSlot) and decide the
// matches of the LocalLimit rules (their Outcome). A shed request is
// answered Verdict Shed (503), refused by refusing (nil: by no rule),
// retryable after retryAfter; Check gives back the slots taken and leaves
// every counting match undecided (OutcomeSkip), so that no rule counts it.
// Explain calls ExplainAdmit instead, once the request is decided as d,
// which takes no slot and returns d, turned into a shed or not.
type Admitter interface {
	RequestHook
	Admit(s *Scratch) (shed bool, refusing *Rule, retryAfter time.Duration)
	ExplainAdmit(s *Scratch, d Decision) Decision
}

// SettleResult returns the result of the settle op at index i (the
// length of settle when a RequestSettler's AfterOrigin appended the op)
// in the request's last Engine.Settle call. ok is false when that call
// sent nothing, failed (a store error: its results are undefined), or
// holds no op i.
func (s *Scratch) SettleResult(i int) (r Result, ok bool) {
	if !s.settled || i < 0 || i >= len(s.settleRes) {
		return Result{}, false
	}
	return s.settleRes[i], true
}

// Memo is one per-request memo slot (Compiler.Slot): a value resolved once
// per request, however many rules use it. The Engine clears Done when a
// request begins (Scratch.Begin); Value and State keep their memory across
// the requests of one Scratch, so resolution allocates nothing once warm.
type Memo struct {
	// Done is true once the value is resolved for this request.
	Done bool
	// Status is what resolving found.
	Status Status
	// Value holds the resolved value's bytes (reuse its capacity).
	Value []byte
	// Op is an op index a RequestHook recorded (Scratch.AddOp), or -1.
	Op int
	// State is the owning feature's own per-Scratch state (a parsed
	// phone, a verified visitor ID), allocated the first time and reused.
	State any
}

// Kept returns the value e keeps under key for a feature: state of the
// node that outlives every policy e decides (a reload keeps it), such as
// behaviour/forgive's record of the exemptions made on this node. The
// first call for key stores newValue() and returns it, every later one
// that value. key must be comparable and the feature's own (a value of an
// unexported type, as a context key is). Safe for concurrent use: a lookup
// (on the request path) is a sync.Map's Load, with no lock and, for a key
// of a zero-size type, no allocation.
func (e *Engine) Kept(key any, newValue func() any) any {
	if v, ok := e.kept.Load(key); ok {
		return v
	}
	v, _ := e.kept.LoadOrStore(key, newValue())
	return v
}

// Kept is Engine.Kept of the engine deciding the request (Check's); the
// Scratch remembers its last answer, which a value kept never changes.
func (s *Scratch) Kept(key any, newValue func() any) any {
	if s.kept.owner == s.owner && s.kept.owner != nil && s.kept.key == key {
		return s.kept.v
	}
	v := s.owner.Kept(key, newValue)
	s.kept.owner, s.kept.key, s.kept.v = s.owner, key, v
	return v
}

// Node is what rules reads of the node's own configuration, the edge { }
// and store { } blocks. A feature decodes them (package node, whose Config
// holds the rest: listeners, TLS, the origin, connections, the store's
// address) and hands this part to Compiler.SetNode before any other block
// is decoded (BlockType.First); Policy embeds it. A policy without those
// blocks, or loaded without that feature, has DefaultNode's values.
type Node struct {
	// Client finds the client address from the peer and the forwarding
	// header the policy names (trusted_proxies, forwarded_header,
	// nat64_prefixes).
	Client *ipv6.Extractor
	// ForwardedHeader is the canonical name of the one header read from
	// trusted proxies ("X-Forwarded-For" or "Forwarded").
	ForwardedHeader string
	// IPv4Prefix and IPv6Prefix group client addresses (defaults 32, 64),
	// for every rule that sets no prefix of its own.
	IPv4Prefix, IPv6Prefix int
	// PathCaseInsensitive is path_case = "insensitive" (the default).
	PathCaseInsensitive bool
	// DryRun puts every rule in dry-run.
	DryRun bool
	// UpstreamTimeout is the origin's budget for one request: sending it
	// (and the TLS handshake) and reading the whole answer (default
	// DefaultUpstreamTimeout, 10s). A concurrency rule's lease must
	// outlast it (behaviour/concurrency).
	UpstreamTimeout time.Duration
	// DecideListen is the decision-only listener's HOST:PORT; empty: none.
	// With one, the rules are checked for what a described request
	// carries (node/decide.go).
	DecideListen string
	// Keys are the memory store's key budgets, from store { }.
	Keys StoreKeys
	// Config is the rest of the node's configuration (package node's
	// *Config), which rules keeps for its owner and never reads: node.Of
	// is then a type assertion, cheap enough for every request.
	Config any
}

// StoreKeys are the memory store's key budgets, as the store block sets
// them (package node's StoreConfig embeds them).
type StoreKeys struct {
	// MaxKeys is the memory store's max_keys (default 100000): the keys of
	// the rules that set no max_keys of their own and of the features'
	// budgets, split evenly among them (Rule.MaxKeys, Budget.MaxKeys;
	// docs/memory-store.md).
	MaxKeys int
	// NetworkShare is the memory store's network_share in parts per
	// million (default 50000, 5%): the most of a rule's key budget one
	// client network holds, for the sensitive rules that set none
	// (Rule.NetworkKeys; an ordinary rule has a share only by its own);
	// NetworkIPv4Prefix and NetworkIPv6Prefix are a network's prefix
	// lengths (default 24 and 48). All zero with a Redis store, which has
	// no key budgets (network.go).
	NetworkShare                         int
	NetworkIPv4Prefix, NetworkIPv6Prefix int
}

// DefaultUpstreamTimeout is upstream_timeout's default (docs/policy.md).
const DefaultUpstreamTimeout = 10 * time.Second

// DefaultNode is the Node of a policy without edge { } and store { }.
func DefaultNode() Node {
	return Node{
		Client:              ipv6.New(ipv6.Options{Header: ipv6.XForwardedFor}),
		ForwardedHeader:     "X-Forwarded-For",
		IPv4Prefix:          32,
		IPv6Prefix:          64,
		PathCaseInsensitive: true,
		UpstreamTimeout:     DefaultUpstreamTimeout,
		Keys: StoreKeys{MaxKeys: DefaultMaxKeys, NetworkShare: DefaultNetworkShare,
			NetworkIPv4Prefix: DefaultNetworkIPv4Prefix, NetworkIPv6Prefix: DefaultNetworkIPv6Prefix},
	}
}

// SetNode sets what rules reads of the node's configuration. The feature
// that decodes edge { } and store { } (package node) calls it from their
// Decode, which runs before any other block's (BlockType.First); it
// starts from Policy().Node, the defaults or what an earlier block set.
func (c *Compiler) SetNode(n Node) { c.p.Node = n }

// registry is the features a Load knows, indexed.
type registry struct {
	blocks   map[string][]*BlockType // a shared type has several owners (BlockType.Attrs)
	first    []string                // the BlockType.First types, in feature order
	plain    map[string]*CharacteristicType
	prefixed map[string]*CharacteristicType
	conds    map[string]*ConditionType
	attrs    map[string]*RuleAttrType
	periods  map[string]*PeriodType
	algs     map[string]*AlgorithmType
	algNames []string                  // Feature.Algorithms' names, in feature order
	rblocks  map[string]*RuleBlockType // Feature.RuleBlocks
	ruleDone []func(*Compiler, *Rule)  // Feature.RuleDone, in feature order
	// policyDone are the features' PolicyDone, in feature order.
	policyDone []func(*Compiler)
	errs       []string
}

func newRegistry(features []Feature) *registry {
	g := &registry{
		blocks:   map[string][]*BlockType{},
		plain:    map[string]*CharacteristicType{},
		prefixed: map[string]*CharacteristicType{},
		conds:    map[string]*ConditionType{},
		attrs:    map[string]*RuleAttrType{},
		periods:  map[string]*PeriodType{},
		algs:     map[string]*AlgorithmType{},
		rblocks:  map[string]*RuleBlockType{},
	}
	tags := map[byte]string{}
	for _, f := range features {
		if f.RuleDone != nil {
			g.ruleDone = append(g.ruleDone, f.RuleDone)
		}
		if f.PolicyDone != nil {
			g.policyDone = append(g.policyDone, f.PolicyDone)
		}
		for i := range f.Blocks {
			b := &f.Blocks[i]
			if others, dup := g.blocks[b.Type]; coreBlocks[b.Type] || dup && !shareable(b, others) {
				g.errs = append(g.errs, "block "+b.Type+" registered twice (feature "+f.Name+")")
				continue
			}
			if b.First && g.blocks[b.Type] == nil {
				g.first = append(g.first, b.Type)
			}
			g.blocks[b.Type] = append(g.blocks[b.Type], b)
		}
		for i := range f.Characteristics {
			ct := &f.Characteristics[i]
			m := g.plain
			if ct.Prefixed {
				m = g.prefixed
			}
			if _, dup := m[ct.Name]; dup {
				g.errs = append(g.errs, "characteristic "+ct.Name+" registered twice (feature "+f.Name+")")
				continue
			}
			if other, dup := tags[ct.Tag]; dup || ct.Tag == 0 || ct.Tag > MaxTag {
				g.errs = append(g.errs, "characteristic "+ct.Name+" reuses the key tag of "+other+" or takes one outside 1-31 (feature "+f.Name+")")
				continue
			}
			tags[ct.Tag] = ct.Name
			m[ct.Name] = ct
		}
		for i := range f.Conditions {
			register(g, g.conds, "condition", f.Conditions[i].Name, f.Name, false, &f.Conditions[i])
		}
		for i := range f.RuleAttrs {
			ra := &f.RuleAttrs[i]
			register(g, g.attrs, "rule attribute", ra.Name, f.Name, ruleAttrNames[ra.Name], ra)
		}
		for i := range f.Periods {
			register(g, g.periods, "period", f.Periods[i].Name, f.Name, false, &f.Periods[i])
		}
		for i := range f.Algorithms {
			at := &f.Algorithms[i]
			_, counted := counter.Parse(at.Name)
			if register(g, g.algs, "algorithm", at.Name, f.Name, counted, at) {
				g.algNames = append(g.algNames, at.Name)
			}
		}
		for i := range f.RuleBlocks {
			rb := &f.RuleBlocks[i]
			register(g, g.rblocks, "rule block", rb.Type, f.Name, ruleBlockNames[rb.Type], rb)
		}
	}
	return g
}

// register adds v to m under name, a kind of part of feature, unless m
// has the name already or the core keeps it (reserved): that is a
// conflict, noted in g.errs. It reports whether it added v.
func register[T any](g *registry, m map[string]*T, kind, name, feature string, reserved bool, v *T) bool {
	if _, dup := m[name]; dup || reserved {
		g.errs = append(g.errs, kind+" "+name+" registered twice (feature "+feature+")")
		return false
	}
	m[name] = v
	return true
}

// charNames lists the characteristics the registry knows, prefixed ones
// with their colon, sorted.
func (g *registry) charNames() []string {
	out := make([]string, 0, len(g.plain)+len(g.prefixed))
	for n, ct := range g.plain {
		if !ct.Hidden {
			out = append(out, n)
		}
	}
	for n, ct := range g.prefixed {
		if !ct.Hidden {
			out = append(out, n+":")
		}
	}
	sort.Strings(out)
	return out
}

func (g *registry) condNames() []string {
	out := make([]string, 0, len(g.conds))
	for n, cd := range g.conds {
		if !cd.Hidden {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// shareable reports whether b may join the owners of its block type: all
// list their attributes, none twice, and they agree on labels and
// multiplicity.
func shareable(b *BlockType, owners []*BlockType) bool {
	if len(b.Attrs) == 0 {
		return false
	}
	for _, o := range owners {
		if len(o.Attrs) == 0 || o.Multiple != b.Multiple || len(o.Labels) != len(b.Labels) {
			return false
		}
		for _, a := range b.Attrs {
			for _, x := range o.Attrs {
				if a == x {
					return false
				}
			}
		}
	}
	return true
}

// coreBlocks are the blocks rules decodes itself.
var coreBlocks = map[string]bool{"rule": true}
