package hcldecode

import (
	"reflect"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Decoder decodes the blocks of one compile and remembers which it
// decoded without some of their items (taints) and which diagnostics
// were gohcl's own. The zero Decoder is ready to use.
type Decoder struct {
	taints  []taint
	decoded map[*hcl.Diagnostic]bool
}

// taint is a block decoded without some of its items.
type taint struct {
	block hcl.Range   // the whole block, from its type to its closing brace
	kept  []hcl.Range // the items decoded, and the block's labels
	names []string    // the attributes and block types left out
}

// Own marks diags as gohcl's own, the errors that leave items out, which
// Filter never drops, and returns them.
func (d *Decoder) Own(diags hcl.Diagnostics) hcl.Diagnostics {
	if d.decoded == nil {
		d.decoded = map[*hcl.Diagnostic]bool{}
	}
	for _, x := range diags {
		d.decoded[x] = true
	}
	return diags
}

// Block decodes the block b's body into v, a pointer to a gohcl block
// struct, and returns gohcl's diagnostics (Own) and whether v holds the
// block. With errors in some of the body's own attributes or nested
// blocks, it decodes the body again without them (v then holds the others
// and their zero values, as if they were not written) and reports true;
// Filter then drops the diagnostics the caller's compile records inside
// the block, outside the items decoded or naming an item left out, since
// they would be about what was left out (a missing period where the
// period had the wrong type). When an error is not in one of the body's
// items (a missing required argument), or the second decode fails too,
// it reports false and v is zero.
func (d *Decoder) Block(b *hcl.Block, v any) (hcl.Diagnostics, bool) {
	diags := d.Own(gohcl.DecodeBody(b.Body, nil, v))
	if !diags.HasErrors() {
		return diags, true
	}
	body, ok := b.Body.(*hclsyntax.Body)
	if !ok {
		return diags, false
	}
	t := taint{block: hcl.RangeBetween(b.DefRange, body.SrcRange)}
	hide := &hcl.BodySchema{}
	hidden := map[string]bool{}
	for _, x := range diags {
		if x.Severity != hcl.DiagError {
			continue
		}
		if x.Subject == nil {
			return diags, false
		}
		name, header := ItemAt(body, x.Subject.Start.Byte)
		if name == "" {
			return diags, false
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
		return diags, false
	}
	t.kept = append(t.kept, b.LabelRanges...)
	t.kept = appendKept(t.kept, body, func(name string, _ hcl.Range) bool { return !hidden[name] })
	d.taints = append(d.taints, t)
	return diags, true
}

// LeaveOut records that the item named name (an attribute, or a block's
// type) of the block whose header is at def and whose body is body,
// starting where at does, is left out of the compile as Block leaves out
// an item that does not decode: the block's taint (a new one, whose kept
// items start with labels, or Block's) names it and no longer keeps it.
func (d *Decoder) LeaveOut(def hcl.Range, body *hclsyntax.Body, labels []hcl.Range, name string, at hcl.Range) {
	whole := hcl.RangeBetween(def, body.SrcRange)
	in := func(r hcl.Range) bool { return r.ContainsOffset(at.Start.Byte) }
	for i := range d.taints {
		if t := &d.taints[i]; t.block == whole {
			t.names = append(t.names, name)
			t.kept = slices.DeleteFunc(t.kept, in)
			return
		}
	}
	t := taint{block: whole, names: []string{name}, kept: slices.Clone(labels)}
	t.kept = appendKept(t.kept, body, func(_ string, r hcl.Range) bool { return !in(r) })
	d.taints = append(d.taints, t)
}

// appendKept appends to kept the range of each attribute and nested
// block of body that keep accepts, given its name (a block's type).
func appendKept(kept []hcl.Range, body *hclsyntax.Body, keep func(name string, r hcl.Range) bool) []hcl.Range {
	for name, a := range body.Attributes {
		if keep(name, a.SrcRange) {
			kept = append(kept, a.SrcRange)
		}
	}
	for _, nb := range body.Blocks {
		if keep(nb.Type, nb.Range()) {
			kept = append(kept, nb.Range())
		}
	}
	return kept
}

// ItemAt returns the name of the attribute, or the type of the nested
// block, of body that holds the byte offset, with the block's header
// schema for a block; "" when none does.
func ItemAt(body *hclsyntax.Body, offset int) (string, *hcl.BlockHeaderSchema) {
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

// Filter returns diags without those a taint makes suspect: inside a
// partly decoded block but outside the items decoded (what the compile
// says of the block as a whole, such as a missing period), or naming an
// item the block left out, whether inside the block or without a
// position. gohcl's own (Own) are always kept. It may reuse diags.
func (d *Decoder) Filter(diags hcl.Diagnostics) hcl.Diagnostics {
	if len(d.taints) == 0 {
		return diags
	}
	return slices.DeleteFunc(diags, func(x *hcl.Diagnostic) bool {
		if d.decoded[x] {
			return false
		}
		for _, t := range d.taints {
			if x.Subject == nil {
				if mentions(x, t.names) {
					return true
				}
				continue
			}
			if x.Subject.Filename != t.block.Filename || !t.block.ContainsOffset(x.Subject.Start.Byte) {
				continue
			}
			if mentions(x, t.names) || !slices.ContainsFunc(t.kept, func(r hcl.Range) bool { return r.ContainsOffset(x.Subject.Start.Byte) }) {
				return true
			}
		}
		return false
	})
}

// mentions reports whether x's summary or detail names one of names as a
// word of its own (limit, not rate_limit or limits).
func mentions(x *hcl.Diagnostic, names []string) bool {
	for _, n := range names {
		if hasWord(x.Summary, n) || hasWord(x.Detail, n) {
			return true
		}
	}
	return false
}

// hasWord reports whether w occurs in s between non-word bytes (letters,
// digits and _ are word bytes) or s's ends.
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
