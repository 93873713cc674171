package ban

import (
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/internal/keybudget"
	"github.com/edge-gateway/edge/rules"
)

// Feature returns the ban behaviour: ban, ban_scope and ban_by on
// rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name: "ban",
		RuleAttrs: []rules.RuleAttrType{
			{Name: "ban", Compile: compileBan},
			{Name: "ban_scope", Compile: compileScope},
			{Name: "ban_by", Compile: compileBy},
		},
		RuleDone: finish,
	}
}

// MaxBan bounds ban: a refusal that outlives 30 days is a block list's job.
const MaxBan = 30 * 24 * time.Hour

// Scope is a rule's ban_scope.
type Scope uint8

const (
	// ScopeRule: the ban refuses the key on the rule that tripped.
	ScopeRule Scope = iota
	// ScopeSensitive: the ban refuses the key on every sensitive route.
	ScopeSensitive
)

// Stage is a rule's ban: its presence is ban = DURATION on a rule that
// counts. A compiled Stage is immutable and safe for concurrent use.
type Stage struct {
	// Duration is how long a key that tripped the rule stays refused.
	Duration time.Duration
	// Scope is where the ban refuses it (ban_scope).
	Scope Scope

	rule *rules.Rule
	us   int64 // Duration in µs
	// by are the characteristics the ban falls on beside the key (ban_by),
	// byTags their tags; guilt is the key budget of their guilt markers.
	by     []rules.Characteristic
	byTags []byte
	guilt  *rules.Budget
	slot   int // the request's checks (checks)
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "ban" }

// Of returns r's ban, or nil when r bans nothing.
func Of(r *rules.Rule) *Stage {
	st, _ := rules.StageOf[*Stage](r)
	return st
}

// Duration returns r's ban, 0 when it has none: how long a key that
// tripped the rule stays refused.
func Duration(r *rules.Rule) time.Duration {
	if b := Of(r); b != nil {
		return b.Duration
	}
	return 0
}

// Sensitive reports whether r bans on every sensitive route (ban_scope =
// "sensitive").
func Sensitive(r *rules.Rule) bool {
	b := Of(r)
	return b != nil && b.Scope == ScopeSensitive
}

// KeyLifetime is the longest a key the stage writes lives
// (rules.KeyKeeper): the ban's marker lives as long as the ban, and under
// ban_by a guilt marker the rule's period and the ban (guiltOp), so that
// a key-secret rotation or a key format's migration window outlasts a
// visitor's guilt as it does the ban the guilt holds it to.
func (st *Stage) KeyLifetime() time.Duration {
	if st.guilt != nil {
		return st.rule.Period + st.Duration
	}
	return st.Duration
}

// Forgive clears the ban marker of k with k's counter (rules.Forgiver).
func (st *Stage) Forgive(k rules.Key, ops []rules.Op) []rules.Op {
	return append(ops, st.banOp(rules.OpReset, banKey(k)))
}

// written is ban, ban_scope and ban_by as a rule writes them: the
// attributes compile in the order written, and finish compiles them
// together, in the order of their checks. It is a stage with no phase.
type written struct {
	ban, scope   *string // nil: not written (or null)
	banRng       hcl.Range
	scopeRng     hcl.Range
	by           *hcl.Attribute
	banUndecoded bool // ban's value is not a string: reported already
}

func (*written) Behaviour() string { return "ban (as written)" }

// writtenOf returns r's written ban attributes, adding them the first time.
func writtenOf(r *rules.Rule) *written {
	if w, ok := rules.StageOf[*written](r); ok {
		return w
	}
	w := &written{}
	r.AddStage(w)
	return w
}

func compileBan(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	w := writtenOf(r)
	if !c.Append(gohcl.DecodeExpression(attr.Expr, nil, &w.ban)) {
		w.ban, w.banUndecoded = nil, true
	}
	w.banRng = attr.Expr.Range()
}

func compileScope(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	w := writtenOf(r)
	if !c.Append(gohcl.DecodeExpression(attr.Expr, nil, &w.scope)) {
		w.scope = nil
	}
	w.scopeRng = attr.Expr.Range()
}

func compileBy(_ *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	writtenOf(r).by = attr
}

