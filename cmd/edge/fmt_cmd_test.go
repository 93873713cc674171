package main

import (
	"bytes"
	"os"
	"path/filepath"
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
