package rules

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Decoding a block so that one wrong value does not hide the block's
// other errors is package hcldecode's: the Compiler holds its Decoder
// (Compiler.dec), and Load drops what the Decoder's taints make suspect
// (hcldecode.Decoder.Filter) once the policy is compiled.

// Decode is hcldecode.Decoder.Block, recorded: it decodes block b's body
// into v, a pointer to a gohcl block struct, and reports whether v holds
// the block, all of it or the items that decode (what the compile then
// says only because of the others is dropped).
func (c *Compiler) Decode(b *hcl.Block, v any) bool {
	diags, ok := c.dec.Block(b, v)
	c.diags = append(c.diags, diags...)
	return ok
}

// DecodeInRule decodes b, a feature's block inside the rule block being
// compiled (RuleBlockType), into v, a pointer to a gohcl block struct, and
// reports whether v holds it. With errors it records them and leaves the
// block out as Decode leaves out a rule's own item that does not decode:
// the caller compiles nothing of it, and what the rule's compile then says
// only because the block is missing is dropped.
func (c *Compiler) DecodeInRule(b *hcl.Block, v any) bool {
	if c.decoded(gohcl.DecodeBody(b.Body, nil, v)) {
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
	if c.decoded(gohcl.DecodeExpression(attr.Expr, nil, v)) {
		return true
	}
	c.leaveOut(c.blocks[r], attr.Name, attr.Range)
	return false
}

// decoded records gohcl's own diagnostics, which the taints never drop
// (hcldecode.Decoder.Own), and reports whether they hold no error.
func (c *Compiler) decoded(diags hcl.Diagnostics) bool {
	return c.Append(c.dec.Own(diags))
}

// leaveOut records that the item of rule block rb named name (a feature's
// attribute or block) that starts where at does is left out of the
// compile, as Decode leaves out an item that does not decode
// (hcldecode.Decoder.LeaveOut). A nil rb records nothing.
func (c *Compiler) leaveOut(rb *ruleBlock, name string, at hcl.Range) {
	if rb == nil {
		return
	}
	if body, ok := rb.body.(*hclsyntax.Body); ok {
		c.dec.LeaveOut(rb.DefRange, body, []hcl.Range{rb.NameRange}, name, at)
	}
}
