package rules

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules/counter"
	"github.com/edge-gateway/edge/rules/hclattr"
	"github.com/edge-gateway/edge/rules/hcldecode"
)

// The rule { } block.

// rule compiles one rule block, or returns nil after reporting why not.
// Each step compiles one group of attributes and reads what the steps
// before it set (the action says whether the rule counts, the key and the
// algorithm what its numbers mean, the behaviours a concurrency rule's
// limit, on which the IP ceiling is built), so their order is also the
// order of their diagnostics.
func (c *Compiler) rule(rb *ruleBlock, p *Policy) *Rule {
	errs := c.errorCount()
	r := &Rule{
		DefRange:    rb.DefRange,
		ceilingChar: -1,
		Name:        rb.Name,
		ID:          ruleID(rb.Name),
		Algorithm:   GCRA,
		IPv4Prefix:  p.IPv4Prefix,
		IPv6Prefix:  p.IPv6Prefix,
	}
	if c.blocks == nil {
		c.blocks = map[*Rule]*ruleBlock{}
	}
	c.blocks[r] = rb
	if rb.Name == "" {
		c.Errorf(rb.NameRange, "Invalid rule name", "a rule needs a non-empty name")
	}
	c.cur = rb // Compiler.DecodeInRule
	defer func() { c.cur = nil }()
	x := c.ruleExtras(rb.Remain) // the features' attributes and blocks
	// ok turns false after an error that leaves the rule unusable (each
	// step still runs, for its own diagnostics); the numbers and the IP
	// ceiling are checked against the store's bounds only while it holds.
	ok := c.matcher(rb.Methods, rb.Paths, rb.Hosts, r)
	ok = c.ruleAction(rb, r) && ok
	inKey, keyOK := c.ruleKey(rb, r, c.keyless(x))
	ok = keyOK && ok
	ok = c.countDistinct(rb, r, inKey) && ok
	ok = c.ruleAlgorithm(rb, r) && ok
	ok = c.ruleNumbers(rb, r) && ok
	if ok {
		ok = c.limitsInRange(rb, r)
	}
	ok = c.countMode(rb, r) && ok
	c.behaviours(rb, r, x)
	ok = c.ipCeiling(rb, r) && ok
	if ok {
		ok = c.ceilingInRange(rb, r)
	}
	c.onStoreError(rb, r)
	c.rulePrefixes(rb, r)
	c.maxKeys(rb, r)
	ok = c.ruleNetwork(rb, r) && ok // network.go
	c.identityModes(rb, r)
	if !ok || c.errorsSince(errs) {
		return nil
	}
	return r
}

// ruleAction compiles sensitive, dry_run and action: how the rule treats
// the requests it matches. It reports false after an invalid action.
func (c *Compiler) ruleAction(rb *ruleBlock, r *Rule) bool {
	if rb.Sensitive != nil {
		r.Sensitive = *rb.Sensitive
	}
	if rb.DryRun != nil {
		r.DryRun = *rb.DryRun
	}
	if rb.Action == nil {
		return true
	}
	a, diags := actions.Compile(*rb.Action, rb.ActionRange)
	if !c.Append(diags) {
		return false
	}
	r.Action = a
	return true
}

// actions are the values of action.
var actions = hclattr.Vocabulary[Action]{Attr: "action", What: "an action",
	Words:  []string{"limit", "deny", "log", "skip"},
	Values: []Action{ActionLimit, ActionDeny, ActionLog, ActionSkip}}

// String returns the action as policies.hcl spells it (actions), or
// "unknown".
func (a Action) String() string {
	if i := slices.Index(actions.Values, a); i >= 0 {
		return actions.Words[i]
	}
	return "unknown"
}

