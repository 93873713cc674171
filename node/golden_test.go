package node_test

import (
	"flag"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the want sections of testdata/*.txtar")

// TestDiagnosticsGolden runs node/testdata/*.txtar: the edge and store
// blocks' diagnostics, one Diagnostic.Error() line each, as the whole
// policy language compiles them (builtin.Load). go test -run Golden
// -update rewrites the want sections.
func TestDiagnosticsGolden(t *testing.T) {
	golden.Run(t, "testdata/*.txtar", *update, func(_ *testing.T, filename string, src []byte) hcl.Diagnostics {
		_, diags := builtin.Load(filename, src)
		return diags
	})
}
