package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// edgeFmt runs `edge fmt args...` and returns its exit code and output.
func edgeFmt(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"fmt"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func writeTemp(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFmtIsIdempotentOnThePolicy: the shipped policy formatted once is
// canonical: formatting it again changes nothing, -l lists nothing, and it
// is still a valid policy.
func TestFmtIsIdempotentOnThePolicy(t *testing.T) {
	code, once, stderr := edgeFmt(t, filepath.Join(root, "policies.hcl"))
	if code != 0 || once == "" {
		t.Fatalf("edge fmt policies.hcl: exit %d, stderr %s", code, stderr)
	}
	f := writeTemp(t, "policies.hcl", once)
	if code, twice, _ := edgeFmt(t, f); code != 0 || twice != once {
		t.Errorf("formatting twice: exit %d, changed: %v", code, twice != once)
	}
	if code, listed, _ := edgeFmt(t, "-l", f); code != 0 || listed != "" {
		t.Errorf("-l on a formatted file: exit %d, listed %q; want 0 and nothing", code, listed)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"validate", "-config", f}, &out, &errb); code != 0 {
		t.Errorf("the formatted policy does not validate: %s", errb.String())
	}
}

// TestFmtFixesABadlyIndentedCopy: the policy with every line's
// indentation removed is listed by -l (exit 1),
// printed canonical, and rewritten canonical by -w (mode kept), after
// which -l lists nothing.
func TestFmtFixesABadlyIndentedCopy(t *testing.T) {
	_, canonical, _ := edgeFmt(t, filepath.Join(root, "policies.hcl"))
	var bad strings.Builder
	for line := range strings.Lines(canonical) {
		bad.WriteString(strings.TrimLeft(line, " \t"))
	}
	if bad.String() == canonical {
		t.Fatal("the copy is not badly formatted")
	}
	f := writeTemp(t, "bad.hcl", bad.String())

	if code, listed, _ := edgeFmt(t, "-l", f); code != 1 || listed != f+"\n" {
		t.Errorf("-l: exit %d, listed %q; want 1 and %q", code, listed, f+"\n")
	}
	if readString(t, f) != bad.String() {
		t.Fatal("-l changed the file")
	}
	if code, printed, _ := edgeFmt(t, f); code != 0 || printed != canonical {
		t.Errorf("printing: exit %d, canonical: %v", code, printed == canonical)
	}
	if code, listed, _ := edgeFmt(t, "-w", "-l", f); code != 0 || listed != f+"\n" {
		t.Errorf("-w -l: exit %d, listed %q; want 0 and the file", code, listed)
	}
	if got := readString(t, f); got != canonical {
		t.Errorf("-w left:\n%s", got)
	}
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("-w: mode %v (%v), want 0640", fi.Mode().Perm(), err)
	}
	if code, listed, _ := edgeFmt(t, "-l", f); code != 0 || listed != "" {
		t.Errorf("-l after -w: exit %d, listed %q", code, listed)
	}
}

// TestFmtRefusesAFileThatDoesNotParse: diagnostics on stderr, exit 1, the
// file untouched, even with -w; the other files are still formatted.
func TestFmtRefusesAFileThatDoesNotParse(t *testing.T) {
	broken := "rule \"x\" {\n   limit = \n"
	f := writeTemp(t, "broken.hcl", broken)
	good := writeTemp(t, "good.hcl", "rule \"y\" {\nlimit = 1\n}\n")
	code, _, stderr := edgeFmt(t, "-w", f, good)
	if code != 1 || !strings.Contains(stderr, "broken.hcl:") {
		t.Errorf("exit %d, stderr %q; want 1 and a diagnostic naming the file", code, stderr)
	}
	if readString(t, f) != broken {
		t.Error("a file that does not parse was rewritten")
	}
	if got := readString(t, good); got != "rule \"y\" {\n  limit = 1\n}\n" {
		t.Errorf("the parsable file: got %q", got)
	}
}

// TestRepoPoliciesAreFormatted: every policy file of the repository is in
// `edge fmt`'s layout, so `edge fmt -l` lists none of them: policies.hcl,
// the fixture copies under testdata/fixtures/policies/, the load tool's and
// the benchmarks' policies (loadtest/testdata/attacks-hosts.hcl is written
// by make-attacks-hosts.sh, which formats what it writes), and the other
// packages' testdata. Left out: testdata/fixtures/policies/broken/, the
// shared tree's broken files, copied as they are (syntax.hcl does not
// parse), whose lines EXPECTED.md names. And the layout is stable: each
// file with its indentation stripped formats to a text that formatting
// again leaves as it is.
func TestRepoPoliciesAreFormatted(t *testing.T) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || path == filepath.Join(root, "testdata", "fixtures", "policies", "broken")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".hcl") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"policies.hcl", "loadtest/testdata/attacks-hosts.hcl", "testdata/fixtures/policies/login.hcl"} {
		if !slices.Contains(files, filepath.Join(root, want)) {
			t.Fatalf("the walk did not find %s among %d files", want, len(files))
		}
	}
	if code, listed, stderr := edgeFmt(t, append([]string{"-l"}, files...)...); code != 0 || listed != "" {
		t.Errorf("edge fmt -l: exit %d, listed:\n%sstderr: %s(run `go run ./cmd/edge fmt -w FILE`; for attacks-hosts.hcl, bash loadtest/testdata/make-attacks-hosts.sh)", code, listed, stderr)
	}
	for _, f := range files {
		var bad strings.Builder
		for line := range strings.Lines(readString(t, f)) {
			bad.WriteString(strings.TrimLeft(line, " \t"))
		}
		once, diags := formatHCL(f, []byte(bad.String()))
		if diags.HasErrors() {
			t.Errorf("%s without its indentation: %s", f, diags.Error())
			continue
		}
		if twice, _ := formatHCL(f, once); !bytes.Equal(once, twice) {
			t.Errorf("%s: formatting its unindented copy twice differs from once", f)
		}
	}
}
