package rules

import (
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/internal/httpsyntax"
	"github.com/edge-gateway/edge/route"
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
	if rb.Name == "" {
		c.Errorf(rb.NameRange, "Invalid rule name", "a rule needs a non-empty name")
	}
	// ok turns false after an error that leaves the rule unusable (each
	// step still runs, for its own diagnostics); the numbers and the IP
	// ceiling are checked against the store's bounds only while it holds.
	ok := c.matcher(rb.Methods, rb.Paths, rb.Hosts, r)
	ok = c.ruleAction(rb, r) && ok
	c.skipAttr(rb, r) // skip = [...] (skip.go)
	inKey, keyOK := c.ruleKey(rb, r)
	ok = keyOK && ok
	ok = c.countDistinct(rb, r, inKey) && ok
	c.multiValues(rb, r) // identities with several values (values.go)
	ok = c.ruleAlgorithm(rb, r) && ok
	ok = c.ruleNumbers(rb, r) && ok
	if ok {
		ok = c.limitsInRange(rb, r)
	}
	ok = c.countMode(rb, r) && ok
	c.behaviours(rb, r)
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
	a, ok := actions.compile(c, *rb.Action, rb.ActionRange)
	if !ok {
		return false
	}
	r.Action = a
	return true
}

// actions are the values of action.
var actions = vocabulary[Action]{attr: "action", what: "an action",
	words:  []string{"limit", "deny", "log", "skip"},
	values: []Action{ActionLimit, ActionDeny, ActionLog, ActionSkip}}