// ruleKey compiles key, the characteristics whose values make the
// counter's key, at most one of them a ceiling (CeilingCharacteristic:
// visitor, whose values ip_ceiling holds together per IP). A rule that
// counts needs a key, unless keyless (a feature's block says it needs
// none: RuleBlockType.Keyless). ruleKey returns the names it accepted as
// characteristics, for count_distinct, and reports false after an
// unusable element or a missing key.
func (c *Compiler) ruleKey(rb *ruleBlock, r *Rule, keyless bool) (seen map[string]bool, ok bool) {
	ok = true
	keys, krngs := c.StringList(rb.Key, "key")
	seen = map[string]bool{}
	for i, k := range keys {
		ch, tag, shared := c.characteristic(k, krngs[i], r)
		if ch == nil {
			ok = false
			continue
		}
		if seen[k] {
			c.Errorf(krngs[i], "Duplicate characteristic", "%q appears twice in key", k)
			ok = false
			continue
		}
		seen[k] = true
		if _, ceil := ch.(CeilingCharacteristic); ceil {
			if r.ceilingChar >= 0 {
				c.Errorf(krngs[i], "Two ceilings", "%q and %q both group their values under a ceiling; key a rule on one of them", r.KeyNames[r.ceilingChar], k)
				ok = false
				continue
			}
			r.ceilingChar = len(r.Key)
		}
		r.Key = append(r.Key, ch)
		r.KeyNames = append(r.KeyNames, k)
		r.keyTags = append(r.keyTags, tag)
		r.keyShared = append(r.keyShared, shared)
	}
	if r.counts() && len(r.Key) == 0 && (rb.Key == nil || IsNull(rb.Key)) && !keyless {
		c.Errorf(rb.DefRange, "Missing key", "rule %q needs key = [...], such as [\"ip\"] (or [\"global\"] for one counter shared by all)", rb.Name)
		ok = false
	}
	return seen, ok
}

// countDistinct compiles count_distinct: the rule counts the distinct
// values of a characteristic per key (the Distinct algorithm, over a
// sliding period), one not in the key (inKey, from ruleKey), and takes no
// algorithm. It reports false after an unusable count_distinct.
func (c *Compiler) countDistinct(rb *ruleBlock, r *Rule, inKey map[string]bool) bool {
	if rb.CountDistinct == nil {
		return true
	}
	ok := true
	ch, tag, _ := c.characteristic(*rb.CountDistinct, rb.CountDistinctRange, r)
	switch {
	case ch == nil:
		ok = false
	case !r.counts():
		c.Errorf(rb.CountDistinctRange, "count_distinct not used", "action = %q counts nothing; remove count_distinct", *rb.Action)
		ok = false
	case inKey[*rb.CountDistinct]:
		c.Errorf(rb.CountDistinctRange, "Invalid count_distinct", "%q is in the key too: each key would see one value", *rb.CountDistinct)
		ok = false
	default:
		r.Distinct, r.distinctTag, r.Algorithm = ch, tag, Distinct
	}
	if rb.Algorithm != nil && c.reg.algs[*rb.Algorithm] == nil { // a feature's algorithm refuses count_distinct itself
		c.Errorf(rb.AlgorithmRange, "Algorithm not used", "a count_distinct rule counts distinct values over a sliding period; remove algorithm")
		ok = false
	}
	return ok
}

// ruleAlgorithm compiles algorithm (default gcra; a count_distinct rule's
// is left to countDistinct): a counter algorithm, or a word a feature
// names (AlgorithmType: behaviour/concurrency's "concurrency"), which
// compiles the rule's numbers itself. It reports false after an unknown
// algorithm.
func (c *Compiler) ruleAlgorithm(rb *ruleBlock, r *Rule) bool {
	switch {
	case rb.Algorithm == nil:
	case c.reg.algs[*rb.Algorithm] != nil:
		r.algorithm = c.reg.algs[*rb.Algorithm]
		r.Algorithm = r.algorithm.Compile(c, r, rb.AlgorithmRange)
	case rb.CountDistinct == nil:
		a, ok := counter.Parse(*rb.Algorithm)
		if !ok {
			names := append(counter.PolicyNames(), c.reg.algNames...)
			c.Errorf(rb.AlgorithmRange, "Unknown algorithm", "%q is not an algorithm; want one of %s.%s", *rb.Algorithm, strings.Join(names, ", "), hclattr.Suggest(*rb.Algorithm, names))
		}
		r.Algorithm = a
		return ok
	}
	return true
}

