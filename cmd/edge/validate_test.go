package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
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

// validateJSON runs `edge validate -json path` and decodes its stdout.
func validateJSON(t *testing.T, path string) (int, []map[string]any, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run([]string{"validate", "-json", path}, &out, &errb)
	var diags []map[string]any
	if err := json.Unmarshal(out.Bytes(), &diags); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, out.String())
	}
	return code, diags, errb.String()
}

// TestValidateJSON: `edge validate -json` prints every diagnostic of the
// text form, in its order, as one JSON array on stdout, each with the file,
// the range (start and end line, column and byte of the offending text),
// severity, summary and detail; exit 1 with an error, 0 with warnings
// only ("severity": "warning"), and [] for a valid file; nothing on
// stderr. A diagnostic without a position (a file that cannot be read)
// has no range.
func TestValidateJSON(t *testing.T) {
	path := writeTemp(t, "policies.hcl", brokenEverywhere)
	code, diags, stderr := validateJSON(t, path)
	if code != 1 || stderr != "" {
		t.Errorf("exit %d, stderr %q; want 1 and nothing", code, stderr)
	}
	if len(diags) != len(brokenEverywhereWant) {
		t.Fatalf("got %d diagnostics, want %d: %v", len(diags), len(brokenEverywhereWant), diags)
	}
	for i, d := range diags {
		r := d["range"].(map[string]any)
		start, end := r["start"].(map[string]any), r["end"].(map[string]any)
		line := fmt.Sprintf("%s:%v,%v-%v: %s; %s", d["file"], start["line"], start["column"], end["column"], d["summary"], d["detail"])
		if want := strings.Replace(brokenEverywhereWant[i], "FILE", path, 1); !strings.HasPrefix(line, want) || d["severity"] != "error" {
			t.Errorf("diagnostic %d: %s (severity %v), want %q, an error", i+1, line, d["severity"], want)
		}
	}
	// The bytes: the first is the unknown algorithm's value, "nope".
	r := diags[0]["range"].(map[string]any)
	b0, b1 := int(r["start"].(map[string]any)["byte"].(float64)), int(r["end"].(map[string]any)["byte"].(float64))
	if got := brokenEverywhere[b0:b1]; got != `"nope"` {
		t.Errorf("the first range's bytes %d-%d hold %q, want %q", b0, b1, got, `"nope"`)
	}

	warn := writeTemp(t, "warn.hcl", "rule \"a\" {\n  key      = [\"ip\"]\n  limit    = 5\n  period   = \"1m\"\n  priority = \"high\"\n}\n")
	code, diags, _ = validateJSON(t, warn)
	if code != 0 || len(diags) != 1 || diags[0]["severity"] != "warning" || diags[0]["summary"] != "priority without load_shedding" || diags[0]["file"] != warn {
		t.Errorf("warnings only: exit %d, %v; want 0 and the one warning", code, diags)
	}

	code, diags, stderr = validateJSON(t, filepath.Join(root, "policies.hcl"))
	if code != 0 || len(diags) != 0 || stderr != "" {
		t.Errorf("policies.hcl: exit %d, %v, stderr %q; want 0, [] and nothing", code, diags, stderr)
	}

	missing := filepath.Join(t.TempDir(), "nope.hcl")
	code, diags, _ = validateJSON(t, missing)
	if _, hasRange := diags[0]["range"]; code != 1 || len(diags) != 1 || diags[0]["file"] != missing || diags[0]["summary"] != "Cannot read policy" || hasRange {
		t.Errorf("a missing file: exit %d, %v; want 1 and one error naming it, without a range", code, diags)
	}
}
