package known

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/internal/keybudget"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/hclattr"
)

// Feature returns the known callers: known { } blocks, and known_visitors,
// known_by and exempt_known on rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name: "known",
		Blocks: []rules.BlockType{{
			Type: "known", Labels: []string{"name"}, Multiple: true, Last: true, Decode: decodeBlock,
		}},
		RuleAttrs: []rules.RuleAttrType{
			{Name: "known_visitors", Compile: compileVisitors},
			{Name: "known_by", Compile: compileBy},
			{Name: "exempt_known", Compile: compileExempt},
		},
		RuleDone:   finishRule,
		PolicyDone: finishPolicy,
	}
}

// MaxFor bounds known_visitors and a known block's for: a marker outlives
// no year.
const MaxFor = 366 * 24 * time.Hour

// namePrefix keeps a known block's counters apart from every rule's and
// budget's: its ID is rules.BudgetID of this prefix and its name.
const namePrefix = "\x00known\x00"

// callerForm starts the hashed values of every marker that exempts a
// caller (known_visitors, known { }): since it, they name the caller
// exactly (rules.CallerCharacteristic: an account as it was sent, a
// visitor by its ID alone), and a marker of the format before, keyed on
// counted values, is never read again (docs/policy.md, "known",
// "Upgrading"). No marker of that format began with it: theirs began with
// a tag, below 0x20.
const callerForm = 0xfc

// Block is a compiled known "NAME" { } block.
type Block struct {
	// Name is the block's label; ID, a hash of it, starts its markers'
	// keys, so they follow the name across reloads.
	Name string
	ID   [8]byte
	// DefRange is where the block is defined.
	DefRange hcl.Range

	index   int         // position in the policy's blocks and in a request's state
	match   *rules.Rule // what the block matches, and its characteristics' grouping; never in Policy.Rules
	by      []rules.Characteristic
	tags    []byte
	forUS   int64
	success []int
	budget  *rules.Budget
	used    bool // some rule's exempt_known, or a block's requires, names it
	// requires are the blocks whose marker for the request's own values
	// must be live (in the precheck call) for a success to record this
	// block's: a verify makes known only a phone a code was sent to.
	requires []*Block
}

// Blocks returns p's known blocks, in file order. The caller must not
// modify them.
func Blocks(p *rules.Policy) []*Block {
	vs := p.Blocks("known")
	out := make([]*Block, len(vs))
	for i, v := range vs {
		out[i] = v.(*Block)
	}
	return out
}

// NetworkKeys returns the most markers of k's budget one client network
// may make in the memory store (the store's network_share of the block's
// max_keys, rounded down, at least 1), or 0 for no bound.
func (k *Block) NetworkKeys() int { return k.budget.NetworkKeys() }

// For returns how long after its last success a caller of k is known.
func (k *Block) For() time.Duration { return rules.DurationUS(k.forUS) }

// op is the op of one of k's markers: kind OpPeek to check it, OpAdd to
// write it.
func (k *Block) op(kind rules.OpKind, key rules.Key) rules.Op {
	return rules.Op{
		Kind: kind, Algorithm: rules.SlidingLog, Key: key, Limit: 1, PeriodUS: k.forUS,
		Cost: 1, Enforce: true, OnError: rules.FailOpen, Sensitive: true, MaxKeys: int32(k.budget.MaxKeys),
		NetworkKeys: int32(k.budget.NetworkKeys()),
	}
}

// blockSchema is `known "NAME" { }`: the requests whose success makes
// their caller known, what recognises it and for how long.
type blockSchema struct {
	Name string `hcl:"name,label"`
	// methods, paths and hosts select the requests whose success records
	// the marker, as a rule's select what it counts.
	Methods hcl.Expression `hcl:"methods,optional"`
	Paths   hcl.Expression `hcl:"paths,optional"`
	Hosts   hcl.Expression `hcl:"hosts,optional"`
	// by lists the characteristics that together recognise a caller
	// (["visitor", "account"], ["phone"]).
	By hcl.Expression `hcl:"by,optional"`
	// for is how long after its last success a caller is known ("30d").
	For *string `hcl:"for,optional"`
	// success_status are the origin's statuses that are successes
	// (default [200, 201, 204]); X-Edge-Outcome overrides them.
	SuccessStatus hcl.Expression `hcl:"success_status,optional"`
	// max_keys is the markers' key budget in the memory store (default:
	// a share of the store's max_keys, as a rule without one gets).
	MaxKeys *int `hcl:"max_keys,optional"`
	// requires names known blocks whose marker for the request's own
	// values must be live for a success to record this block's
	// (["code-sent"]: a phone is known only by verifying a code sent to
	// it).
	Requires hcl.Expression `hcl:"requires,optional"`

	DefRange     hcl.Range `hcl:",def_range"`
	NameRange    hcl.Range `hcl:"name,label_range"`
	ForRange     hcl.Range `hcl:"for,attr_value_range"`
	MaxKeysRange hcl.Range `hcl:"max_keys,attr_value_range"`
}