// ruleKey compiles key, the characteristics whose values make the
// counter's key, at most one of them a ceiling (CeilingCharacteristic:
// visitor, whose values ip_ceiling holds together per IP). A rule that
// counts needs a key, unless it is adaptive. ruleKey returns the names it
// accepted as characteristics, for count_distinct, and reports false
// after an unusable element or a missing key.
func (c *Compiler) ruleKey(rb *ruleBlock, r *Rule) (seen map[string]bool, ok bool) {
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
	if r.counts() && len(r.Key) == 0 && (rb.Key == nil || IsNull(rb.Key)) && rb.Adaptive == nil {
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
	if rb.Algorithm != nil && *rb.Algorithm != ConcurrencyAlgorithm { // concurrencyAttrs refuses count_distinct there
		c.Errorf(rb.AlgorithmRange, "Algorithm not used", "a count_distinct rule counts distinct values over a sliding period; remove algorithm")
		ok = false
	}
	return ok
}

// ruleAlgorithm compiles algorithm (default gcra; a count_distinct rule's
// is left to countDistinct). A concurrency rule counts requests in flight:
// a Distinct set of lease IDs (concurrency.go), whose limit and lease
// finishConcurrency compiles. It reports false after an unknown algorithm.
func (c *Compiler) ruleAlgorithm(rb *ruleBlock, r *Rule) bool {
	switch {
	case rb.Algorithm == nil:
	case *rb.Algorithm == ConcurrencyAlgorithm:
		r.Concurrency, r.Algorithm = true, Distinct
		c.concurrencyAttrs(rb, r)
	case rb.CountDistinct == nil:
		a, ok := ParseAlgorithm(*rb.Algorithm)
		if !ok {
			c.Errorf(rb.AlgorithmRange, "Unknown algorithm", "%q is not an algorithm; want one of %s.%s", *rb.Algorithm, strings.Join(algorithmNamesList(), ", "), suggest(*rb.Algorithm, algorithmNamesList()))
		}
		r.Algorithm = a
		return ok
	}
	return true
}

// ruleNumbers compiles the limit, period and burst (default limit) of a
// rule that counts, and refuses a limit on one that counts nothing; a
// concurrency rule's limit is finishConcurrency's. It reports false after
// a number that is missing, invalid or not used.
func (c *Compiler) ruleNumbers(rb *ruleBlock, r *Rule) bool {
	switch {
	case r.Concurrency:
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
		case r.Algorithm != GCRA && r.Algorithm != TokenBucket && r.Algorithm != LeakyBucket:
			fail(rb.BurstRange, "Burst not used", "burst applies to gcra, token_bucket and leaky_bucket, not %s", r.Algorithm)
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
	if !r.counts() || r.Concurrency || r.Limit <= 0 || r.Period <= 0 {
		return true
	}
	if r.PeriodUS()/r.Limit < 1 {
		c.Errorf(rb.LimitRange, "Limit too fine", "%d per %s is an emission interval under 1µs; raise the period or lower the limit", r.Limit, r.Period)
		return false
	}
	if err := ValidateLimits(r.Algorithm, r.Limit, r.Burst, r.PeriodUS()); err != nil {
		c.Errorf(rb.LimitRange, "Limit out of range", "%v", err)
		return false
	}
	return true
}

// countMode compiles count, failure_status (default 401, 403),
// success_status (default 200, 201, 204) and reset_on_success, and adds
// the hook that learns from the origin's answer: a failures rule's
// (countFailures), or else reset_on_success's. It reports false after a
// count that is invalid or not used.
func (c *Compiler) countMode(rb *ruleBlock, r *Rule) bool {
	ok := true
	if rb.Count != nil {
		if m, mok := countModes.compile(c, *rb.Count, rb.CountRange); mok {
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
	case r.Count == CountFailures:
		r.Hooks = append(r.Hooks, countFailures{failure: r.FailureStatus, success: r.SuccessStatus, reset: r.ResetOnSuccess})
	case r.ResetOnSuccess:
		r.Hooks = append(r.Hooks, resetOnSuccess{success: r.SuccessStatus})
	}
	return ok
}

// countModes are the values of count.
var countModes = vocabulary[CountMode]{attr: "count", what: "a count mode",
	words:  []string{"requests", "attempts", "failures"},
	values: []CountMode{CountRequests, CountAttempts, CountFailures}}

// behaviours compiles what a rule does beside counting, once its key,
// numbers and count mode are compiled. The order is kept: it is the order
// of their diagnostics and of r.Hooks, and each step may read what the
// ones before set. Known visitors and cost read the count mode and the
// statuses; adaptive { } comes before the features' attributes
// (ruleAttrs), so that they see Rule.Adaptive (a ban refuses an adaptive
// rule), and before finishConcurrency, which leaves an adaptive rule to
// it and otherwise compiles a concurrency rule's limit and lease; the
// refusal, the queue, max_delay and the ban are checked once the
// features' attributes are compiled (Feature.RuleDone).
func (c *Compiler) behaviours(rb *ruleBlock, r *Rule) {
	if !r.Concurrency { // concurrencyAttrs refuses these there
		c.knownVisitors(rb, r)
		c.compileCost(rb, r) // cost, max_cost, settle_from (cost.go)
	}
	c.exemptKnown(rb, r) // exempt_known (compile_known.go)
	if w := rb.When; w != nil {
		c.when(w, r)
	}
	c.compileAdaptive(rb, r) // adaptive { } (compile_adaptive.go)
	c.ruleAttrs(rb.Remain, r)
	for _, done := range c.reg.ruleDone {
		done(c, r) // Feature.RuleDone: refusal's content type, queue's max_delay, the ban
	}
	c.finishConcurrency(rb, r) // limit, lease (concurrency.go)
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

// ceilingInRange checks a sound IP ceiling against what the rule's
// algorithm can count (ValidateLimits), reported at ip_ceiling or, for
// the default ceiling, at limit. It reports false after the diagnostic.
func (c *Compiler) ceilingInRange(rb *ruleBlock, r *Rule) bool {
	if r.ceilingChar < 0 || r.Limit <= 0 || r.Period <= 0 {
		return true
	}
	if err := ValidateLimits(r.Algorithm, r.IPCeiling, r.CeilingBurst, r.PeriodUS()); err != nil {
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

// matcher compiles what a rule (or a known block) matches: its methods,
// paths and hosts (docs/policy.md, "Matching"). It reports false after an
// error that makes the matcher unusable.
func (c *Compiler) matcher(methodsExpr, pathsExpr, hostsExpr hcl.Expression, r *Rule) (ok bool) {
	ok = true
	methods, mrngs := c.StringList(methodsExpr, "methods")
	for i, m := range methods {
		u := strings.ToUpper(m)
		switch {
		case !httpsyntax.IsToken(u):
			c.Errorf(mrngs[i], "Invalid method", "%q is not an HTTP method", m)
			ok = false
			continue
		case !knownMethods[u]:
			c.Warnf(mrngs[i], "Unusual method", "%q is not a standard HTTP method.%s", m, suggest(u, knownMethodList))
		}
		r.methods = append(r.methods, u)
	}
	paths, prngs := c.StringList(pathsExpr, "paths")
	if pathsExpr == nil || IsNull(pathsExpr) {
		r.anyPath = true
	}
	for i, s := range paths {
		if !strings.HasPrefix(s, "/") {
			c.Errorf(prngs[i], "Invalid path", "%q must start with \"/\"", s)
			ok = false
			continue
		}
		pre, star := strings.CutSuffix(s, "*")
		if strings.Contains(pre, "*") {
			c.Errorf(prngs[i], "Invalid path", "%q: \"*\" is allowed only at the end, as in \"/api/*\"", s)
			ok = false
			continue
		}
		canon, cok := route.AppendCanonicalPath(nil, []byte(pre))
		if !cok {
			c.Errorf(prngs[i], "Invalid path", "%q is not a valid path", s)
			ok = false
			continue
		}
		m := string(route.AppendMatchPath(nil, canon, c.p.PathCaseInsensitive))
		switch {
		case star && m == "/":
			r.anyPath = true
		case star:
			r.prefixes = append(r.prefixes, m+"/")
		default:
			r.exact = append(r.exact, m)
		}
	}
	hosts, hostRngs := c.StringList(hostsExpr, "hosts")
	for i, h := range hosts {
		// The request's host goes through AppendHost too: one spelling on
		// both sides (docs/host-and-path.md §1).
		s := strings.TrimSpace(h)
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() && a.Zone() == "" {
			s = "[" + s + "]" // a bare IPv6 address, which Host never spells
		}
		_, name, hok := route.AppendHost(nil, nil, []byte(s))
		if !hok {
			c.Errorf(hostRngs[i], "Invalid host", "%q is not a host name (letters, digits, '-', '_' and dots), an IPv4 address or a bracketed IPv6 address, optionally with a port; the edge refuses requests naming such a host, so the rule could never match", h)
			continue
		}
		r.hosts = append(r.hosts, string(name))
	}
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
	c.Errorf(rng, "Unknown characteristic", "%q is not a characteristic; want one of %s.%s", s, strings.Join(names, ", "), suggest(s, names))
	return nil, 0, false
}

// Characteristic compiles the characteristic named s (a plain name or a
// prefixed NAME:ARG, as in key = [...]) for a feature's attribute of rule
// r that lists characteristics (ban_by), written at rng: it returns the
// compiled characteristic, its key tag and whether it is the same for
// every request (CharacteristicType.Shared), or nil after reporting why
// not (an unknown name, with the names there are).
func (c *Compiler) Characteristic(s string, rng hcl.Range, r *Rule) (ch Characteristic, tag byte, shared bool) {
	return c.characteristic(s, rng, r)
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
	list := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Range.Start.Byte < list[j].Range.Start.Byte })
	for _, a := range list {
		ct, ok := c.reg.conds[a.Name]
		if !ok {
			names := c.reg.condNames()
			c.Errorf(a.NameRange, "Unknown condition", "%q is not a condition; want one of %s.%s", a.Name, strings.Join(names, ", "), suggest(a.Name, names))
			continue
		}
		if cond := ct.Compile(c, r, a); cond != nil {
			r.Conditions = append(r.Conditions, cond)
		}
	}
}

// MaxKnownVisitors bounds known_visitors: a marker outlives no year.
const MaxKnownVisitors = 366 * 24 * time.Hour

// knownVisitors compiles known_visitors and known_by (known.go).
func (c *Compiler) knownVisitors(rb *ruleBlock, r *Rule) {
	if rb.KnownVisitors == nil {
		if !IsNull(rb.KnownBy) {
			c.Errorf(rb.KnownBy.Range(), "known_by without known_visitors", "known_by names what recognises a known visitor; set known_visitors, such as \"30d\", too")
		}
		return
	}
	d, err := ParseDuration(*rb.KnownVisitors)
	switch {
	case err != nil || d <= 0 || d%time.Microsecond != 0:
		c.Errorf(rb.KnownVisitorsRange, "Invalid known_visitors", "%q is not a positive duration such as \"30d\"", *rb.KnownVisitors)
		return
	case d > MaxKnownVisitors:
		c.Errorf(rb.KnownVisitorsRange, "known_visitors too long", "%q: a visitor is known for at most %s after its last success", *rb.KnownVisitors, "366d")
		return
	case r.Count != CountFailures:
		c.Errorf(rb.KnownVisitorsRange, "known_visitors needs count = \"failures\"", "a visitor becomes known by logging in successfully, which only a rule counting failures learns from the origin's answer")
		return
	}
	names, rngs := c.StringList(rb.KnownBy, "known_by")
	if len(names) == 0 {
		c.Errorf(rb.KnownVisitorsRange, "Missing known_by", "known_visitors needs known_by, the characteristics that recognise a visitor, such as [\"visitor\"] (its signed visitor ID, or its IP without one) or [\"ip\"]")
		return
	}
	for i, n := range names {
		ch, tag, _ := c.characteristic(n, rngs[i], r)
		if ch == nil {
			return
		}
		r.knownBy, r.knownTags = append(r.knownBy, ch), append(r.knownTags, tag)
	}
	r.knownUS = d.Microseconds()
	r.Hooks = append(r.Hooks, knownVisitors{success: r.SuccessStatus, us: r.knownUS})
}

// ruleAttrs compiles the attributes of a rule block that are not rules'
// own: each must be a feature's (RuleAttrType), or it is an error as
// HCL reports any attribute a schema does not expect.
func (c *Compiler) ruleAttrs(body hcl.Body, r *Rule) {
	if body == nil {
		return
	}
	schema := &hcl.BodySchema{}
	for _, n := range c.ruleAttrNames() {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: n})
	}
	content, diags := body.Content(schema)
	for _, d := range diags {
		// HCL suggests among the schema's names, the features' alone:
		// suggest among every attribute and block a rule takes.
		if name, ok := strings.CutPrefix(d.Detail, "Blocks of type \""); ok && d.Summary == "Unsupported block type" {
			name, _, _ = strings.Cut(name, "\"")
			d.Detail = "Blocks of type \"" + name + "\" are not expected here." + suggest(name, []string{"when", "adaptive"})
			continue
		}
		if name, ok := strings.CutPrefix(d.Detail, "An argument named \""); ok && d.Summary == "Unsupported argument" && !strings.Contains(name, "Did you mean") {
			name, _, _ = strings.Cut(name, "\"")
			if name == "when" {
				d.Detail = "An argument named \"when\" is not expected here. Did you mean to define a block of type \"when\"?"
				continue
			}
			all := c.ruleAttrNames()
			for n := range ruleAttrNames {
				all = append(all, n)
			}
			sort.Strings(all)
			d.Detail = "An argument named \"" + name + "\" is not expected here." + suggest(name, all)
		}
	}
	c.diags = append(c.diags, diags...)
	list := make([]*hcl.Attribute, 0, len(content.Attributes))
	for _, a := range content.Attributes {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Range.Start.Byte < list[j].Range.Start.Byte })
	for _, a := range list {
		c.reg.attrs[a.Name].Compile(c, r, a)
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

// ruleAttrNames are the attributes of rule blocks rules decodes itself,
// which no feature may register.
var ruleAttrNames = func() map[string]bool {
	schema, _ := gohcl.ImpliedBodySchema(&ruleBlock{})
	m := map[string]bool{}
	for _, a := range schema.Attributes {
		m[a.Name] = true
	}
	return m
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
