package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpExitsZeroEverywhere: -h, -help and --help print the usage and
// exit 0, for edge itself and every subcommand; an unknown flag is still 2.
func TestHelpExitsZeroEverywhere(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.Contains(out.String()+errb.String(), "usage") {
			t.Errorf("edge %v: exit %d, output %q", args, code, out.String()+errb.String())
		}
	}
	for _, cmd := range []string{"serve", "validate", "test", "fmt", "reload", "dry-run", "explain", "demo-origin"} {
		for _, h := range []string{"-h", "--help"} {
			var out, errb bytes.Buffer
			if code := run([]string{cmd, h}, &out, &errb); code != 0 {
				t.Errorf("edge %s %s: exit %d, want 0\n%s", cmd, h, code, errb.String())
			}
		}
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "-no-such-flag"}, &out, &errb); code != 2 {
			t.Errorf("edge %s -no-such-flag: exit %d, want 2", cmd, code)
		}
	}
}

// TestVersion: edge version names the module's version and the Go version.
func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "edge ") || !strings.HasPrefix(lines[1], "commit ") ||
		!strings.HasPrefix(lines[2], "built ") || !strings.HasPrefix(lines[3], "go1.") {
		t.Errorf("edge version printed %q", out.String())
	}
}
