package main

import (
	"bytes"
	"strings"
	"testing"
)

// brokenEverywhere holds independent errors of every kind, several in one
// block: a value of the wrong type beside an unknown algorithm and a bad
// duration (rule "typed"), an unknown attribute and nested block beside a
// bad on_store_error (rule "unknown"), a value error alone (rule
// "valued"), and a test block's own errors.
const brokenEverywhere = `rule "typed" {
  key       = ["ip"]
  algorithm = "nope"
  limit     = "five"
  period    = "1 minute"
}

rule "unknown" {
  key            = ["ip"]
  limit          = 5
  period         = "1m"
  colour         = "red"
  on_store_error = "panic"
  frob {
  }
}

rule "valued" {
  key    = ["ip"]
  limit  = 0
  period = "1m"
}

rule "exempt" {
  paths  = ["/internal/*"]
  action = "skip"
  skip   = ["typed"]
}

test "t" {
  request {
    after  = "soon"
    expect = "maybe"
  }
}
`

// brokenEverywhereWant are the diagnostics of brokenEverywhere, one a line
// (FILE is the file's path), in the order of the file.
var brokenEverywhereWant = []string{
	`FILE:3,15-21: Unknown algorithm; "nope" is not an algorithm`,
	`FILE:4,16-20: Unsuitable value type; Unsuitable value: a number is required`,
	`FILE:5,15-25: Invalid period; "1 minute" is not a duration`,
	`FILE:12,3-9: Unsupported argument; An argument named "colour" is not expected here.`,
	`FILE:13,20-27: Invalid on_store_error; "panic" is not a failure mode`,
	`FILE:14,3-7: Unsupported block type; Blocks of type "frob" are not expected here.`,
	`FILE:20,12-13: Invalid limit; limit must be at least 1, got 0`,
	`FILE:32,14-20: Invalid duration; invalid duration "soon"`,
	`FILE:33,14-21: Unknown expectation; "maybe" is not an expectation`,
}

// TestValidateReportsEveryErrorInOneRun: one run of `edge validate` on
// brokenEverywhere reports each of its errors at its FILE:LINE,COL, in the
// file's order, and nothing that follows only from another (no missing
// limit where the limit had the wrong type, no unknown rule where a rule
// names it), exit 1 (issue 25, §6). Type errors used to hide the errors
// beside them in their block, and the test blocks' errors waited for the
// policy to compile: the same file took three runs.
func TestValidateReportsEveryErrorInOneRun(t *testing.T) {
	path := writeTemp(t, "policies.hcl", brokenEverywhere)
	var out, errb bytes.Buffer
	if code := run([]string{"validate", path}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
	if len(lines) != len(brokenEverywhereWant) {
		t.Errorf("got %d diagnostics, want %d:\n%s", len(lines), len(brokenEverywhereWant), errb.String())
	}
	for i, want := range brokenEverywhereWant {
		want = strings.Replace(want, "FILE", path, 1)
		if i >= len(lines) || !strings.HasPrefix(lines[i], want) {
			t.Errorf("diagnostic %d: want a line starting %q; stderr:\n%s", i+1, want, errb.String())
		}
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}