// ruleNumbers compiles the limit, period and burst (default limit) of a
// rule that counts, and refuses a limit on one that counts nothing; those
// of a feature's algorithm are the feature's (AlgorithmType). It reports
// false after a number that is missing, invalid or not used.
func (c *Compiler) ruleNumbers(rb *ruleBlock, r *Rule) bool {
	switch {
	case r.algorithm != nil:
		return true
	case !r.counts():
		if rb.Limit != nil {
			c.Errorf(rb.LimitRange, "Limit not used", "%s; remove limit", uncounted(r.Action))
			return false
		}
		return true
	}
	ok := true
	fail := func(rng hcl.Range, summary, format string, args ...any) {
		c.Errorf(rng, summary, format, args...)
		ok = false
	}
	if rb.Limit == nil {
		fail(rb.DefRange, "Missing limit", "rule %q needs limit (requests per period)", rb.Name)
	} else if *rb.Limit < 1 {
		fail(rb.LimitRange, "Invalid limit", "limit must be at least 1, got %d", *rb.Limit)
	} else {
		r.Limit = *rb.Limit
	}
	ok = c.rulePeriod(rb, r) && ok
	r.Burst = r.Limit
	if rb.Burst != nil {
		switch {
		case *rb.Burst < 1:
			fail(rb.BurstRange, "Invalid burst", "burst must be at least 1, got %d", *rb.Burst)
		case !r.Algorithm.Spec().Burst:
			fail(rb.BurstRange, "Burst not used", "burst applies to %s, not %s", counter.BurstNames(), r.Algorithm)
		default:
			r.Burst = *rb.Burst
		}
	}
	return ok
}

// rulePeriod compiles the period of a rule that counts: a duration in
// whole microseconds, or a word a feature names (PeriodType: calendar's
// "day", "week", "month"). It reports false after a period that is
// missing or invalid.
func (c *Compiler) rulePeriod(rb *ruleBlock, r *Rule) bool {
	if rb.Period == nil {
		c.Errorf(rb.DefRange, "Missing period", "rule %q needs period, a duration such as \"1m\" or \"1d\"", rb.Name)
		return false
	}
	if pt, ok := c.reg.periods[*rb.Period]; ok {
		r.Period = pt.Compile(c, r, rb.PeriodRange)
		return r.Period > 0
	}
	d, err := ParseDuration(*rb.Period)
	switch {
	case err != nil:
		c.Errorf(rb.PeriodRange, "Invalid period", "%q is not a duration; write it like \"30s\", \"15m\", \"1h\" or \"1d\"", *rb.Period)
	case d <= 0:
		c.Errorf(rb.PeriodRange, "Invalid period", "period must be positive, got %q", *rb.Period)
	case d%time.Microsecond != 0:
		c.Errorf(rb.PeriodRange, "Invalid period", "%q: periods are counted in whole microseconds", *rb.Period)
	default:
		r.Period = d
		return true
	}
	return false
}

// limitsInRange checks the sound numbers of a rule that counts against
// what its algorithm can count (ValidateLimits), an emission interval of
// at least 1µs first. It reports false after either diagnostic.
func (c *Compiler) limitsInRange(rb *ruleBlock, r *Rule) bool {
	if !r.counts() || r.algorithm != nil || r.Limit <= 0 || r.Period <= 0 {
		return true
	}
	if r.PeriodUS()/r.Limit < 1 {
		c.Errorf(rb.LimitRange, "Limit too fine", "%d per %s is an emission interval under 1µs; raise the period or lower the limit", r.Limit, r.Period)
		return false
	}
	if err := counter.ValidateLimits(r.Algorithm, r.Limit, r.Burst, r.PeriodUS()); err != nil {
		c.Errorf(rb.LimitRange, "Limit out of range", "%v", err)
		return false
	}
	return true
}

