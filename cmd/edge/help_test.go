package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpListsCommandsAndFlags: `edge -h` lists every command, each of
// which answers its own -h, and the flags of serve, the default command,
// as README.md says ("edge -h and edge CMD -h list the flags").
func TestHelpListsCommandsAndFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("edge -h: exit %d, stderr %q", code, errb.String())
	}
	help := out.String()
	for _, c := range commands {
		if !strings.Contains(help, "\n  "+c.name+" ") {
			t.Errorf("edge -h does not list %s:\n%s", c.name, help)
		}
		var o, e bytes.Buffer
		if code := run([]string{c.name, "-h"}, &o, &e); code != 0 && c.name != "version" {
			t.Errorf("edge %s -h: exit %d, want 0 (a listed command exists)", c.name, code)
		}
	}
	for _, flag := range []string{"-config", "-listen", "-admin", "-upstream", "-store", "-dry-run", "-demo", "-log-level"} {
		if !strings.Contains(help, "\n  "+flag+" ") && !strings.Contains(help, "\n  "+flag+"\n") {
			t.Errorf("edge -h does not list serve's flag %s:\n%s", flag, help)
		}
	}
}
