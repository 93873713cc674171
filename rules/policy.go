package rules

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/internal/keybudget"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules/counter"
)

// Policy is a compiled, validated policies.hcl. It is immutable once Load
// returns it: a reload builds a new Policy and swaps a pointer, so every
// request sees one policy from start to end.
type Policy struct {
	// Filename is the file the policy was loaded from, as given to Load.
	Filename string

	// Node is what rules reads of the node's own configuration (edge { }
	// and store { }, which package node decodes; extend.go).
	Node

	// Rules in file order; Rule.Index is the position here.
	Rules []*Rule

	// Sensitive reports whether any rule is sensitive.
	Sensitive bool

	// headerNames are the request headers the policy reads (HeaderNames).
	headerNames []string
	// settleHeaders are the response headers the Settlers read
	// (SettleHeaders, stage.go).
	settleHeaders [][]byte
	// blocks are the feature blocks' compiled values, by block type, in
	// file order (Block, Blocks); values the features' values of their
	// own (Value).
	blocks map[string][]any
	values map[string]any
	// conflicts are the identity blocks' on_conflict, by identity
	// (values.go); an identity not in it counts every value.
	conflicts map[string]Conflict
	// slots is the number of memo slots the features use (Compiler.Slot).
	slots int
	// requestHooks run in every request (Compiler.AddRequestHook).
	requestHooks []RequestHook
	// exempters are the skip rules with an Exempter stage, in file order,
	// decided before the others (stage.go).
	exempters []*Rule
	// gates is true when a rule has a Gater stage or the policy a
	// RequestGater (stage.go).
	gates bool
	// holds is set when a rule has a Holder stage (concurrency's leases):
	// only then do the matches' Holders run after the main call.
	holds bool
	// requestGaters and requestSettlers are the request hooks with a part
	// in the gate phase (RequestGater: known { } blocks, a ban of
	// ban_scope = "sensitive") and after the origin's answer
	// (RequestSettler).
	requestGaters   []RequestGater
	requestSettlers []RequestSettler
	// admitters are the request hooks with the gate's last step
	// (Admitter: load shedding).
	admitters  []Admitter
	exemptions Exemptions // a forgive's (Compiler.SetExemptions); nil: none
	// networkShares is true when a rule has a network share
	// (Rule.NetworkKeys): requests then compute their network (network.go).
	networkShares bool
	// budgets are the key budgets of counters that are not a rule's
	// (Compiler.AddKeyBudget).
	budgets []*Budget
}

// Block returns the compiled value of the first block of type typ (a
// feature's BlockType.Decode result), or nil.
func (p *Policy) Block(typ string) any {
	if bs := p.blocks[typ]; len(bs) > 0 {
		return bs[0]
	}
	return nil
}

// Blocks returns the compiled values of every block of type typ, in file
// order. The caller must not modify the slice.
func (p *Policy) Blocks(typ string) []any { return p.blocks[typ] }

// Value returns the value the feature named name kept for the policy
// (Compiler.SetValue), or nil.
func (p *Policy) Value(name string) any { return p.values[name] }

// Budget is the memory-store key budget of counters that belong to a
// feature rather than a rule (Compiler.AddKeyBudget; package
// internal/keybudget).
type Budget = keybudget.Budget

// KeyBudgetUse is one key budget's use in a store that bounds each rule's
// keys (the memory store), for metrics: the gateway exports a store's
// budgets when it has a Budgets() []KeyBudgetUse method (keybudget.Use).
type KeyBudgetUse = keybudget.Use

// Budgets returns the key budgets of the policy's counters that are not a
// rule's. The caller must not modify them.
func (p *Policy) Budgets() []*Budget { return p.budgets }

// HeaderNames returns the names of the request headers the policy reads:
// every rule key's header:NAME and every identity source's header:NAME,
// as written, one per name compared case-insensitively, in policy order;
// nil when the policy reads none. It is computed when the policy is
// compiled; the caller must not modify it. The edge forwards a header the
// policy read only under the spelling it read (docs/host-and-path.md §3).
func (p *Policy) HeaderNames() []string { return p.headerNames }

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
	// ActionSkip counts nothing and refuses nothing: the rule is decided
	// before every other, and the rules its Exempter stages name do not
	// apply to the requests it matches (stage.go; behaviour/skip compiles
	// its skip list).
	ActionSkip
)

// counts reports whether the rule counts requests: not action = "deny"
// (which refuses every match) nor "skip" (which exempts from other rules).
func (r *Rule) counts() bool { return r.Action != ActionDeny && r.Action != ActionSkip }

// Counts reports whether the rule counts requests: its action is neither
// "deny" (which refuses every match) nor "skip" (which exempts from other
// rules). A feature refuses an attribute that needs counting where it does
// not (Uncounted says why).
func (r *Rule) Counts() bool { return r.counts() }

// Uncounted says why a rule of action a, which counts nothing, takes no
// attribute about counting: `action = "deny" refuses every match` or
// `action = "skip" counts nothing`.
func Uncounted(a Action) string { return uncounted(a) }

// uncounted is Uncounted.
func uncounted(a Action) string {
	if a == ActionSkip {
		return `action = "skip" counts nothing`
	}
	return `action = "deny" refuses every match`
}

