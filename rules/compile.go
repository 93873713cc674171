package rules

import (
	"math"
	"os"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/edge-gateway/edge/internal/keybudget"
	"github.com/edge-gateway/edge/rules/hclattr"
	"github.com/edge-gateway/edge/rules/hcldecode"
)

// The policy compiler: policies.hcl in, a *Policy or file:line,col
// diagnostics out (docs/policy.md is the language). This file holds the
// driver and the Compiler features see; compile_rule.go the rule block;
// compile_values.go and decode.go the doors to packages hclattr
// (attribute values) and hcldecode (a block decoded around its errors).
// The node's own blocks, edge { } and store { }, are package node's;
// known { } is behaviour/known's.

// Defaults of the policy language (docs/policy.md) that rules reads; the
// node's own are package node's.
const (
	// DefaultMaxKeys is the memory store's max_keys (store { }).
	DefaultMaxKeys = 100000
	// MaxKeysLimit bounds a max_keys, the store's and a rule's: a key
	// budget travels in Op.MaxKeys, an int32.
	MaxKeysLimit = math.MaxInt32
)

// LoadFile reads and compiles the policy at path with features. See Load.
func LoadFile(path string, features ...Feature) (*Policy, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read policy",
			Detail:   err.Error(),
		}}
	}
	return Load(path, src, features...)
}

// Load parses and compiles a policy, with the blocks, characteristics and
// conditions of features besides rules' own (rule; ip, route,
// global); the node's edge { } and store { } are a feature's too (package
// node, in builtin.Features). It collects every diagnostic it can (each
// with the file, line and column of the offending value) instead of
// stopping at the first, sorted by position; a policy comes back only when
// there is no error. Warnings may come back with a valid policy.
func Load(filename string, src []byte, features ...Feature) (*Policy, hcl.Diagnostics) {
	g := newRegistry(features)
	if len(g.errs) > 0 {
		var diags hcl.Diagnostics
		for _, e := range g.errs {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Feature conflict", Detail: e})
		}
		return nil, diags
	}
	parser := hclparse.NewParser()
	f, diags := parser.ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diags
	}
	c := &Compiler{filename: filename, reg: g, slots: map[string]int{}}
	p := c.compile(f.Body)
	diags = append(diags, c.diags...)
	sortDiags(diags)
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

// Compiler compiles one policy. Features receive it in their Decode and
// Compile functions: it collects diagnostics, hands out memo slots and
// records what the policy reads.
type Compiler struct {
	filename string
	diags    hcl.Diagnostics
	reg      *registry
	p        *Policy
	slots    map[string]int
	// blocks are the rule blocks as decoded, by rule (RuleAttr,
	// DecodeRuleAttr); states the features' own compile state (State).
	blocks map[*Rule]*ruleBlock
	states map[string]any
	// dec decodes blocks so that one wrong value hides no other error
	// (decode.go, package hcldecode).
	dec hcldecode.Decoder
	// cur is the rule block being compiled (DecodeInRule), nil between rules.
	cur *ruleBlock
}

// Warnf records a warning at rng.
func (c *Compiler) Warnf(rng hcl.Range, summary, format string, args ...any) {
	c.diags = append(c.diags, hclattr.Warnf(rng, summary, format, args...))
}

// Errorf records an error at rng: the policy will not load.
func (c *Compiler) Errorf(rng hcl.Range, summary, format string, args ...any) {
	c.diags = append(c.diags, hclattr.Errorf(rng, summary, format, args...))
}

// Append records diagnostics a feature got elsewhere (gohcl.DecodeBody),
// and reports whether they hold no error.
func (c *Compiler) Append(d hcl.Diagnostics) bool {
	c.diags = append(c.diags, d...)
	return !d.HasErrors()
}

// Policy returns the policy being compiled: its Node settings are final
// once the node's blocks are decoded (BlockType.First), before any other
// feature block and every rule.
func (c *Compiler) Policy() *Policy { return c.p }

// Block returns the compiled value of the policy's first block of type typ
// (feature blocks are decoded before rules), or nil.
func (c *Compiler) Block(typ string) any { return c.p.Block(typ) }

// Slot returns the memo slot named name, the same for every caller that
// names it (a phone number's slot, a body field's), so two rules that need
// one value resolve it once per request (Scratch.Memo). Names are the
// feature's own, prefixed by its name ("otp.phone").
func (c *Compiler) Slot(name string) int {
	if i, ok := c.slots[name]; ok {
		return i
	}
	i := len(c.slots)
	c.slots[name] = i
	c.p.slots = i + 1
	return i
}

// State returns the value named name for this compile, made by init the
// first time it is asked for: a feature's own bookkeeping across its
// blocks and rules (the names its attributes refer to, checked once every
// rule is compiled: Feature.PolicyDone). Names are the feature's own,
// prefixed by its name ("skip.rules"), as Slot's.
func (c *Compiler) State(name string, init func() any) any {
	if v, ok := c.states[name]; ok {
		return v
	}
	if c.states == nil {
		c.states = map[string]any{}
	}
	v := init()
	c.states[name] = v
	return v
}