// countMode compiles count, failure_status (default 401, 403),
// success_status (default 200, 201, 204) and reset_on_success, whose
// hooks behaviour/answer adds. It reports false after a count that is
// invalid or not used.
func (c *Compiler) countMode(rb *ruleBlock, r *Rule) bool {
	ok := true
	if rb.Count != nil {
		if m, diags := countModes.Compile(*rb.Count, rb.CountRange); c.Append(diags) {
			r.Count = m
		} else {
			ok = false
		}
	}
	r.FailureStatus = c.IntList(rb.FailureStatus, "failure_status")
	if r.FailureStatus == nil {
		r.FailureStatus = []int{401, 403}
	}
	r.SuccessStatus = c.IntList(rb.SuccessStatus, "success_status")
	if r.SuccessStatus == nil {
		r.SuccessStatus = []int{200, 201, 204}
	}
	if rb.ResetOnSuccess != nil && *rb.ResetOnSuccess {
		r.ResetOnSuccess = true
	}
	switch {
	case r.Count == CountFailures && !r.counts():
		c.Errorf(rb.CountRange, "count not used", "action = %q counts nothing; remove count", *rb.Action)
		ok = false
	}
	return ok
}

// countModes are the values of count.
var countModes = hclattr.Vocabulary[CountMode]{Attr: "count", What: "a count mode",
	Words:  []string{"requests", "attempts", "failures"},
	Values: []CountMode{CountRequests, CountAttempts, CountFailures}}

// behaviours compiles what a rule does beside counting, once its key,
// numbers and count mode are compiled. The order is kept: it is the order
// of their diagnostics and of r.Hooks, and each step may read what the
// ones before set. The features' attributes and blocks (x: ruleAttrs)
// come after when { }, then what checks them together (Feature.RuleDone:
// the refusal, cost, the queue and max_delay, known_visitors and known_by,
// the ban, whose Judge so comes after max_delay's, and last a concurrency
// rule's limit and lease, on which the IP ceiling is built).
func (c *Compiler) behaviours(rb *ruleBlock, r *Rule, x *hcl.BodyContent) {
	if w := rb.When; w != nil {
		c.when(w, r)
	}
	c.ruleAttrs(x, r)
	for _, done := range c.reg.ruleDone {
		done(c, r) // Feature.RuleDone: refusal's content type, cost, queue's max_delay, known_visitors, the ban, a concurrency limit
	}
}

// ipCeiling compiles ip_ceiling. Every rule keyed on visitor (a
// CeilingCharacteristic) with a limit holds all visitors of one IP to a
// ceiling, so stockpiled IDs cannot multiply a client's budget (default
// 10 × limit, docs/policy.md), with a burst in the rule's ratio of burst
// to limit. It reports false after an ip_ceiling below the limit or on a
// rule not keyed on visitor.
func (c *Compiler) ipCeiling(rb *ruleBlock, r *Rule) bool {
	if r.ceilingChar < 0 {
		if rb.IPCeiling != nil {
			c.Errorf(rb.IPCeilingRange, "ip_ceiling without visitor", "ip_ceiling applies to rules keyed on \"visitor\"")
			return false
		}
		return true
	}
	if r.Limit <= 0 {
		return true // a visitor rule whose limit is invalid has its own diagnostic
	}
	ok := true
	r.IPCeiling = 10 * r.Limit
	if rb.IPCeiling != nil {
		r.IPCeiling = *rb.IPCeiling
		if r.IPCeiling < r.Limit {
			c.Errorf(rb.IPCeilingRange, "Invalid ip_ceiling", "ip_ceiling %d is below the rule's limit %d: one visitor alone would hit it", r.IPCeiling, r.Limit)
			ok = false
		}
	}
	r.CeilingBurst = ceilDiv(r.IPCeiling*r.Burst, r.Limit)
	return ok
}

// ceilDiv returns ⌈a/b⌉ for b > 0, and 0 for a ≤ 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// ceilingInRange checks a sound IP ceiling against what the rule's
// algorithm can count (ValidateLimits), reported at ip_ceiling or, for
// the default ceiling, at limit. It reports false after the diagnostic.
func (c *Compiler) ceilingInRange(rb *ruleBlock, r *Rule) bool {
	if r.ceilingChar < 0 || r.Limit <= 0 || r.Period <= 0 {
		return true
	}
	if err := counter.ValidateLimits(r.Algorithm, r.IPCeiling, r.CeilingBurst, r.PeriodUS()); err != nil {
		rng := rb.IPCeilingRange
		if rb.IPCeiling == nil {
			rng = rb.LimitRange // the default ceiling, 10 × limit
		}
		c.Errorf(rng, "ip_ceiling out of range", "the IP ceiling of %d: %v", r.IPCeiling, err)
		return false
	}
	return true
}

