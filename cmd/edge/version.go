package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version prints the module's version, the commit it was built from and
// when (debug.ReadBuildInfo: the module's version for `go install …@vX`,
// "(devel)" for a build in a checkout; vcs.revision, vcs.time and
// vcs.modified when built from a git checkout), and the Go version.
func version(stdout io.Writer) int {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "edge (no build information)")
		return 0
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	commit, when := settings["vcs.revision"], settings["vcs.time"]
	if commit == "" {
		commit = "unknown"
	}
	if settings["vcs.modified"] == "true" {
		commit += " (modified)"
	}
	if when == "" {
		when = "unknown"
	}
	fmt.Fprintf(stdout, "edge %s\ncommit %s\nbuilt %s\n%s\n", bi.Main.Version, commit, when, bi.GoVersion)
	return 0
}
