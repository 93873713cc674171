package rules

import (
	"reflect"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Decoding a block so that one wrong value does not hide the block's other
// errors. gohcl.DecodeBody reports every attribute it cannot decode (a
// value of the wrong type, limit = "five"; an attribute or a nested block
// the schema lacks), but the block it leaves behind is unusable, so the
// compile of the block's other values, where their value errors (an
// unknown algorithm, a bad duration) are found, used to wait for the next
// run: one broken file took a round per kind of error (issue 25, §2.5).
// Decode instead decodes the block again without the items those errors
// point at, as if they were not written, and compiles the rest; what that
// compile says only because of the items left out is dropped (taint), so
// the one run reports every error it can without inventing any (hcl
// guide/go_diagnostics.rst: collect every diagnostic, return early only
// when continuing is unsafe).

// taint is a block decoded without some of its items.
type taint struct {
	block hcl.Range   // the whole block, from its type to its closing brace
	kept  []hcl.Range // the items decoded, and the block's labels
	names []string    // the attributes and block types left out
}

// Decode decodes the block b's body into v, a pointer to a gohcl block
// struct, records gohcl's diagnostics, and reports whether v holds the
// block. With errors in some of the body's own attributes or nested
// blocks, it decodes the body again without them (v then holds the others
// and their zero values, as if they were not written) and reports true;
// the diagnostics the policy's compile then records inside the block,
// outside the items decoded or naming an item left out, are dropped, since
// they would be about what was left out (a missing period where the period
// had the wrong type). When an error is not in one of the body's items (a
// missing required argument), or the second decode fails too, it reports
// false: the block is not compiled, as before.
func (c *Compiler) Decode(b *hcl.Block, v any) bool {
	diags := gohcl.DecodeBody(b.Body, nil, v)
	c.appendDecoded(diags)
	if !diags.HasErrors() {
		return true
	}
	body, ok := b.Body.(*hclsyntax.Body)
	if !ok {
		return false
	}
	t := taint{block: hcl.RangeBetween(b.DefRange, body.SrcRange)}
	hide := &hcl.BodySchema{}
	hidden := map[string]bool{}
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if d.Subject == nil {
			return false
		}
		name, header := itemAt(body, d.Subject.Start.Byte)
		if name == "" {
			return false
		}
		if hidden[name] {
			continue
		}
		hidden[name] = true
		t.names = append(t.names, name)
		if header == nil {
			hide.Attributes = append(hide.Attributes, hcl.AttributeSchema{Name: name})
		} else {
			hide.Blocks = append(hide.Blocks, *header)
		}
	}
	_, remain, _ := body.PartialContent(hide)
	rv := reflect.ValueOf(v).Elem()
	rv.SetZero()
	if gohcl.DecodeBody(remain, nil, v).HasErrors() {
		rv.SetZero()
		return false
	}
	t.kept = append(t.kept, b.LabelRanges...)
	for name, a := range body.Attributes {
		if !hidden[name] {
			t.kept = append(t.kept, a.SrcRange)
		}
	}
	for _, nb := range body.Blocks {
		if !hidden[nb.Type] {
			t.kept = append(t.kept, nb.Range())
		}
	}
	c.taints = append(c.taints, t)
	return true
}

// DecodeInRule decodes b, a feature's block inside the rule block being
// compiled (RuleBlockType), into v, a pointer to a gohcl block struct, and
// reports whether v holds it. With errors it records them and leaves the
// block out as Decode leaves out a rule's own item that does not decode:
// the caller compiles nothing of it, and what the rule's compile then says
// only because the block is missing is dropped.
func (c *Compiler) DecodeInRule(b *hcl.Block, v any) bool {
	diags := gohcl.DecodeBody(b.Body, nil, v)
	c.appendDecoded(diags)
	if !diags.HasErrors() {
		return true
	}
	c.leaveOut(c.cur, b.Type, b.DefRange)
	return false
}

// DecodeRuleAttr decodes attr, a feature's attribute of r's rule block
// (RuleAttrType.Compile's), into v, a pointer as for
// gohcl.DecodeExpression, records gohcl's diagnostics, and reports whether
// it decoded. An attribute that does not decode is left out of r's block
// as Decode leaves out one of rules' own: the diagnostics the compile then
// records inside the block, outside the items decoded or naming attr, are
// dropped (a missing limit beside a known_visitors of the wrong type).
func (c *Compiler) DecodeRuleAttr(r *Rule, attr *hcl.Attribute, v any) bool {
	diags := gohcl.DecodeExpression(attr.Expr, nil, v)
	c.appendDecoded(diags)
	if !diags.HasErrors() {
		return true
	}
	c.leaveOut(c.blocks[r], attr.Name, attr.Range)
	return false
}

