package hcldecode

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parse parses src's one block.
func parse(t *testing.T, src string) *hcl.Block {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "t.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	content, _, _ := f.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "b"}}})
	return content.Blocks[0]
}

// TestInOrder: attributes and blocks come back in the order written, a
// second block of a type that may not repeat is an error and left out.
func TestInOrder(t *testing.T) {
	b := parse(t, "b {\n  z = 1\n  once {}\n  a = 2\n  many {}\n  once {}\n  many {}\n}\n")
	content, diags := b.Body.Content(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "a"}, {Name: "z"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "once"}, {Type: "many"}},
	})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	items, diags := InOrder(content, func(typ string) bool { return typ == "many" })
	var got []string
	for _, it := range items {
		if it.Attr != nil {
			got = append(got, it.Attr.Name)
		} else {
			got = append(got, it.Block.Type)
		}
	}
	if strings.Join(got, " ") != "z once a many many" {
		t.Errorf("got %v, want z once a many many", got)
	}
	if len(diags) != 1 || diags[0].Summary != "Duplicate once block" || diags[0].Subject.Start.Line != 6 {
		t.Errorf("got %v, want the second once block's duplicate", diags)
	}
}

// TestSplit: each owner sees only its own attributes; one no owner lists
// is reported once, with the nearest of them.
func TestSplit(t *testing.T) {
	b := parse(t, "b {\n  x = 1\n  y = 2\n  on_conflict = \"count\"\n  on_conflit = 3\n}\n")
	content, views, diags := Split(b, [][]string{{"x"}, {"y"}}, "on_conflict")
	if len(diags) != 1 || diags[0].Summary != "Unsupported argument" || !strings.HasSuffix(diags[0].Detail, `Did you mean "on_conflict"?`) {
		t.Errorf("got %v, want on_conflit unsupported, suggesting on_conflict", diags)
	}
	if content == nil || content.Attributes["on_conflict"] == nil || len(views) != 2 {
		t.Fatalf("got %v and %d views", content, len(views))
	}
	for i, want := range []string{"x", "y"} {
		attrs, _ := views[i].Body.JustAttributes()
		if len(attrs) != 1 || attrs[want] == nil {
			t.Errorf("owner %d sees %v, want %s alone", i, attrs, want)
		}
	}
}
