package gateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// The concrete stores fit the gateway's seams: a memory store's key
// budgets are exported (KeyBudgets), a Redis store shares the fleet's
// hashes (Fleet).
var (
	_ KeyBudgets = (*memstore.Store)(nil)
	_ Fleet      = (*redisstore.Store)(nil)
)

// TestGatewayImportsNoFeatureOrStore: neither gateway nor its extension
// seam (gateway/ext) depends on a feature or a concrete store, however
// indirectly (docs/architecture.md, "Packages"): cmd/edge wires them in,
// through builtin.Extensions and the store it opens. Of this module they
// may depend on rules and what it imports, node, gateway/ext and the
// behaviours whose part of the answer the gateway writes, nothing else.
// Tests are not counted (go list -deps leaves them out): they may build a
// real node.
func TestGatewayImportsNoFeatureOrStore(t *testing.T) {
	const module = "github.com/edge-gateway/edge/"
	allowed := map[string]bool{"gateway": true, "gateway/ext": true, "rules": true, "rules/counter": true, "rules/hclattr": true, "rules/hcldecode": true, "route": true, "ipv6": true, "node": true,
		"behaviour/refusal": true, "behaviour/calendar": true, "behaviour/cost": true, "behaviour/adaptive": true,
		"behaviour/shed": true}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to list the imports with")
		}
	}
	for pkg, name := range map[string]string{".": "gateway", "./ext": "gateway/ext"} {
		out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for dep := range strings.Lines(string(out)) {
			own, ok := strings.CutPrefix(strings.TrimSpace(dep), module)
			if !ok || strings.HasPrefix(own, "internal/") {
				continue // the standard library, a dependency, or this module's internal helpers
			}
			if !allowed[own] {
				t.Errorf("%s depends on %s: a feature, a store or a package the seam should hide", name, own)
			}
			if pkg == "./ext" && own == "gateway" {
				t.Errorf("gateway/ext depends on gateway: the features that import it would import the gateway")
			}
		}
	}
}

// TestNewRefusesNilExtensions: a gateway built without saying which
// extensions it has would serve a visitor block with no cookie, a ja4 key
// with no fingerprint and a botscore block with no score, silently, so New
// refuses a nil list and names the fix; an empty list is a gateway that
// means to have none.
func TestNewRefusesNilExtensions(t *testing.T) {
	p, diags := builtin.Load("p.hcl", []byte(`rule "r" {
  key   = ["ip"]
  limit = 1
  period = "1s"
}`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	st, err := memstore.New(memstore.Options{MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Policy: p, Store: st}); err == nil || !strings.Contains(err.Error(), "Options.Extensions is nil: pass builtin.Extensions()") {
		t.Errorf("New without Extensions: %v, want it refused, naming builtin.Extensions", err)
	}
	if _, err := New(Options{Policy: p, Store: st, Extensions: []ext.Extension{}}); err != nil {
		t.Errorf("New with an empty list: %v", err)
	}
}
