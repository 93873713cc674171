package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The attacks policy, relative to this package's directory: the shipped
// policy with hosts on its login rules.
const attacksPolicyPath = "testdata/attacks-hosts.hcl"

// attacksShortMaxKeys is the CI node's memory store bound: the key flood
// is 1.1 × this, 22,000 requests instead of 110,000. Each rule's share of
// it (about 1,400 keys each, with the shipped policy's 14 budgets) holds
// the keys the other classes make, about 500 at most on one rule: a
// sensitive rule's budget full of live state would answer 503.
const attacksShortMaxKeys = "20000"

// writeAttacksPolicy writes the attacks policy, after the textual
// replacements (old, new pairs), into a temporary directory and returns
// its path: the node serves it and the tool reads its bounds from it.
func writeAttacksPolicy(t *testing.T, replace ...string) string {
	t.Helper()
	src, err := os.ReadFile(attacksPolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s does not contain %q", attacksPolicyPath, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	path := filepath.Join(t.TempDir(), "attacks.hcl")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// shortStore is the CI form's store: a small max_keys.
var shortStore = []string{"max_keys = 100000", "max_keys = " + attacksShortMaxKeys}

// attackLine matches a case's verdict line.
var attackLine = regexp.MustCompile(`(?m)^attack: (\S+) gain=(\d+) bound=(\d+) (ok|BREACH)$`)

// runAttacksTool runs the attacks scenario against a node serving
// policy (a file) and returns the exit status, the report and stderr.
func runAttacksTool(t *testing.T, edge, origin, policy string, args ...string) (int, string, string) {
	t.Helper()
	return runTool(t, append([]string{"-scenario", "attacks", "-target", edge, "-origin", origin, "-policy", policy,
		"-phones", otpPhonesPath, "-timeout", otpTestTimeout}, args...)...)
}

// TestAttacksShortSuite is the CI form of the attacks scenario: a real
// edge node and the demo origin in-process, on the attacks policy (the
// shipped one with hosts on its login rules) with a small memory store,
// every attack class, and no breach.
func TestAttacksShortSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	policy := writeAttacksPolicy(t, shortStore...)
	edge, origin, _ := startEdgeOrigin(t, policy)
	code, out, stderr := runAttacksTool(t, edge, origin, policy)
	t.Logf("report:\n%s", out)
	if stderr != "" {
		t.Logf("stderr:\n%s", stderr)
	}
	var breaches []string
	for _, m := range attackLine.FindAllStringSubmatch(out, -1) {
		if m[4] == "BREACH" {
			breaches = append(breaches, m[1]+" (gain "+m[2]+", bound "+m[3]+")")
		}
	}
	if len(breaches) > 0 {
		t.Errorf("%d attack cases breached their bounds:\n  %s", len(breaches), strings.Join(breaches, "\n  "))
	}
	if code != exitOK {
		t.Errorf("exit %d, want %d", code, exitOK)
	}
	if strings.Contains(out, " skipped: ") {
		t.Errorf("cases were skipped: the CI form must run every class")
	}
}
