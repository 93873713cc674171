package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestPassesTestedFixtures: `edge test` passes the shipped policy and
// the fixtures with test blocks, one PASS line per test, exit 0.
func TestTestPassesTestedFixtures(t *testing.T) {
	for _, f := range []string{"policies.hcl", "testdata/fixtures/policies/foundation-tested.hcl", "testdata/fixtures/policies/otp-tested.hcl", "testdata/fixtures/policies/login.hcl", "testdata/fixtures/policies/full.hcl"} {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"test", "-config", filepath.Join(root, f)}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
			}
			if strings.Contains(out.String(), "FAIL") || !strings.Contains(out.String(), " 0 failed\n") {
				t.Errorf("stdout:\n%s", out.String())
			}
		})
	}
}

// writeFlipped writes a copy of the fixture f with old replaced by new once.
func writeFlipped(t *testing.T, f, old, new string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "testdata/fixtures/policies", f))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(src), old) != 1 {
		t.Fatalf("%q is not once in %s", old, f)
	}
	path := filepath.Join(t.TempDir(), f)
	if err := os.WriteFile(path, []byte(strings.Replace(string(src), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTestFailsWrongExpectation: a copy of a fixture expecting the wrong
// decision exits 1 and names the failing test and request.
func TestTestFailsWrongExpectation(t *testing.T) {
	path := writeFlipped(t, "otp-tested.hcl",
		"origin_status = 401\n    repeat        = 4\n    expect        = \"allow\"",
		"origin_status = 401\n    repeat        = 4\n    expect        = \"deny\"")
	var out, errb bytes.Buffer
	code := run([]string{"test", "-config", path}, &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	line := requestLine(t, path, "origin_status = 401\n    repeat        = 4\n    expect        = \"deny\"")
	want := fmt.Sprintf("FAIL %s:%d: five wrong codes burn a code; a new code gets five more, within the phone's ceiling: request 4 (repeat 1 of 4): got allow, want deny\n", path, line)
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "4 tests: 3 passed, 1 failed\n") {
		t.Errorf("stdout:\n%s\nwant the line %q and the summary", out.String(), want)
	}
}

// requestLine is the line of the request block of the file path that
// holds text: its header's, `request {`.
func requestLine(t *testing.T, path, text string) int {
	t.Helper()
	src := readString(t, path)
	i := strings.Index(src, text)
	if i < 0 {
		t.Fatalf("%s has no %q", path, text)
	}
	return strings.Count(src[:strings.LastIndex(src[:i], "request {")], "\n") + 1
}

// TestTestFailureNamesItsLine: each FAIL line of `edge test` starts with
// FILE:LINE of the failing request block, as the file was named on the
// command line (issue 25, §6), for a test that fails at its first request
// and one that fails at its third, in one run; the PASS lines and the
// summary are as before.
func TestTestFailureNamesItsLine(t *testing.T) {
	path := writeTemp(t, "lines.hcl", `rule "login" {
  paths  = ["/login"]
  key    = ["ip"]
  limit  = 2
  period = "1m"
}

test "first fails" {
  request {
    path   = "/login"
    expect = "deny"
  }
}

test "passes" {
  request {
    path   = "/login"
    repeat = 2
    expect = "allow"
  }
}

test "third fails" {
  request {
    path   = "/login"
    expect = "allow"
  }
  request {
    path   = "/login"
    expect = "allow"
  }
  request {
    path   = "/login"
    expect = "allow"
  }
}
`)
	var out, errb bytes.Buffer
	if code := run([]string{"test", path}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	want := path + ":9: first fails: request 1: got allow, want deny\n" +
		"PASS passes\n" +
		"FAIL " + path + `:32: third fails: request 3: got deny by "login", want allow` + "\n" +
		"3 tests: 1 passed, 2 failed\n"
	if got := out.String(); got != "FAIL "+want {
		t.Errorf("stdout:\n%s\nwant:\nFAIL %s", got, want)
	}
}

// TestTestRefusesBrokenTests: a test block naming no rule of the policy is
// a broken file: `edge test` exits 2 and `edge validate` 1, both pointing
// at the value.
func TestTestRefusesBrokenTests(t *testing.T) {
	path := writeFlipped(t, "foundation-tested.hcl", `rule   = "api-shadow-tight"`, `rule   = "api-shadow-tigth"`)
	want := path + `:186,14-32: Unknown rule; the policy has no rule "api-shadow-tigth"`
	for _, tt := range []struct {
		cmd  string
		code int
	}{{"test", 2}, {"validate", 1}} {
		var out, errb bytes.Buffer
		if code := run([]string{tt.cmd, "-config", path}, &out, &errb); code != tt.code {
			t.Errorf("edge %s: exit %d, want %d; stderr:\n%s", tt.cmd, code, tt.code, errb.String())
		}
		if !strings.Contains(errb.String(), want) {
			t.Errorf("edge %s: stderr:\n%s\nwant %q", tt.cmd, errb.String(), want)
		}
	}
}