// finish compiles r's ban once its attributes are, in the order of their
// checks whatever the order written (ban, then ban_scope, then ban_by):
// the Stage is added then, after the stages of the rule's attributes and
// of the features before ban's (the queue's max_delay, known_visitors),
// so that its Judge sees what theirs judged and its Admit comes after a
// known caller's match is taken out of the rule. adaptive { } refuses a
// ban on its rule itself (behaviour/adaptive).
func finish(c *rules.Compiler, r *rules.Rule) {
	w, ok := rules.StageOf[*written](r)
	if !ok || w.banUndecoded {
		return
	}
	st := w.compile(c, r)
	if st == nil {
		return
	}
	st.slot = c.Slot("ban")
	r.AddStage(st)
	if st.Scope == ScopeSensitive {
		c.AddRequestHook(sensitive{st})
	}
	if st.guilt != nil && r.Count == rules.CountFailures {
		r.AddStage(&failures{st: st, failure: r.FailureStatus})
	}
}

// compile compiles ban and ban_scope, then ban_by, into r's Stage; nil
// without a ban or after an error.
func (w *written) compile(c *rules.Compiler, r *rules.Rule) *Stage {
	if w.ban == nil {
		if w.scope != nil {
			c.Errorf(w.scopeRng, "ban_scope without ban", "ban_scope says where a ban refuses; set ban, such as \"15m\", too")
		}
		if w.by != nil && !rules.IsNull(w.by.Expr) {
			c.Errorf(w.by.Expr.Range(), "ban_by without ban", "ban_by says what a ban falls on; set ban, such as \"15m\", too")
		}
		return nil
	}
	d, err := rules.ParseDuration(*w.ban)
	switch {
	case err != nil || d <= 0 || d%time.Microsecond != 0:
		c.Errorf(w.banRng, "Invalid ban", "%q is not a positive duration such as \"15m\"", *w.ban)
		return nil
	case d > MaxBan:
		c.Errorf(w.banRng, "ban too long", "%q: a ban lasts at most 30d", *w.ban)
		return nil
	case r.Action == rules.ActionDeny || r.Action == rules.ActionSkip:
		c.Errorf(w.banRng, "ban not used", "a rule that counts nothing (action = \"deny\" or \"skip\") never trips; remove ban")
		return nil
	}
	st := &Stage{Duration: d, us: d.Microseconds(), rule: r}
	if w.scope != nil {
		switch *w.scope {
		case "rule":
		case "sensitive":
			st.Scope = ScopeSensitive
		default:
			c.Errorf(w.scopeRng, "Invalid ban_scope", "%q is not a ban scope; want \"rule\" (the rule that tripped) or \"sensitive\" (every sensitive route)", *w.scope)
			return nil
		}
	}
	st.compileBy(c, r, w)
	return st
}

// defaultBy is what a ban falls on beside its key when ban_by is not set
// and the policy has the block of that name (visitor { }): its visitors,
// so that a ban on an address spares the visitors behind it that did
// nothing.
const defaultBy = "visitor"

// compileBy compiles ban_by, defaulting to ["visitor"] on a rule not keyed
// on it when the policy has a visitor { } block; ban_by = [] bans the
// whole key.
func (st *Stage) compileBy(c *rules.Compiler, r *rules.Rule, w *written) {
	var names []string
	var rngs []hcl.Range
	if w.by == nil || rules.IsNull(w.by.Expr) {
		if !c.HasCharacteristic(defaultBy) || c.Block(defaultBy) == nil || slices.Contains(r.KeyNames, defaultBy) {
			return
		}
		names, rngs = []string{defaultBy}, []hcl.Range{w.banRng}
	} else {
		names, rngs = c.StringList(w.by.Expr, "ban_by")
	}
	for i, n := range names {
		if slices.Contains(r.KeyNames, n) {
			c.Errorf(rngs[i], "Duplicate characteristic", "%q is in the key: the ban falls on it already; remove it from ban_by", n)
			continue
		}
		ch, tag, shared := c.Characteristic(n, rngs[i], r)
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
		st.by, st.byTags = append(st.by, ch), append(st.byTags, tag)
	}
	if len(st.by) == 0 {
		return
	}
	// Guilt markers hold a key per guilty visitor: a budget of their own,
	// the rule's size, so they never crowd out the rule's counters.
	st.guilt = c.AddKeyBudget(keybudget.Following(rules.BudgetID("\x00ban-by\x00"+r.Name), r.Name+" (ban_by)", &r.MaxKeys))
}
