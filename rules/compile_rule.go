package rules

import (
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// The rule { } block.

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
	ok := true
	fail := func(rng hcl.Range, summary, format string, args ...any) {
		c.Errorf(rng, summary, format, args...)
		ok = false
	}

	if !c.matcher(rb.Methods, rb.Paths, rb.Hosts, r) {
		ok = false
	}

	if rb.Sensitive != nil {
		r.Sensitive = *rb.Sensitive
	}
	if rb.DryRun != nil {
		r.DryRun = *rb.DryRun
	}
	if rb.Action != nil {
		switch *rb.Action {
		case "limit":
		case "deny":
			r.Action = ActionDeny
		case "log":
			r.Action = ActionLog
		case "skip":
			r.Action = ActionSkip
		default:
			fail(rb.ActionRange, "Invalid action", "%q is not an action; want \"limit\", \"deny\", \"log\" or \"skip\".%s", *rb.Action, suggest(*rb.Action, []string{"limit", "deny", "log", "skip"}))
		}
	}
	c.skipAttr(rb, r) // skip = [...] (skip.go)

	// The key.
	keys, krngs := c.StringList(rb.Key, "key")
	seenChar := map[string]bool{}
	for i, k := range keys {
		ch, tag, shared := c.characteristic(k, krngs[i], r)
		if ch == nil {
			ok = false
			continue
		}
		if seenChar[k] {
			fail(krngs[i], "Duplicate characteristic", "%q appears twice in key", k)
			continue
		}
		seenChar[k] = true
		if _, ceil := ch.(CeilingCharacteristic); ceil {
			if r.ceilingChar >= 0 {
				fail(krngs[i], "Two ceilings", "%q and %q both group their values under a ceiling; key a rule on one of them", r.KeyNames[r.ceilingChar], k)
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
		fail(rb.DefRange, "Missing key", "rule %q needs key = [...], such as [\"ip\"] (or [\"global\"] for one counter shared by all)", rb.Name)
	}

	// count_distinct: distinct values of a characteristic per key.
	if rb.CountDistinct != nil {
		ch, tag, _ := c.characteristic(*rb.CountDistinct, rb.CountDistinctRange, r)
		switch {
		case ch == nil:
			ok = false
		case !r.counts():
			fail(rb.CountDistinctRange, "count_distinct not used", "action = %q counts nothing; remove count_distinct", *rb.Action)
		case seenChar[*rb.CountDistinct]:
			fail(rb.CountDistinctRange, "Invalid count_distinct", "%q is in the key too: each key would see one value", *rb.CountDistinct)
		default:
			r.Distinct, r.distinctTag, r.Algorithm = ch, tag, Distinct
		}
		if rb.Algorithm != nil && *rb.Algorithm != ConcurrencyAlgorithm { // concurrencyAttrs refuses count_distinct there
			fail(rb.AlgorithmRange, "Algorithm not used", "a count_distinct rule counts distinct values over a sliding period; remove algorithm")
		}
	}

	c.multiValues(rb, r) // identities with several values (values.go)

	// Algorithm and numbers.
	if rb.Algorithm != nil && *rb.Algorithm == ConcurrencyAlgorithm {
		// Requests in flight: a Distinct set of lease IDs (concurrency.go);
		// limit and lease are compiled by finishConcurrency.
		r.Concurrency, r.Algorithm = true, Distinct
		c.concurrencyAttrs(rb, r)
	} else if rb.Algorithm != nil && rb.CountDistinct == nil {
		a, aok := ParseAlgorithm(*rb.Algorithm)
		if !aok {
			fail(rb.AlgorithmRange, "Unknown algorithm", "%q is not an algorithm; want one of %s.%s", *rb.Algorithm, strings.Join(algorithmNamesList(), ", "), suggest(*rb.Algorithm, algorithmNamesList()))
		}
		r.Algorithm = a
	}
	if r.counts() && !r.Concurrency {
		if rb.Limit == nil {
			fail(rb.DefRange, "Missing limit", "rule %q needs limit (requests per period)", rb.Name)
		} else if *rb.Limit < 1 {
			fail(rb.LimitRange, "Invalid limit", "limit must be at least 1, got %d", *rb.Limit)
		} else {
			r.Limit = *rb.Limit
		}
		if rb.Period == nil {
			fail(rb.DefRange, "Missing period", "rule %q needs period, a duration such as \"1m\" or \"1d\"", rb.Name)
		} else if c.calendarPeriod(rb, r) {
			ok = ok && r.Calendar != NoCalendar // "day", "week", "month" (calendar.go)
		} else if d, err := ParseDuration(*rb.Period); err != nil {
			fail(rb.PeriodRange, "Invalid period", "%q is not a duration; write it like \"30s\", \"15m\", \"1h\" or \"1d\"", *rb.Period)
		} else if d <= 0 {
			fail(rb.PeriodRange, "Invalid period", "period must be positive, got %q", *rb.Period)
		} else if d%time.Microsecond != 0 {
			fail(rb.PeriodRange, "Invalid period", "%q: periods are counted in whole microseconds", *rb.Period)
		} else {
			r.Period = d
		}
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
		if ok && r.Limit > 0 && r.Period > 0 {
			if r.PeriodUS()/r.Limit < 1 {
				fail(rb.LimitRange, "Limit too fine", "%d per %s is an emission interval under 1µs; raise the period or lower the limit", r.Limit, r.Period)
			} else if err := ValidateLimits(r.Algorithm, r.Limit, r.Burst, r.PeriodUS()); err != nil {
				fail(rb.LimitRange, "Limit out of range", "%v", err)
			}
		}
	} else if !r.Concurrency {
		if rb.Limit != nil {
			fail(rb.LimitRange, "Limit not used", "%s; remove limit", uncounted(r.Action))
		}
	}

	c.timeZone(rb, r)

	if rb.Count != nil {
		switch *rb.Count {
		case "requests":
		case "attempts":
			r.Count = CountAttempts
		case "failures":
			r.Count = CountFailures
		default:
			fail(rb.CountRange, "Invalid count", "%q is not a count mode; want \"requests\", \"attempts\" or \"failures\".%s", *rb.Count, suggest(*rb.Count, []string{"requests", "attempts", "failures"}))
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
		fail(rb.CountRange, "count not used", "action = %q counts nothing; remove count", *rb.Action)
	case r.Count == CountFailures:
		r.Hooks = append(r.Hooks, countFailures{failure: r.FailureStatus, success: r.SuccessStatus, reset: r.ResetOnSuccess})
	case r.ResetOnSuccess:
		r.Hooks = append(r.Hooks, resetOnSuccess{success: r.SuccessStatus})
	}
	if !r.Concurrency { // concurrencyAttrs refuses these there
		c.knownVisitors(rb, r)
		c.compileCost(rb, r) // cost, max_cost, settle_from (cost.go)
	}
	c.ban(rb, r)
	c.exemptKnown(rb, r) // exempt_known (compile_known.go)
	if w := rb.When; w != nil {
		c.when(w, r)
	}
	c.ruleAttrs(rb.Remain, r)
	c.finishRefusal(r)
	for _, done := range c.reg.ruleDone {
		done(c, r) // Feature.RuleDone: queue's max_delay
	}
	c.compileAdaptive(rb, r)   // adaptive { } (compile_adaptive.go)
	c.finishConcurrency(rb, r) // limit, lease (concurrency.go)
	hasVisitor := r.ceilingChar >= 0
	if hasVisitor && r.Limit > 0 {
		// Every visitor rule holds all visitors of one IP to a ceiling, so
		// stockpiled IDs cannot multiply a client's budget (default 10 ×
		// limit, docs/policy.md).
		r.IPCeiling = 10 * r.Limit
		if rb.IPCeiling != nil {
			r.IPCeiling = *rb.IPCeiling
			if r.IPCeiling < r.Limit {
				fail(rb.IPCeilingRange, "Invalid ip_ceiling", "ip_ceiling %d is below the rule's limit %d: one visitor alone would hit it", r.IPCeiling, r.Limit)
			}
		}
		r.CeilingBurst = ceilDiv(r.IPCeiling*r.Burst, r.Limit)
		if ok && r.Period > 0 {
			if err := ValidateLimits(r.Algorithm, r.IPCeiling, r.CeilingBurst, r.PeriodUS()); err != nil {
				rng := rb.IPCeilingRange
				if rb.IPCeiling == nil {
					rng = rb.LimitRange // the default ceiling, 10 × limit
				}
				fail(rng, "ip_ceiling out of range", "the IP ceiling of %d: %v", r.IPCeiling, err)
			}
		}
	} else if rb.IPCeiling != nil && !hasVisitor {
		// (A visitor rule whose limit is invalid has its own diagnostic.)
		fail(rb.IPCeilingRange, "ip_ceiling without visitor", "ip_ceiling applies to rules keyed on \"visitor\"")
	}

	r.OnStoreError = FailOpen
	if r.Sensitive {
		r.OnStoreError = FailClosed
	}
	if rb.OnStoreError != nil {
		switch *rb.OnStoreError {
		case "allow":
			r.OnStoreError = FailOpen
		case "deny":
			r.OnStoreError = FailClosed
		case "local":
			r.OnStoreError = FailLocal
		default:
			fail(rb.OnStoreErrorRange, "Invalid on_store_error", "%q is not a failure mode; want \"deny\", \"allow\" or \"local\"", *rb.OnStoreError)
		}
	}
	if rb.IPv4Prefix != nil {
		r.IPv4Prefix = c.prefixLen(*rb.IPv4Prefix, 32, rb.IPv4PrefixRange, "ipv4_prefix")
	}
	if rb.IPv6Prefix != nil {
		r.IPv6Prefix = c.prefixLen(*rb.IPv6Prefix, 128, rb.IPv6PrefixRange, "ipv6_prefix")
	}
	if rb.MaxKeys != nil {
		switch {
		case !r.counts():
			fail(rb.MaxKeysRange, "Unused max_keys", "action = %q counts nothing, so it holds no keys; remove max_keys", *rb.Action)
		case *rb.MaxKeys < 1 || *rb.MaxKeys > MaxKeysLimit:
			fail(rb.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", MaxKeysLimit, *rb.MaxKeys)
		default:
			r.MaxKeys, r.maxKeysSet = *rb.MaxKeys, true
		}
	}
	if !c.ruleNetwork(rb, r) { // network.go
		ok = false
	}
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
	if !ok || c.errorsSince(errs) {
		return nil
	}
	return r
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
		canon, cok := AppendCanonicalPath(nil, []byte(pre))
		if !cok {
			c.Errorf(prngs[i], "Invalid path", "%q is not a valid path", s)
			ok = false
			continue
		}
		m := string(AppendMatchPath(nil, canon, c.p.PathCaseInsensitive))
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
		_, name, hok := AppendHost(nil, nil, []byte(s))
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

// MaxBan bounds ban: a refusal that outlives 30 days is a block list's job.
const MaxBan = 30 * 24 * time.Hour

// ban compiles ban and ban_scope (ban.go).
func (c *Compiler) ban(rb *ruleBlock, r *Rule) {
	if rb.Ban == nil {
		if rb.BanScope != nil {
			c.Errorf(rb.BanScopeRange, "ban_scope without ban", "ban_scope says where a ban refuses; set ban, such as \"15m\", too")
		}
		if rb.BanBy != nil && !IsNull(rb.BanBy) {
			c.Errorf(rb.BanBy.Range(), "ban_by without ban", "ban_by says what a ban falls on; set ban, such as \"15m\", too")
		}
		return
	}
	d, err := ParseDuration(*rb.Ban)
	switch {
	case err != nil || d <= 0 || d%time.Microsecond != 0:
		c.Errorf(rb.BanRange, "Invalid ban", "%q is not a positive duration such as \"15m\"", *rb.Ban)
		return
	case d > MaxBan:
		c.Errorf(rb.BanRange, "ban too long", "%q: a ban lasts at most 30d", *rb.Ban)
		return
	case !r.counts():
		c.Errorf(rb.BanRange, "ban not used", "a rule that counts nothing (action = \"deny\" or \"skip\") never trips; remove ban")
		return
	}
	if rb.BanScope != nil {
		switch *rb.BanScope {
		case "rule":
		case "sensitive":
			r.BanScope = BanSensitive
		default:
			c.Errorf(rb.BanScopeRange, "Invalid ban_scope", "%q is not a ban scope; want \"rule\" (the rule that tripped) or \"sensitive\" (every sensitive route)", *rb.BanScope)
			return
		}
	}
	r.banUS = d.Microseconds()
	if r.BanScope == BanSensitive {
		c.p.sensitiveBans = append(c.p.sensitiveBans, r)
	} else {
		c.p.ownBans = true
	}
	c.banBy(rb, r)
}

// defaultBanBy is what a ban falls on beside its key when ban_by is not
// set and the policy has the block of that name (visitor { }): its
// visitors, so that a ban on an address spares the visitors behind it
// that did nothing (ban.go).
const defaultBanBy = "visitor"

// banBy compiles ban_by (ban.go), defaulting to ["visitor"] on a rule
// not keyed on it when the policy has a visitor { } block; ban_by = []
// bans the whole key.
func (c *Compiler) banBy(rb *ruleBlock, r *Rule) {
	var names []string
	var rngs []hcl.Range
	if rb.BanBy == nil || IsNull(rb.BanBy) {
		if _, known := c.reg.plain[defaultBanBy]; !known || c.p.Block(defaultBanBy) == nil || slices.Contains(r.KeyNames, defaultBanBy) {
			return
		}
		names, rngs = []string{defaultBanBy}, []hcl.Range{rb.BanRange}
	} else {
		names, rngs = c.StringList(rb.BanBy, "ban_by")
	}
	for i, n := range names {
		if slices.Contains(r.KeyNames, n) {
			c.Errorf(rngs[i], "Duplicate characteristic", "%q is in the key: the ban falls on it already; remove it from ban_by", n)
			continue
		}
		ch, tag, shared := c.characteristic(n, rngs[i], r)
		switch {
		case ch == nil:
			continue
		case shared:
			c.Errorf(rngs[i], "Invalid ban_by", "%q is the same for every request: the ban would fall on the whole key; write ban_by = [] for that", n)
			continue
		case slices.Contains(names[:i], n):
			c.Errorf(rngs[i], "Duplicate characteristic", "%q appears twice in ban_by", n)
			continue
		}
		r.banBy, r.banByTags = append(r.banBy, ch), append(r.banByTags, tag)
	}
	if len(r.banBy) == 0 {
		return
	}
	// Guilt markers hold a key per guilty visitor: a budget of their own,
	// the rule's size, so they never crowd out the rule's counters.
	r.guilt = &Budget{ID: BudgetID("\x00ban-by\x00" + r.Name), Name: r.Name + " (ban_by)", follows: r}
	c.p.budgets = append(c.p.budgets, r.guilt)
	if r.Count == CountFailures {
		r.Hooks = append(r.Hooks, banGuilt{failure: r.FailureStatus})
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
