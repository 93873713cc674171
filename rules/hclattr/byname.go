package hclattr

import (
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// ByName is an attribute that gives each of a block's names one of its
// Words: a word alone gives it to every name, an object of words by name
// to those it names ({ account = "reject" }), as on_conflict gives a mode
// to each identity of identity { } (docs/policy.md, "identity { }").
type ByName struct {
	// Words are the words a name may get, in the order a diagnostic
	// lists them.
	Words []string
	// Meaning is the detail of a value that is not a string: what each
	// word means.
	Meaning string
	// Kind is what a name is ("identity"), AKind the same with its
	// article ("an identity"), and Example one name, for the
	// diagnostics of an object's keys.
	Kind, AKind, Example string
}

// Decode decodes a, an attribute of a block whose names are names
// (sorted), and calls set, in the order a writes them, for each name a
// gives a word: with the word's index in Words, and the name's key range
// in an object (nil for a word alone, which set then gets for every
// name). It returns what is wrong with a, and what set returns, in order:
// a value that is not one of Words is "Invalid ATTR", a key that is not
// one of names "Unknown KIND" (with the nearest name).
func (b ByName) Decode(a *hcl.Attribute, names []string, set func(name string, word int, key *hcl.Range) hcl.Diagnostics) hcl.Diagnostics {
	var diags hcl.Diagnostics
	word := func(v cty.Value, rng hcl.Range) (int, bool) {
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			diags = append(diags, Errorf(rng, "Invalid "+a.Name, "%s", b.Meaning))
			return 0, false
		}
		i := slices.Index(b.Words, v.AsString())
		if i < 0 {
			diags = append(diags, Errorf(rng, "Invalid "+a.Name, "%q is not %s.%s", v.AsString(), quoteOr(b.Words), Suggest(v.AsString(), b.Words)))
		}
		return i, i >= 0
	}
	if pairs, d := hcl.ExprMap(a.Expr); !d.HasErrors() {
		for _, kv := range pairs {
			name := hcl.ExprAsKeyword(kv.Key)
			if name == "" {
				k, kd := kv.Key.Value(nil)
				if kd.HasErrors() || k.IsNull() || !k.IsKnown() || k.Type() != cty.String {
					diags = append(diags, Errorf(kv.Key.Range(), "Invalid "+a.Name, "%s's name, such as %s", b.AKind, b.Example))
					continue
				}
				name = k.AsString()
			}
			if !slices.Contains(names, name) {
				diags = append(diags, Errorf(kv.Key.Range(), "Unknown "+b.Kind, "%q is not %s of this block; want one of %s.%s", name, b.AKind, strings.Join(names, ", "), Suggest(name, names)))
				continue
			}
			v, vd := kv.Value.Value(nil)
			if diags = append(diags, vd...); vd.HasErrors() {
				continue
			}
			if i, ok := word(v, kv.Value.Range()); ok {
				key := kv.Key.Range()
				diags = append(diags, set(name, i, &key)...)
			}
		}
		return diags
	}
	v, d := a.Expr.Value(nil)
	if diags = append(diags, d...); d.HasErrors() || v.Type().IsObjectType() || v.Type().IsMapType() {
		return diags // an object hcl.ExprMap could not read: reported above
	}
	if i, ok := word(v, a.Expr.Range()); ok {
		for _, n := range names {
			diags = append(diags, set(n, i, nil)...)
		}
	}
	return diags
}