// StoreErrorMode is a rule's `on_store_error` (counter.StoreErrorMode,
// each op's OnError).
type StoreErrorMode = counter.StoreErrorMode

const (
	// FailOpen allows the request when the store cannot decide.
	FailOpen = counter.FailOpen
	// FailClosed refuses it with 503.
	FailClosed = counter.FailClosed
	// FailLocal decides from a local bucket at limit ÷ fleet_size.
	FailLocal = counter.FailLocal
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
	// DefRange is where the rule is defined, for features' diagnostics.
	DefRange hcl.Range
	// ID is a hash of the name: counters follow a rule across reloads.
	ID [8]byte

	// Route is what the rule matches: its methods, paths and hosts.
	Route route.Matcher

	// Key is the list of characteristics, compiled; KeyNames the same
	// as written ("ip", "json:phone").
	Key      []Characteristic
	KeyNames []string
	keyTags  []byte // each characteristic's tag (CharacteristicType.Tag)
	// keyShared marks the characteristics that may be empty (Shared).
	keyShared []bool
	// ceilingChar is the index in Key of the characteristic with a
	// ceiling (CeilingCharacteristic), or -1.
	ceilingChar int
	// Conditions are the rule's when { } conditions, all of which must
	// hold for the rule to apply.
	Conditions []Condition
	// Hooks run once the origin answered a request the rule counted and
	// allowed (Engine.Settle).
	Hooks []Hook
	// Distinct is count_distinct's characteristic, nil without one: the
	// rule counts distinct values of it per key (Algorithm Distinct).
	Distinct    Characteristic
	distinctTag byte
	// stages are the features' behaviours of the rule (Rule.AddStage);
	// exempters, shapers, gates, judges, settlers and holders those with
	// an Exempt, Shape, Gate, Judge, Settle or in-flight part (stage.go).
	stages    []Stage
	exempters []Exempter
	shapers   []Shaper
	gates     []Gater
	judges    []Judge
	settlers  []Settler
	holders   []Holder
	// local is the stage that makes the rule a node-local limit
	// (LocalLimit: adaptive { }), nil without; expander the one that
	// counts several values of an identity (Expander), nil without.
	local    LocalLimit
	expander Expander

	// Algorithm is the rule's ops' counter algorithm; algorithm is the
	// feature's way of counting on it that the policy names, nil for the
	// counter algorithm itself (AlgorithmType).
	Algorithm Algorithm
	algorithm *AlgorithmType
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
	// IPCeiling is, for rules keyed on a characteristic with a ceiling
	// (visitor), the limit across all its values that share the coarser
	// one (all visitors of one IP) per Period, 0 otherwise; CeilingBurst
	// its bucket size, scaled from the rule's burst.
	IPCeiling, CeilingBurst int64
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
	// NetworkKeys is the most keys of the rule's budget one client network
	// may make in the memory store (Op.NetworkKeys): its network_share (or,
	// when sensitive, the store's) of MaxKeys, rounded down, at least the keys one request
	// makes; 0 for no bound (a share of 100%, a Redis store).
	NetworkKeys int
	// networkShare is the rule's own network_share in parts per million,
	// 0 when it sets none; networkShareRange is where.
	networkShare      int
	networkShareRange *hcl.Range
}

// AlgorithmName returns the rule's algorithm as the policy names it: a
// feature's word (AlgorithmType: "concurrency"), else its Algorithm's
// name. Everything that shows a rule's algorithm uses it.
func (r *Rule) AlgorithmName() string {
	if r.algorithm != nil {
		return r.algorithm.Name
	}
	return r.Algorithm.String()
}

// InFlight reports whether the rule counts the requests in flight rather
// than arrivals over a period: what it charges is held only while a
// request is in flight (a Holder stage: a concurrency rule's lease,
// behaviour/concurrency) or it is a node-local limit (LocalLimit). It is
// no quota over a window, and tells none in RateLimit fields.
func (r *Rule) InFlight() bool { return len(r.holders) > 0 || r.local != nil }

// PeriodUS is the period in microseconds.
func (r *Rule) PeriodUS() int64 { return r.Period.Microseconds() }

// Matches reports whether r applies to req by its methods, paths and
// hosts (Route; not its when { } conditions).
func (r *Rule) Matches(req *Request) bool { return r.matches(req) }

func (r *Rule) matches(req *Request) bool {
	return r.Route.Match(req.Method, req.Overrides, req.Path, req.Host)
}

// ruleID hashes a rule name into the first bytes of its keys.
func ruleID(name string) [8]byte {
	sum := sha256.Sum256([]byte("edge rule\x00" + name))
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], binary.BigEndian.Uint64(sum[:8]))
	return id
}

// BudgetID returns the ID a feature's counters (a Budget's) start with, as a
// rule's start with Rule.ID: name must differ from every rule's, so it
// starts with a NUL ("\x00visitor-mint").
func BudgetID(name string) [8]byte { return ruleID(name) }

// Rule returns the rule named name, or nil.
func (p *Policy) Rule(name string) *Rule {
	for _, r := range p.Rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}
