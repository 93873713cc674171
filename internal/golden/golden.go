// Package golden runs diagnostics golden files, for tests only: each
// testdata/*.txtar holds a policies.hcl and the diagnostics compiling it
// must produce (a want section, one Diagnostic.Error() line each, the form
// `edge validate` prints). rules and node each keep the files of the
// blocks they compile, policytest those of test blocks; the format is modelled on caddy's
// caddyfile_adapt/*.caddyfiletest.
package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/tools/txtar"
)

// Lines is diags one Diagnostic.Error() line each, as a want section
// holds them.
func Lines(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(d.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// Run runs every file pattern matches (at least one), each as a subtest:
// load compiles its policies.hcl (named "policies.hcl"; t is the
// subtest's) and its diagnostics must read as its want section. With
// update, the want sections are rewritten instead.
func Run(t *testing.T, pattern string, update bool, load func(t *testing.T, filename string, src []byte) hcl.Diagnostics) {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Fatalf("no golden files match %s", pattern)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var src []byte
			wantIdx := -1
			for i, f := range ar.Files {
				switch f.Name {
				case "policies.hcl":
					src = f.Data
				case "want":
					wantIdx = i
				}
			}
			if src == nil || wantIdx < 0 {
				t.Fatal("want sections policies.hcl and want")
			}
			got := Lines(load(t, "policies.hcl", src))
			if update {
				ar.Files[wantIdx].Data = []byte(got)
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want := string(ar.Files[wantIdx].Data); got != want {
				t.Errorf("got diagnostics:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
