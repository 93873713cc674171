package known

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// Stage is a rule's known callers: its known_visitors (Visitors > 0) and
// its exempt_known.
type Stage struct {
	// Visitors is known_visitors: how long a visitor that succeeded is not
	// held to the rule, 0 for none; by are known_by's characteristics,
	// tags their tags, success the rule's success_status.
	Visitors time.Duration
	by       []rules.Characteristic
	tags     []byte
	success  []int
	// exempt are the blocks whose callers the rule does not hold to what
	// they share with others (exempt_known).
	exempt []*Block

	hook *hook // the policy's request hook: its memo slot
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "known" }

// Of returns r's known callers, or nil when r has neither known_visitors
// nor exempt_known.
func Of(r *rules.Rule) *Stage {
	st, _ := rules.StageOf[*Stage](r)
	return st
}

// Visitors returns r's known_visitors (docs/policy.md, "known_visitors"):
// how long a visitor that succeeded is not held to the rule, 0 for none.
// For tools that read a policy, as Rule.Ban.
func Visitors(r *rules.Rule) time.Duration {
	if k := Of(r); k != nil {
		return k.Visitors
	}
	return 0
}

// KeyLifetime is known_visitors: a marker lives that long after its last
// success (rules.KeyKeeper).
func (k *Stage) KeyLifetime() time.Duration { return k.Visitors }

// Resolves returns known_by's characteristics (rules.Resolver).
func (k *Stage) Resolves() []rules.Characteristic { return k.by }

// ruleAttrs are a rule's known_visitors, known_by and exempt_known as
// written, compiled together once all are (finishRule).
type ruleAttrs struct {
	visitors    *string // known_visitors; nil: not written (or null)
	visitorsBad bool    // known_visitors is not a string: reported
	visitorsAt  hcl.Range
	by          hcl.Expression // known_by; nil: not written
	exempt      []*Block       // exempt_known, compiled
}

func attrsOf(c *rules.Compiler, r *rules.Rule) *ruleAttrs {
	st := compileState(c)
	a := st.rules[r]
	if a == nil {
		a = &ruleAttrs{}
		st.rules[r] = a
	}
	return a
}

func compileVisitors(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	a := attrsOf(c, r)
	a.visitorsAt = attr.Expr.Range()
	if !c.DecodeRuleAttr(r, attr, &a.visitors) {
		a.visitors, a.visitorsBad = nil, true
	}
}

func compileBy(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	attrsOf(c, r).by = attr.Expr
}

// compileExempt compiles a rule's exempt_known: the known blocks whose
// callers the rule does not hold to what they share with others.
func compileExempt(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	names, rngs := c.StringList(attr.Expr, "exempt_known")
	if len(names) == 0 {
		return
	}
	switch {
	case !r.Counts():
		c.Errorf(attr.Expr.Range(), "exempt_known not used", "%s; remove exempt_known", rules.Uncounted(r.Action))
		return
	case r.InFlight():
		c.Errorf(attr.Expr.Range(), "exempt_known not used", "a known caller's requests are at the origin all the same: a concurrency limit holds everyone; remove exempt_known")
		return
	}
	attrsOf(c, r).exempt = compileState(c).list(c, names, rngs, "exempt_known", "")
}

// finishRule compiles r's known_visitors and known_by together, and gives
// r its Stage when it has known callers.
func finishRule(c *rules.Compiler, r *rules.Rule) {
	st := compileState(c)
	a := st.rules[r]
	if a == nil {
		return
	}
	delete(st.rules, r)
	k := &Stage{exempt: a.exempt}
	switch {
	case r.InFlight() && a.visitors != nil:
		c.Errorf(a.visitorsAt, "known_visitors not used", "rule %q is a concurrency rule (algorithm = \"concurrency\"): a known visitor's requests are at the origin all the same; remove known_visitors", r.Name)
	case !r.InFlight() && !a.visitorsBad:
		k.compileVisitors(c, r, a)
	}
	if k.Visitors > 0 || len(k.exempt) > 0 {
		k.hook = st.requestHook(c)
		r.AddStage(k)
	}
}

// compileVisitors compiles known_visitors and known_by into k.
func (k *Stage) compileVisitors(c *rules.Compiler, r *rules.Rule, a *ruleAttrs) {
	if a.visitors == nil {
		if a.by != nil && !rules.IsNull(a.by) {
			c.Errorf(a.by.Range(), "known_by without known_visitors", "known_by names what recognises a known visitor; set known_visitors, such as \"30d\", too")
		}
		return
	}
	d, err := rules.ParseDuration(*a.visitors)
	switch {
	case err != nil || d <= 0 || d%time.Microsecond != 0:
		c.Errorf(a.visitorsAt, "Invalid known_visitors", "%q is not a positive duration such as \"30d\"", *a.visitors)
		return
	case d > MaxFor:
		c.Errorf(a.visitorsAt, "known_visitors too long", "%q: a visitor is known for at most %s after its last success", *a.visitors, "366d")
		return
	case r.Count != rules.CountFailures:
		c.Errorf(a.visitorsAt, "known_visitors needs count = \"failures\"", "a visitor becomes known by logging in successfully, which only a rule counting failures learns from the origin's answer")
		return
	}
	names, rngs := c.StringList(a.by, "known_by")
	if len(names) == 0 {
		c.Errorf(a.visitorsAt, "Missing known_by", "known_visitors needs known_by, the characteristics that recognise a visitor, such as [\"visitor\"] (its signed visitor ID, or its IP without one) or [\"ip\"]")
		return
	}
	for i, n := range names {
		ch, tag, _ := c.Characteristic(n, rngs[i], r)
		if ch == nil {
			return
		}
		k.by, k.tags = append(k.by, ch), append(k.tags, tag)
	}
	k.Visitors, k.success = d, r.SuccessStatus
}

// visitorOp is the op of r's known-visitor marker key: kind OpPeek to
// check it, OpAdd to write it. A Marker: the memory store keeps it in r's
// marker budget and never evicts it while it lasts, so neither a flood of
// r's new keys nor other visitors' markers can make a known visitor
// unknown, and a marker never evicts r's counters (docs/memory-store.md,
// "Markers").
func (k *Stage) visitorOp(kind rules.OpKind, r *rules.Rule, key rules.Key) rules.Op {
	return rules.Op{
		Kind: kind, Algorithm: rules.SlidingLog, Key: key, Limit: 1, PeriodUS: k.Visitors.Microseconds(),
		Cost: 1, Enforce: kind == rules.OpAdd, OnError: rules.FailOpen, MaxKeys: int32(r.MaxKeys), Marker: true,
		NetworkKeys: int32(r.NetworkKeys),
	}
}
