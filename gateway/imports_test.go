package gateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
// through builtin.Extensions and the store it opens. Tests are not
// counted (go list -deps leaves them out): they may build a real node.
func TestGatewayImportsNoFeatureOrStore(t *testing.T) {
	const module = "github.com/edge-gateway/edge/"
	forbidden := []string{"nat", "botscore", "ja4", "login", "otp", "fields", "builtin", "rules/memstore", "rules/redisstore", "nodestore"}
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
			dep = strings.TrimSpace(dep)
			for _, f := range forbidden {
				if dep == module+f || strings.HasPrefix(dep, module+f+"/") {
					t.Errorf("%s depends on %s", name, dep)
				}
			}
			if pkg == "./ext" && dep == module+"gateway" {
				t.Errorf("gateway/ext depends on gateway: the features that import it would import the gateway")
			}
		}
	}
}
