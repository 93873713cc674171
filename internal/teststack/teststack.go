// Package teststack finds the external programs tests run against (Debian's
// nginx, redis-server, chromium): a test that needs one skips without it,
// or fails when EDGE_REQUIRE_STACKS=1, as CI sets it after installing
// them (.ci/run).
package teststack

import (
	"os"
	"os/exec"
	"testing"
)

// Binary returns the first of paths that exists, else name on PATH; when
// neither is there it skips t, or fails it under EDGE_REQUIRE_STACKS=1
// naming pkg, the Debian package .ci/run installs it from.
func Binary(t testing.TB, name, pkg string, paths ...string) string {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("EDGE_REQUIRE_STACKS") == "1" {
		t.Fatalf("%s is not installed (EDGE_REQUIRE_STACKS=1: .ci/run installs Debian's %s)", name, pkg)
	}
	t.Skipf("%s is not installed (CI installs Debian's %s)", name, pkg)
	return ""
}
