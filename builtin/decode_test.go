package builtin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/edge-gateway/edge/builtin"
)

// TestLoadSurvivesAWrongValueAnywhere: the shipped policy and every fixture,
// each attribute in turn (in every block, nested ones too) given a value of
// no type any attribute takes ({ x = [[true]] }, an object of a list of
// lists), loads without a panic and with an error. A block with a value
// gohcl cannot decode is compiled without it (rules.Compiler.Decode), so
// a block's compile meets each of its attributes missing; this walks each
// attribute the files hold once.
func TestLoadSurvivesAWrongValueAnywhere(t *testing.T) {
	files, _ := filepath.Glob("../testdata/fixtures/policies/*.hcl")
	files = append(files, "../policies.hcl")
	const wrong = "{ x = [[true]] }"
	// Each block type's attribute once, in the first file that has it
	// (edge.load_shedding.max_in_flight, rule.limit, …): its compile does
	// not depend on which rule it is in.
	seen := map[string]bool{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f, diags := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			var attrs []*hclsyntax.Attribute
			var walk func(path string, b *hclsyntax.Body)
			walk = func(path string, b *hclsyntax.Body) {
				for _, a := range b.Attributes {
					if k := path + a.Name; !seen[k] {
						seen[k] = true
						attrs = append(attrs, a)
					}
				}
				for _, nb := range b.Blocks {
					if nb.Type != "test" { // test blocks are policytest's
						walk(path+nb.Type+".", nb.Body)
					}
				}
			}
			walk("", f.Body.(*hclsyntax.Body))
			for _, a := range attrs {
				r := a.Expr.Range()
				mutated := string(src[:r.Start.Byte]) + wrong + string(src[r.End.Byte:])
				p, diags := builtin.Load(file, []byte(mutated))
				if !diags.HasErrors() || p != nil {
					t.Errorf("%s = %s at %s: no error (policy %v)", a.Name, wrong, r, p != nil)
				}
			}
		})
	}
}