// compiled is a compile's known blocks and rule attributes
// (Compiler.State), for the steps that need them all.
type compiled struct {
	// names are the known blocks declared (decoded), compiled or not.
	names map[string]hcl.Range
	// blocks are those compiled, in file order; requiring those with a
	// requires, compiled once every block is (finishPolicy).
	blocks    []*Block
	requiring []requirement
	// rules are the rules' attributes as written, until RuleDone.
	rules map[*rules.Rule]*ruleAttrs
	// hook is the policy's request hook, made when first needed.
	hook *hook
}

// requirement is a known block and its requires, compiled once every
// block is: it may name a block defined after it.
type requirement struct {
	k    *Block
	expr hcl.Expression
}

func compileState(c *rules.Compiler) *compiled {
	return c.State("known.blocks", func() any {
		return &compiled{names: map[string]hcl.Range{}, rules: map[*rules.Rule]*ruleAttrs{}}
	}).(*compiled)
}

// requestHook returns the policy's request hook, making it (and its memo
// slot) the first time.
func (st *compiled) requestHook(c *rules.Compiler) *hook {
	if st.hook == nil {
		st.hook = &hook{slot: c.Slot("known.request")}
	}
	return st.hook
}

// decodeBlock compiles one known block. A name seen twice is an error that
// points at the first.
func decodeBlock(c *rules.Compiler, b *hcl.Block) any {
	var kb blockSchema
	if !c.Decode(b, &kb) {
		return nil
	}
	if len(b.Labels) > 0 {
		kb.Name, kb.NameRange = b.Labels[0], b.LabelRanges[0]
	}
	kb.DefRange = b.DefRange
	st := compileState(c)
	if prev, dup := st.names[kb.Name]; dup {
		c.Errorf(kb.NameRange, "Duplicate known block", "a known block named %q is already defined at %s", kb.Name, prev)
		return nil
	}
	st.names[kb.Name] = kb.DefRange
	k := compileBlock(c, &kb)
	if k == nil {
		return nil
	}
	k.index = len(st.blocks)
	st.blocks = append(st.blocks, k)
	if !rules.IsNull(kb.Requires) {
		st.requiring = append(st.requiring, requirement{k: k, expr: kb.Requires})
	}
	return k
}