// onStoreError compiles on_store_error, what the rule answers when its
// store cannot: "deny" by default on a sensitive rule, else "allow"
// (docs/policy.md, "on_store_error").
func (c *Compiler) onStoreError(rb *ruleBlock, r *Rule) {
	r.OnStoreError = FailOpen
	if r.Sensitive {
		r.OnStoreError = FailClosed
	}
	if rb.OnStoreError == nil {
		return
	}
	if m, ok := storeErrorModes[*rb.OnStoreError]; ok {
		r.OnStoreError = m
		return
	}
	c.Errorf(rb.OnStoreErrorRange, "Invalid on_store_error", "%q is not a failure mode; want \"deny\", \"allow\" or \"local\"", *rb.OnStoreError)
}

// storeErrorModes are the values of on_store_error.
var storeErrorModes = map[string]StoreErrorMode{"allow": FailOpen, "deny": FailClosed, "local": FailLocal}

// rulePrefixes compiles ipv4_prefix and ipv6_prefix, the rule's grouping
// of ip and visitor (default the edge block's).
func (c *Compiler) rulePrefixes(rb *ruleBlock, r *Rule) {
	if rb.IPv4Prefix != nil {
		r.IPv4Prefix = c.PrefixLen(*rb.IPv4Prefix, 32, rb.IPv4PrefixRange, "ipv4_prefix")
	}
	if rb.IPv6Prefix != nil {
		r.IPv6Prefix = c.PrefixLen(*rb.IPv6Prefix, 128, rb.IPv6PrefixRange, "ipv6_prefix")
	}
}