// RuleAttr returns attribute name of r's rule block as written, rules' own
// or a feature's, or nil when the block does not write it (or r is not a
// rule of this compile): a feature's diagnostic may point at an attribute
// it does not own (a skip rule's dry_run). Its value may be one the
// compile refused: what it means is r's (Rule.Action, Rule.DryRun).
func (c *Compiler) RuleAttr(r *Rule, name string) *hcl.Attribute {
	rb := c.blocks[r]
	if rb == nil || rb.body == nil {
		return nil
	}
	content, _, _ := rb.body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: name}}})
	if content == nil {
		return nil
	}
	return content.Attributes[name]
}

// ReadsHeader records that the policy reads request header name (a key's
// header:NAME, an identity's header source): the edge then forwards it only
// under the spelling read (Policy.HeaderNames, docs/host-and-path.md §3).
func (c *Compiler) ReadsHeader(name string) {
	for _, have := range c.p.headerNames {
		if strings.EqualFold(have, name) {
			return
		}
	}
	c.p.headerNames = append(c.p.headerNames, name)
}

// AddRequestHook adds h to every request of the policy (RequestHook).
// A RequestGater's GateRequest and AdmitRequest run in the gate phase (a
// known { } block's, a ban of ban_scope = "sensitive"), an Admitter's
// Admit at its end (load shedding), a RequestSettler's AfterOrigin in
// Engine.Settle.
func (c *Compiler) AddRequestHook(h RequestHook) {
	c.p.requestHooks = append(c.p.requestHooks, h)
	if rg, ok := h.(RequestGater); ok {
		c.p.requestGaters = append(c.p.requestGaters, rg)
		c.p.gates = true
	}
	if rs, ok := h.(RequestSettler); ok {
		c.p.requestSettlers = append(c.p.requestSettlers, rs)
	}
	if a, ok := h.(Admitter); ok {
		c.p.admitters = append(c.p.admitters, a)
	}
}

// SetValue keeps v as the policy's value of the feature named name, one
// that has no block of its own to keep it (Policy.Value): what
// behaviour/shed compiles of load_shedding { }.
func (c *Compiler) SetValue(name string, v any) {
	if c.p.values == nil {
		c.p.values = map[string]any{}
	}
	c.p.values[name] = v
}

// AddKeyBudget adds b, a feature's key budget in the memory store
// (keybudget.Shared, Fixed, Like or Following: the visitor mint budget, a
// known block's, ban_by's guilt markers), to the policy, and returns it.
// Its MaxKeys and NetworkKeys are set once the policy is compiled
// (keyBudgets, networkShares).
func (c *Compiler) AddKeyBudget(b *Budget) *Budget {
	c.p.budgets = append(c.p.budgets, b)
	return b
}

// content splits the file into its top-level blocks by the schema of
// rules' blocks and the features'. Each block is decoded on its own later,
// so a type error in one (limit = "5") does not hide the others' errors.
func (c *Compiler) content(body hcl.Body) *hcl.BodyContent {
	schema := &hcl.BodySchema{}
	for _, t := range c.reg.first { // the node's blocks first, as they compile
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: t, LabelNames: c.reg.blocks[t][0].Labels})
	}
	schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: "rule", LabelNames: []string{"name"}})
	types := make([]string, 0, len(c.reg.blocks))
	for t, owners := range c.reg.blocks {
		if !owners[0].First {
			types = append(types, t)
		}
	}
	sort.Strings(types)
	for _, t := range types {
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: t, LabelNames: c.reg.blocks[t][0].Labels})
	}
	content, diags := body.Content(schema)
	c.diags = append(c.diags, diags...)
	return content
}

// sortDiags orders diagnostics by file position, so they read top to
// bottom; those without a position come first, and diagnostics at one
// position keep the order they were found in (the compiler walks the file
// in order and never a map, so the output is the same every run).
func sortDiags(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Start.Line != b.Start.Line:
			return a.Start.Line < b.Start.Line
		}
		return a.Start.Column < b.Start.Column
	})
}

// compile compiles the policy's blocks in the order each needs the ones
// before: the features' blocks (the node's edge and store first, whose
// settings are final when the others decode theirs; known { } last, whose
// characteristics read the others), the rules, then what spans rules (the
// features' PolicyDone: skip lists, known blocks' requires, load_shedding,
// the rules under decide_listen (package node); key budgets, network
// shares).
func (c *Compiler) compile(body hcl.Body) *Policy {
	p := defaultPolicy(c.filename)
	c.p = p
	top := c.decodeBlocks(c.content(body))
	c.featureBlocks(top.feature)
	c.ruleBlocks(top.rules)
	for _, done := range c.reg.policyDone {
		done(c) // Feature.PolicyDone: decide_listen, skip lists' names, known blocks' requires, load_shedding
	}
	keyBudgets(p)
	c.networkShares(p)              // network.go
	c.diags = c.dec.Filter(c.diags) // what the items left out made suspect (decode.go)
	return p
}

// defaultPolicy is the policy of an empty file named filename: every
// default of the policy language (docs/policy.md).
func defaultPolicy(filename string) *Policy {
	return &Policy{Filename: filename, Node: DefaultNode(), blocks: map[string][]any{}}
}

