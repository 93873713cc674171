package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateCalendarQuotas: edge validate accepts a calendar quota and
// reports each misuse at its attribute, FILE:LINE,COL: a calendar period
// on gcra (the default algorithm) at the period, an unknown zone and a
// time_zone without a calendar period at the time_zone.
func TestValidateCalendarQuotas(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, body string
		want       string // "" for valid; else a FILE:LINE,COL suffix and a detail, separated by |
	}{
		{"valid.hcl", "  algorithm = \"fixed_window\"\n  period    = \"month\"\n  time_zone = \"Europe/Paris\"\n", ""},
		{"gcra.hcl", "  algorithm = \"gcra\"\n  period    = \"month\"\n", ":5,15-22|needs fixed_window|algorithm = \"fixed_window\""},
		{"default.hcl", "  period = \"week\"\n", ":4,12-18|needs fixed_window|this rule's algorithm is gcra"},
		{"zone.hcl", "  algorithm = \"fixed_window\"\n  period    = \"day\"\n  time_zone = \"Mars/Olympus_Mons\"\n", ":6,15-34|Invalid time_zone|\"Mars/Olympus_Mons\" is not an IANA time zone name"},
		{"unused.hcl", "  algorithm = \"fixed_window\"\n  period    = \"1d\"\n  time_zone = \"UTC\"\n", ":6,15-20|time_zone not used|"},
	} {
		path := filepath.Join(dir, c.name)
		src := "rule \"quota\" {\n  key   = [\"ip\"]\n  limit = 1000\n" + c.body + "}\n"
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := run([]string{"validate", "-config", path}, &out, &errb)
		if c.want == "" {
			if code != 0 {
				t.Errorf("%s: exit %d, stderr:\n%s", c.name, code, errb.String())
			}
			continue
		}
		parts := strings.Split(c.want, "|")
		if code != 1 || !strings.HasPrefix(errb.String(), path+parts[0]) {
			t.Errorf("%s: exit %d, want 1 with a diagnostic at %s%s:\n%s", c.name, code, path, parts[0], errb.String())
		}
		for _, w := range parts[1:] {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, errb.String())
			}
		}
	}
}

// TestBinaryCarriesZoneData: edge links time/tzdata (tzdata.go), so a
// time_zone resolves in an image without /usr/share/zoneinfo (scratch).
func TestBinaryCarriesZoneData(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "time/tzdata" {
			return
		}
	}
	t.Fatal("cmd/edge does not link time/tzdata: a time_zone would not resolve in a scratch image")
}