// maxKeys compiles max_keys, the rule's own key budget in the memory store
// (without it, keyBudgets gives the rule a share of the store's).
func (c *Compiler) maxKeys(rb *ruleBlock, r *Rule) {
	if rb.MaxKeys == nil {
		return
	}
	switch {
	case !r.counts():
		c.Errorf(rb.MaxKeysRange, "Unused max_keys", "action = %q counts nothing, so it holds no keys; remove max_keys", *rb.Action)
	case *rb.MaxKeys < 1 || *rb.MaxKeys > MaxKeysLimit:
		c.Errorf(rb.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", MaxKeysLimit, *rb.MaxKeys)
	default:
		r.MaxKeys, r.maxKeysSet = *rb.MaxKeys, true
	}
}

// identityModes compiles missing_identity, what the rule does with a
// request that lacks a key's value ("skip" by default, "reject" on a
// sensitive rule), and invalid_identity, with one whose value is invalid
// ("reject" by default).
func (c *Compiler) identityModes(rb *ruleBlock, r *Rule) {
	r.MissingIdentity = IdentitySkip
	if r.Sensitive {
		r.MissingIdentity = IdentityReject
	}
	r.InvalidIdentity = IdentityReject
	if rb.MissingIdentity != nil {
		r.MissingIdentity = c.identityMode(*rb.MissingIdentity, rb.MissingIdentityRange, "missing_identity")
	}
	if rb.InvalidIdentity != nil {
		r.InvalidIdentity = c.identityMode(*rb.InvalidIdentity, rb.InvalidIdentityRange, "invalid_identity")
	}
}

// BlockRule returns a Rule that is not one of the policy's, for a
// feature's block that matches requests as a rule does (known { }): name,
// id and def are its Name, ID and DefRange, methods, paths and hosts are
// compiled as a rule's (their errors reported alike), and it groups
// addresses by the policy's default prefixes, for the characteristics
// compiled for it (Compiler.Characteristic). Rule.Matches reports whether
// it applies to a request.
func (c *Compiler) BlockRule(name string, id [8]byte, def hcl.Range, methods, paths, hosts hcl.Expression) *Rule {
	r := &Rule{Name: name, ID: id, DefRange: def, ceilingChar: -1, IPv4Prefix: c.p.IPv4Prefix, IPv6Prefix: c.p.IPv6Prefix}
	c.matcher(methods, paths, hosts, r)
	return r
}

// matcher compiles what a rule (or a feature's block, BlockRule) matches
// into r.Route (route.Compile: its methods, paths and hosts), recording
// the diagnostics. It reports false after an error that makes the matcher
// unusable.
func (c *Compiler) matcher(methods, paths, hosts hcl.Expression, r *Rule) bool {
	m, diags, ok := route.Compile(methods, paths, hosts, c.p.PathCaseInsensitive)
	r.Route = m
	c.Append(diags)
	return ok
}

func (c *Compiler) identityMode(s string, rng hcl.Range, attr string) IdentityMode {
	switch s {
	case "skip":
		return IdentitySkip
	case "reject":
		return IdentityReject
	}
	c.Errorf(rng, "Invalid "+attr, "%q is not \"reject\" or \"skip\"", s)
	return IdentityReject
}

// Characteristic compiles name, written at rng, as a characteristic of r
// (a rule's, or a feature block's: BlockRule) beside its key, such as
// known_by's and ban_by's: a plain name ("phone") or a prefixed one
// ("json:user.phone"), by the feature that registered it. It returns the
// characteristic, its tag (CharacteristicType.Tag) and whether it is the
// same for every request (Shared: global), or nil after reporting why not.
func (c *Compiler) Characteristic(name string, rng hcl.Range, r *Rule) (ch Characteristic, tag byte, shared bool) {
	return c.characteristic(name, rng, r)
}

// characteristic compiles one key element: a plain name ("phone") or a
// prefixed one ("json:user.phone"), by the feature that registered it. It
// returns nil after reporting why not.
func (c *Compiler) characteristic(s string, rng hcl.Range, r *Rule) (Characteristic, byte, bool) {
	if ct, ok := c.reg.plain[s]; ok {
		return ct.Compile(c, r, "", rng), ct.Tag, ct.Shared
	}
	if pre, name, found := strings.Cut(s, ":"); found {
		if ct, ok := c.reg.prefixed[pre]; ok {
			if name == "" || len(name) > 256 || strings.ContainsAny(name, " \t\r\n") {
				c.Errorf(rng, "Invalid characteristic", "%q needs a name after %q, such as %q", s, pre+":", ct.Example)
				return nil, 0, false
			}
			return ct.Compile(c, r, name, rng), ct.Tag, ct.Shared
		}
	}
	names := c.reg.charNames()
	c.Errorf(rng, "Unknown characteristic", "%q is not a characteristic; want one of %s.%s", s, strings.Join(names, ", "), hclattr.Suggest(s, names))
	return nil, 0, false
}

// HasCharacteristic reports whether the features Load was given resolve
// the plain characteristic name.
func (c *Compiler) HasCharacteristic(name string) bool {
	_, ok := c.reg.plain[name]
	return ok
}

// when compiles a rule's when { } block: each attribute is a feature's
// condition, compiled in the order written.
func (c *Compiler) when(w *whenBlock, r *Rule) {
	attrs, diags := w.Body.JustAttributes()
	c.diags = append(c.diags, diags...)
	items, _ := hcldecode.InOrder(&hcl.BodyContent{Attributes: attrs}, nil)
	for _, it := range items {
		a := it.Attr
		ct, ok := c.reg.conds[a.Name]
		if !ok {
			names := c.reg.condNames()
			c.Errorf(a.NameRange, "Unknown condition", "%q is not a condition; want one of %s.%s", a.Name, strings.Join(names, ", "), hclattr.Suggest(a.Name, names))
			continue
		}
		if cond := ct.Compile(c, r, a); cond != nil {
			r.Conditions = append(r.Conditions, cond)
		}
	}
}

// ruleExtras decodes the attributes and blocks of a rule block that are
// not rules' own: each must be a feature's (RuleAttrType, RuleBlockType),
// or it is an error as HCL reports any item a schema does not expect. It
// returns nil for a body that has none.
func (c *Compiler) ruleExtras(body hcl.Body) *hcl.BodyContent {
	if body == nil {
		return nil
	}
	schema := &hcl.BodySchema{}
	for _, n := range c.ruleAttrNames() {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: n})
	}
	blocks := []string{"when"} // a rule's own, outside body
	for n := range c.reg.rblocks {
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: n})
		blocks = append(blocks, n)
	}
	sort.Strings(blocks)
	content, diags := body.Content(schema)
	// HCL suggests among the schema's names, the features' alone:
	// suggest among every attribute and block a rule takes.
	all := append(c.ruleAttrNames(), ownAttrs...)
	sort.Strings(all)
	for i, d := range diags {
		if c.leftOut(body, d) {
			c.decoded(diags[i : i+1])
			continue
		}
		c.diags = append(c.diags, d)
		hclattr.Unsupported(d, all, blocks)
	}
	return content
}