// topBlocks are a file's top-level blocks, those of rules decoded (the
// ones that decode without error, in file order) and the features' as
// written.
type topBlocks struct {
	rules   []ruleBlock
	feature []*hcl.Block
}

// decodeBlocks decodes each of rules' blocks in content on its own.
func (c *Compiler) decodeBlocks(content *hcl.BodyContent) topBlocks {
	var top topBlocks
	for _, b := range content.Blocks {
		var label string
		var labelRange hcl.Range
		if len(b.Labels) > 0 {
			label, labelRange = b.Labels[0], b.LabelRanges[0]
		}
		switch b.Type {
		case "rule":
			var x ruleBlock
			if c.Decode(b, &x) {
				x.Name, x.NameRange, x.DefRange, x.body = label, labelRange, b.DefRange, b.Body
				top.rules = append(top.rules, x)
			}
		default:
			top.feature = append(top.feature, b)
		}
	}
	return top
}

// featureBlocks decodes the features' blocks before any rule needs them:
// those of the First types (the node's edge and store) first, type by
// type in the order the features list them, then the others in file
// order, those of the Last types (known) after them. A second block of a
// type that allows one is an error, and a block of a type several
// features share is split among them (sharedBlock).
func (c *Compiler) featureBlocks(feature []*hcl.Block) {
	first := map[string]hcl.Range{}
	for _, t := range c.reg.first {
		for _, b := range feature {
			if b.Type == t {
				c.featureBlock(b, first)
			}
		}
	}
	for _, last := range []bool{false, true} {
		for _, b := range feature {
			if bt := c.reg.blocks[b.Type][0]; !bt.First && bt.Last == last {
				c.featureBlock(b, first)
			}
		}
	}
}

// featureBlock decodes one feature block; first holds where each type's
// first block is.
func (c *Compiler) featureBlock(b *hcl.Block, first map[string]hcl.Range) {
	p := c.p
	owners := c.reg.blocks[b.Type]
	if prev, dup := first[b.Type]; dup && !owners[0].Multiple {
		c.Errorf(b.DefRange, "Duplicate "+b.Type+" block", "only one %s block is allowed; the first is at %s", b.Type, prev)
		return
	}
	first[b.Type] = b.DefRange
	if len(owners[0].Attrs) == 0 {
		if v := owners[0].Decode(c, b); v != nil {
			p.blocks[b.Type] = append(p.blocks[b.Type], v)
		}
		return
	}
	for i, view := range c.sharedBlock(b, owners) {
		if v := owners[i].Decode(c, view); v != nil {
			p.blocks[b.Type] = append(p.blocks[b.Type], v)
		}
	}
}

// ruleBlocks compiles the rule blocks into the policy's rules, in file
// order (a rule's Index is its position), after reporting a second rule
// of one name.
func (c *Compiler) ruleBlocks(rbs []ruleBlock) {
	p := c.p
	seen := map[string]hcl.Range{}
	for i := range rbs {
		rb := &rbs[i]
		if prev, dup := seen[rb.Name]; dup {
			c.Errorf(rb.NameRange, "Duplicate rule", "a rule named %q is already defined at %s", rb.Name, prev)
			continue
		}
		seen[rb.Name] = rb.DefRange
		r := c.rule(rb, p)
		if r == nil {
			continue
		}
		r.Index = len(p.Rules)
		p.Rules = append(p.Rules, r)
		if r.Sensitive {
			p.Sensitive = true
		}
		if r.Action == ActionSkip && len(r.exempters) > 0 {
			p.exempters = append(p.exempters, r)
		}
		p.gates = p.gates || len(r.gates) > 0
		p.holds = p.holds || len(r.holders) > 0
	}
}

// sharedBlock splits a block of a shared type among its owners
// (hcldecode.Split), decoding on_conflict when they own identities, and
// returns each owner's view of it, nil when it has no content.
func (c *Compiler) sharedBlock(b *hcl.Block, owners []*BlockType) []*hcl.Block {
	attrs := make([][]string, len(owners))
	for i, o := range owners {
		attrs[i] = o.Attrs
	}
	var extra []string
	identities := identityNames(owners)
	if len(identities) > 0 {
		extra = []string{"on_conflict"}
	}
	content, views, diags := hcldecode.Split(b, attrs, extra...)
	c.diags = append(c.diags, diags...)
	if content != nil && content.Attributes["on_conflict"] != nil && len(identities) > 0 {
		c.onConflict(content.Attributes["on_conflict"], identities, content.Attributes) // values.go
	}
	return views
}

// keyBudgets shares the store's max_keys out (keybudget.Split) among the
// counting rules that set no max_keys (a node-local limit holds no key)
// and the features' budgets (docs/memory-store.md).
func keyBudgets(p *Policy) {
	var shares []*int
	for _, r := range p.Rules {
		if r.counts() && !r.maxKeysSet && r.local == nil {
			shares = append(shares, &r.MaxKeys)
		}
	}
	keybudget.Split(p.Keys.MaxKeys, shares, p.budgets)
}
