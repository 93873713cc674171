//go:build linux

package main

import (
	"debug/elf"
	"os"
	"slices"
	"strings"
	"testing"
)

// staticELF says why the ELF file at path is not a static executable: a
// PT_INTERP program header (the dynamic loader the kernel starts first) or
// DT_NEEDED entries (shared libraries to load); "" when it is static.
func staticELF(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "it has a PT_INTERP program header (a dynamic loader)"
		}
	}
	libs, err := f.ImportedLibraries() // DT_NEEDED
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		return "it needs the shared libraries " + strings.Join(libs, ", ")
	}
	return ""
}

// TestBinaryIsStatic: edge built as the image builds it (CGO_ENABLED=0,
// the Dockerfile's flags) is a static executable, which distroless/static
// and scratch images need (they have no libc and no dynamic loader). The
// check is the ELF file's own: no PT_INTERP, no DT_NEEDED (no ldd, which
// runs the loader). A dynamic executable of the system fails the same
// check, so it can fail.
func TestBinaryIsStatic(t *testing.T) {
	b, _, _ := readDockerfile(t)
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Fatalf("Dockerfile:%d builds without CGO_ENABLED=0 (env %q)", b.Line, b.Env)
	}
	bin := buildLikeImage(t, b, t.TempDir())
	if why := staticELF(t, bin); why != "" {
		t.Errorf("edge built with CGO_ENABLED=0 is not static: %s", why)
	}
	// The check itself: a dynamically linked system binary (Debian's dash
	// and coreutils are) fails it.
	for _, dyn := range []string{"/bin/sh", "/usr/bin/env"} {
		if _, err := os.Stat(dyn); err != nil {
			continue
		}
		if staticELF(t, dyn) == "" {
			t.Errorf("%s passes as static: the check cannot tell", dyn)
		}
		return
	}
	t.Log("no dynamically linked system binary to check the check with")
}