// compileBlock compiles one known block; nil after an error.
func compileBlock(c *rules.Compiler, kb *blockSchema) *Block {
	errs := c.ErrorCount()
	k := &Block{Name: kb.Name, ID: rules.BudgetID(namePrefix + kb.Name), DefRange: kb.DefRange}
	// The block matches and groups addresses as a rule of the edge's
	// defaults does; it is never one of the policy's rules.
	k.match = c.BlockRule(kb.Name, k.ID, kb.DefRange, kb.Methods, kb.Paths, kb.Hosts)
	if kb.Name == "" {
		c.Errorf(kb.NameRange, "Invalid known name", "a known block needs a non-empty name")
	}
	compileBlockBy(c, k, kb, errs)
	if kb.For == nil {
		c.Errorf(kb.DefRange, "Missing for", "known %q needs for, how long after its last success a caller is known, such as \"30d\"", kb.Name)
	} else if d, err := rules.ParseDuration(*kb.For); err != nil || d <= 0 || d%time.Microsecond != 0 {
		c.Errorf(kb.ForRange, "Invalid for", "%q is not a positive duration such as \"30d\"", *kb.For)
	} else if d > MaxFor {
		c.Errorf(kb.ForRange, "for too long", "%q: a caller is known for at most %s after its last success", *kb.For, "366d")
	} else {
		k.forUS = d.Microseconds()
	}
	k.success = c.IntList(kb.SuccessStatus, "success_status")
	if k.success == nil {
		k.success = []int{200, 201, 204}
	}
	// PerNetwork: one network must not fill the budget (docs/attacks.md,
	// "Known callers").
	budget := "(known " + kb.Name + ")"
	switch {
	case kb.MaxKeys == nil:
		k.budget = c.AddKeyBudget(keybudget.Shared(k.ID, budget).PerNetwork())
	case *kb.MaxKeys < 1 || *kb.MaxKeys > rules.MaxKeysLimit:
		c.Errorf(kb.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", rules.MaxKeysLimit, *kb.MaxKeys)
	default:
		k.budget = c.AddKeyBudget(keybudget.Fixed(k.ID, budget, *kb.MaxKeys).PerNetwork())
	}
	if c.ErrorCount() > errs {
		return nil
	}
	return k
}

// compileBlockBy compiles a known block's by: characteristics, each once, that
// differ from request to request. errs is the error count when the
// block's compile began.
func compileBlockBy(c *rules.Compiler, k *Block, kb *blockSchema, errs int) {
	names, rngs := c.StringList(kb.By, "by")
	if len(names) == 0 && (kb.By == nil || rules.IsNull(kb.By) || c.ErrorCount() == errs) {
		c.Errorf(kb.DefRange, "Missing by", "known %q needs by = [...], the characteristics that together recognise a caller, such as [\"visitor\", \"account\"] (a browser that logged in to that account) or [\"phone\"] (a phone whose code was verified)", kb.Name)
	}
	seen := map[string]bool{}
	for i, n := range names {
		ch, tag, shared := c.Characteristic(n, rngs[i], k.match)
		switch {
		case ch == nil:
			continue
		case seen[n]:
			c.Errorf(rngs[i], "Duplicate characteristic", "%q appears twice in by", n)
			continue
		case shared:
			c.Errorf(rngs[i], "Invalid by", "%q is the same for every request: it would make everyone known", n)
			continue
		}
		seen[n] = true
		k.by, k.tags = append(k.by, ch), append(k.tags, tag)
	}
}

// list returns the compiled known blocks names lists (attr: the attribute
// they are written in), each once, marking them used; a name that is no
// block, one named twice, or self (a block's own name, "" for none) is an
// error.
func (st *compiled) list(c *rules.Compiler, names []string, rngs []hcl.Range, attr, self string) []*Block {
	var out []*Block
	for i, n := range names {
		switch _, declared := st.names[n]; {
		case !declared:
			c.Errorf(rngs[i], "Unknown known block", "%q is not a known block; %s", n, st.want(n))
			continue
		case self != "" && n == self:
			c.Errorf(rngs[i], "Invalid "+attr, "known %q cannot require itself: its marker would be needed to record it", n)
			continue
		}
		k := st.named(n)
		if k == nil {
			continue // its own errors are reported
		}
		if slices.Contains(out, k) {
			c.Errorf(rngs[i], "Duplicate known block", "%q appears twice in %s", n, attr)
			continue
		}
		k.used = true
		out = append(out, k)
	}
	return out
}

// named returns the compiled known block named n, or nil.
func (st *compiled) named(n string) *Block {
	for _, k := range st.blocks {
		if k.Name == n {
			return k
		}
	}
	return nil
}

// want lists the known blocks for a diagnostic naming n, which is not
// one, with a suggestion.
func (st *compiled) want(n string) string {
	all := make([]string, 0, len(st.names))
	for name := range st.names {
		all = append(all, name)
	}
	sort.Strings(all)
	if len(all) == 0 {
		return "no known block is defined"
	}
	return "want one of " + strings.Join(all, ", ") + "." + hclattr.Suggest(n, all)
}

// finishPolicy runs once every rule is compiled: each block's requires
// (which may name a block defined after it) and their cycles, the
// warnings about blocks no rule uses or that a decision-only listener
// cannot record, and the request hook that checks and writes the blocks'
// markers and known_visitors'.
func finishPolicy(c *rules.Compiler) {
	st := compileState(c)
	for _, kr := range st.requiring {
		names, rngs := c.StringList(kr.expr, "requires")
		kr.k.requires = st.list(c, names, rngs, "requires", kr.k.Name)
	}
	requiresCycles(c, st.requiring)
	p := c.Policy()
	for _, k := range st.blocks {
		if !k.used {
			c.Warnf(k.DefRange, "Unused known block", "no rule names %q in exempt_known, so the callers it recognises are exempt from nothing; its markers are written all the same", k.Name)
		}
		if p.DecideListen != "" {
			c.Warnf(k.DefRange, "Known block needs the origin's answer under decide_listen",
				"known %q records a caller after the origin's success, which the decision-only listener never sees: a request decided there makes no one known (the markers a proxy listener records are checked there all the same) (docs/policy.md, \"known\")", k.Name)
		}
	}
	if len(st.blocks) > 0 || st.hook != nil {
		h := st.requestHook(c)
		h.blocks = st.blocks
		c.AddRequestHook(h)
	}
}

// requiresCycles refuses known blocks that require each other, through
// any chain: none of them could ever be recorded first.
func requiresCycles(c *rules.Compiler, requiring []requirement) {
	for _, kr := range requiring {
		if path := requiresPath(kr.k, kr.k, nil); path != nil {
			c.Errorf(kr.expr.Range(), "Circular requires", "known %q requires %s again: none of them could ever be recorded first", kr.k.Name, strings.Join(path, ", which requires "))
		}
	}
}

// requiresPath returns the names of a chain of requires from k that leads
// back to start, or nil.
func requiresPath(start, k *Block, seen []*Block) []string {
	for _, r := range k.requires {
		if r == start {
			return []string{fmt.Sprintf("%q", r.Name)}
		}
		if slices.Contains(seen, r) {
			continue
		}
		if path := requiresPath(start, r, append(seen, r)); path != nil {
			return append([]string{fmt.Sprintf("%q", r.Name)}, path...)
		}
	}
	return nil
}
