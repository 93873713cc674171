package hcldecode

import (
	"slices"
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules/hclattr"
)

// Item is one attribute or one nested block of a body, the other nil.
type Item struct {
	Attr  *hcl.Attribute
	Block *hcl.Block
}

// InOrder returns content's attributes and blocks in the order they are
// written, so that their compile reports in that order and never in a
// map's. A second block of a type for which multiple reports false (nil:
// none may repeat) is an error, as gohcl reports one, and is left out.
func InOrder(content *hcl.BodyContent, multiple func(typ string) bool) ([]Item, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	items := make([]Item, 0, len(content.Attributes)+len(content.Blocks))
	for _, a := range content.Attributes {
		items = append(items, Item{Attr: a})
	}
	first := map[string]*hcl.Block{}
	for _, b := range content.Blocks {
		if prev := first[b.Type]; prev != nil && (multiple == nil || !multiple(b.Type)) {
			diags = append(diags, hclattr.Errorf(b.DefRange, "Duplicate "+b.Type+" block", "Only one %s block is allowed. Another was defined at %s.", b.Type, prev.DefRange.String()))
			continue
		}
		first[b.Type] = b
		items = append(items, Item{Block: b})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].start() < items[j].start() })
	return items, diags
}

// start is where the item starts, in bytes.
func (it Item) start() int {
	if it.Attr != nil {
		return it.Attr.Range.Start.Byte
	}
	return it.Block.DefRange.Start.Byte
}

// Split splits block b, of a type several owners share, among them:
// attrs[i] are owner i's attribute names, extra those the caller reads
// itself (on_conflict). It returns the block's content under all of them
// (nil when it has none) with a diagnostic, once, for every attribute no
// one lists (suggesting among them) and any nested block; and each
// owner's view of b, with only its own attributes in view, so that it
// decodes them with a plain gohcl struct and sees nothing else.
func Split(b *hcl.Block, attrs [][]string, extra ...string) (content *hcl.BodyContent, views []*hcl.Block, diags hcl.Diagnostics) {
	names := append(slices.Concat(attrs...), extra...)
	union := &hcl.BodySchema{}
	for _, n := range names {
		union.Attributes = append(union.Attributes, hcl.AttributeSchema{Name: n})
	}
	content, diags = b.Body.Content(union)
	for _, d := range diags {
		hclattr.Unsupported(d, names, nil)
	}
	if content == nil {
		return nil, nil, diags
	}
	all, _ := b.Body.JustAttributes() // every attribute written, known or not (reported above)
	for _, own := range attrs {
		// Hide every attribute present that is not the owner's.
		hide := &hcl.BodySchema{}
		for name := range all {
			if !slices.Contains(own, name) {
				hide.Attributes = append(hide.Attributes, hcl.AttributeSchema{Name: name})
			}
		}
		_, remain, _ := b.Body.PartialContent(hide)
		view := *b
		view.Body = remain
		views = append(views, &view)
	}
	return content, views, diags
}
