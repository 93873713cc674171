package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// docsWithHCL are the documents whose ```hcl blocks TestDocsHCLCompiles
// reads, relative to the repository's root.
var docsWithHCL = []string{"README.md", "docs/policy.md", "docs/deploying.md", "docs/operations.md", "docs/attacks.md", "docs/memory-store.md", "docs/architecture.md"}

// hclBlock is a ```hcl block of a document: where it starts (the line
// after its fence) and the marker of the line before the fence ("" for
// none, or what follows "<!-- hcl: ").
type hclBlock struct {
	doc    string
	line   int
	marker string
	src    string
}

// hclBlocks returns every ```hcl block of the document at path.
func hclBlocks(t *testing.T, root, doc string) []hclBlock {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	var out []hclBlock
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```hcl" {
			continue
		}
		b := hclBlock{doc: doc, line: i + 2}
		if i > 0 {
			if m, ok := strings.CutPrefix(strings.TrimSpace(lines[i-1]), "<!-- hcl: "); ok {
				b.marker = strings.TrimSuffix(m, " -->")
			}
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		b.src = strings.Join(lines[i+1:j], "\n") + "\n"
		out = append(out, b)
		i = j
	}
	return out
}

// TestDocsHCLCompiles: every ```hcl block of the docs is a policy that
// compiles without an error, as `edge validate` would read it, unless the
// line before its fence says otherwise (docs/README.md, "Examples that
// run"): "<!-- hcl: fragment -->" for a block that leans on blocks or
// files shown elsewhere, which must still parse; "<!-- hcl: sketch -->"
// for one that elides with "...", which is not read.
func TestDocsHCLCompiles(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, doc := range docsWithHCL {
		for _, b := range hclBlocks(t, root, doc) {
			name := fmt.Sprintf("%s:%d", b.doc, b.line)
			switch b.marker {
			case "":
				n++
				if _, diags := Load(filepath.Join(t.TempDir(), "policies.hcl"), []byte(b.src)); diags.HasErrors() {
					t.Errorf("%s: a ```hcl block that does not compile (mark it <!-- hcl: fragment --> if it leans on blocks shown elsewhere):\n%s", name, diags.Error())
				}
			case "fragment":
				n++
				if _, diags := hclsyntax.ParseConfig([]byte(b.src), name, hcl.InitialPos); diags.HasErrors() {
					t.Errorf("%s: a fragment that does not parse:\n%s", name, diags.Error())
				}
			case "sketch":
			default:
				t.Errorf("%s: unknown marker %q (want fragment or sketch)", name, b.marker)
			}
		}
	}
	if n == 0 {
		t.Fatal("no ```hcl block read: the documents moved?")
	}
}