// leftOut reports whether d, an error of a rule block's body, is at a
// block of a feature's type (adaptive "x" { }: labels it does not take),
// which is then left out as Decode leaves out a rule's own item in error.
func (c *Compiler) leftOut(body hcl.Body, d *hcl.Diagnostic) bool {
	sb, ok := body.(*hclsyntax.Body)
	if d.Severity != hcl.DiagError || d.Subject == nil || !ok {
		return false
	}
	name, header := hcldecode.ItemAt(sb, d.Subject.Start.Byte)
	if header == nil || c.reg.rblocks[name] == nil {
		return false
	}
	c.leaveOut(c.cur, name, *d.Subject)
	return true
}

// keyless reports whether x holds a feature's block that makes its rule
// need no key (RuleBlockType.Keyless).
func (c *Compiler) keyless(x *hcl.BodyContent) bool {
	if x == nil {
		return false
	}
	for _, b := range x.Blocks {
		if c.reg.rblocks[b.Type].Keyless {
			return true
		}
	}
	return false
}

// ruleAttrs compiles x, the features' attributes and blocks of rule r
// (ruleExtras), in the order written. A second block of a type that is not
// Multiple is an error, as gohcl reports one, and is not compiled.
func (c *Compiler) ruleAttrs(x *hcl.BodyContent, r *Rule) {
	if x == nil {
		return
	}
	items, diags := hcldecode.InOrder(x, func(typ string) bool { return c.reg.rblocks[typ].Multiple })
	c.diags = append(c.diags, diags...)
	for _, it := range items {
		if it.Attr != nil {
			c.reg.attrs[it.Attr.Name].Compile(c, r, it.Attr)
		} else {
			c.reg.rblocks[it.Block.Type].Compile(c, r, it.Block)
		}
	}
}

// ruleAttrNames lists the attributes features add to rule blocks, sorted.
func (c *Compiler) ruleAttrNames() []string {
	out := make([]string, 0, len(c.reg.attrs))
	for n := range c.reg.attrs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ruleBlockNames are the blocks inside rule blocks rules decodes itself,
// which no feature may register.
var ruleBlockNames = map[string]bool{"when": true}

// ruleAttrNames are the attributes of rule blocks rules decodes itself,
// which no feature may register; ownAttrs the same, sorted.
var ruleAttrNames, ownAttrs = func() (map[string]bool, []string) {
	schema, _ := gohcl.ImpliedBodySchema(&ruleBlock{})
	m := map[string]bool{}
	var names []string
	for _, a := range schema.Attributes {
		m[a.Name] = true
		names = append(names, a.Name)
	}
	return m, names
}()

// errorCount is the number of errors so far; errorsSince reports whether
// there are more now.
func (c *Compiler) errorCount() int {
	n := 0
	for _, d := range c.diags {
		if d.Severity == hcl.DiagError {
			n++
		}
	}
	return n
}

func (c *Compiler) errorsSince(n int) bool { return c.errorCount() > n }

// ErrorCount returns the number of errors reported so far: a feature that
// compares it before and after a step knows whether the step failed.
func (c *Compiler) ErrorCount() int { return c.errorCount() }
