package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestExemptFixture runs the exemptions fixture's test blocks with `edge
// test` (the real server, a fresh memory store and a simulated clock per
// test), and checks that `edge validate` accepts it with the one warning
// skip = ["*"] earns by passing over a sensitive rule.
func TestExemptFixture(t *testing.T) {
	path := filepath.Join(root, "testdata/fixtures/policies/exempt.hcl")
	var out, errb bytes.Buffer
	if code := run([]string{"test", "-config", path}, &out, &errb); code != 0 {
		t.Fatalf("edge test: exit %d, stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "4 tests: 4 passed, 0 failed\n") {
		t.Errorf("edge test: stdout:\n%s\nwant 4 passing tests", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"validate", "-config", path}, &out, &errb); code != 0 {
		t.Fatalf("edge validate: exit %d, stderr:\n%s", code, errb.String())
	}
	want := "warning: " + path + `:51,11-14: Skips sensitive rules; skip = ["*"] exempts the requests rule "partner" matches from every rule, the sensitive "login-per-ip" too; name the rules to skip if that is not meant` + "\n"
	if errb.String() != want {
		t.Errorf("edge validate: stderr:\n%s\nwant:\n%s", errb.String(), want)
	}
}

// TestExemptFixtureFailsWithoutTheExemption: the same tests against the
// policy without its office rule fail at the office's sixth login, so the
// tests do hold the exemption to account.
func TestExemptFixtureFailsWithoutTheExemption(t *testing.T) {
	path := writeFlipped(t, "exempt.hcl", `skip   = ["login-per-ip"]`, `skip   = ["no-admin"]`)
	var out, errb bytes.Buffer
	if code := run([]string{"test", "-config", path}, &out, &errb); code != 1 {
		t.Fatalf("edge test: exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	want := fmt.Sprintf("FAIL %s:%d: the office is never refused by the login limit; another address is after five: request 1 (repeat 6 of 20): got deny by \"login-per-ip\", want allow\n",
		path, requestLine(t, path, "from   = \"10.20.30.40\"\n    repeat = 20"))
	if !strings.Contains(out.String(), want) {
		t.Errorf("stdout:\n%s\nwant the line %q", out.String(), want)
	}
}