// leaveOut records that the item of rule block rb named name (a
// feature's attribute or block) that starts where at does is left out of
// the compile, as Decode leaves out an item that does not decode: the
// rule block's taint (a new one, or Decode's) names it and no longer keeps
// it. A nil rb records nothing.
func (c *Compiler) leaveOut(rb *ruleBlock, name string, at hcl.Range) {
	if rb == nil {
		return
	}
	body, ok := rb.body.(*hclsyntax.Body)
	if !ok {
		return
	}
	whole := hcl.RangeBetween(rb.DefRange, body.SrcRange)
	in := func(r hcl.Range) bool { return r.ContainsOffset(at.Start.Byte) }
	for i := range c.taints {
		if t := &c.taints[i]; t.block == whole {
			t.names = append(t.names, name)
			t.kept = slices.DeleteFunc(t.kept, in)
			return
		}
	}
	t := taint{block: whole, names: []string{name}, kept: []hcl.Range{rb.NameRange}}
	for _, a := range body.Attributes {
		if !in(a.SrcRange) {
			t.kept = append(t.kept, a.SrcRange)
		}
	}
	for _, nb := range body.Blocks {
		if !in(nb.Range()) {
			t.kept = append(t.kept, nb.Range())
		}
	}
	c.taints = append(c.taints, t)
}

// itemAt returns the name of the attribute, or the type of the nested
// block, of body that holds the byte offset, with the block's header
// schema for a block; "" when none does.
func itemAt(body *hclsyntax.Body, offset int) (string, *hcl.BlockHeaderSchema) {
	for name, a := range body.Attributes {
		if a.SrcRange.ContainsOffset(offset) {
			return name, nil
		}
	}
	for _, nb := range body.Blocks {
		if nb.Range().ContainsOffset(offset) {
			labels := make([]string, len(nb.Labels))
			for i := range labels {
				labels[i] = "label"
			}
			return nb.Type, &hcl.BlockHeaderSchema{Type: nb.Type, LabelNames: labels}
		}
	}
	return "", nil
}

// appendDecoded records gohcl's own diagnostics, which the taints never
// drop: they are the errors that made the taints.
func (c *Compiler) appendDecoded(diags hcl.Diagnostics) {
	if c.decoded == nil {
		c.decoded = map[*hcl.Diagnostic]bool{}
	}
	for _, d := range diags {
		c.decoded[d] = true
	}
	c.diags = append(c.diags, diags...)
}

// dropTainted removes from the compile's diagnostics those a taint makes
// suspect: inside a partly decoded block but outside the items decoded
// (what the compile says of the block as a whole, such as a missing
// period), or naming an item the block left out, whether inside the block
// or without a position.
func (c *Compiler) dropTainted() {
	if len(c.taints) == 0 {
		return
	}
	c.diags = slices.DeleteFunc(c.diags, func(d *hcl.Diagnostic) bool {
		if c.decoded[d] {
			return false
		}
		for _, t := range c.taints {
			if d.Subject == nil {
				if mentions(d, t.names) {
					return true
				}
				continue
			}
			if d.Subject.Filename != t.block.Filename || !t.block.ContainsOffset(d.Subject.Start.Byte) {
				continue
			}
			if mentions(d, t.names) || !slices.ContainsFunc(t.kept, func(r hcl.Range) bool { return r.ContainsOffset(d.Subject.Start.Byte) }) {
				return true
			}
		}
		return false
	})
}

// mentions reports whether d's summary or detail names one of names as a
// word of its own (limit, not rate_limit or limits).
func mentions(d *hcl.Diagnostic, names []string) bool {
	for _, n := range names {
		if hasWord(d.Summary, n) || hasWord(d.Detail, n) {
			return true
		}
	}
	return false
}

func hasWord(s, w string) bool {
	word := func(b byte) bool {
		return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] != w {
			continue
		}
		if (i == 0 || !word(s[i-1])) && (i+len(w) == len(s) || !word(s[i+len(w)])) {
			return true
		}
	}
	return false
}
