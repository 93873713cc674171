package refusal_test

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// diagLines is each diagnostic in Diagnostic.Error() form, one a line.
func diagLines(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(d.Error())
		b.WriteByte('\n')
	}
	return b.String()
}
