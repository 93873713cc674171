package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testnet"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw      string
		wantAddr string // empty: must be refused
	}{
		{"http://127.0.0.1:18080", "127.0.0.1:18080"},
		{"http://127.0.0.1:18080/", "127.0.0.1:18080"},
		{"http://127.1.2.3:80", "127.1.2.3:80"},
		{"http://[::1]:18080", "[::1]:18080"},
		{"http://[::ffff:127.0.0.1]:18080", "[::ffff:127.0.0.1]:18080"},
		{"http://localhost:18080", "127.0.0.1:18080"},
		{"http://LOCALHOST", "127.0.0.1:80"},
		{"http://10.0.0.1:18080", ""},
		{"http://0.0.0.0:18080", ""},
		{"http://[::]:18080", ""},
		{"http://example.com", ""},
		{"http://localhost.example.com", ""},
		{"http://[fe80::1%25lo]:80", ""},
		{"https://127.0.0.1:18080", ""},
		{"127.0.0.1:18080", ""},
		{"http://127.0.0.1:18080/prefix", ""},
		{"http://user@127.0.0.1:18080", ""},
		{"http://127.0.0.1:18080/?q=1", ""},
	}
	for _, tt := range tests {
		got, err := parseTarget(tt.raw)
		switch {
		case tt.wantAddr == "" && err == nil:
			t.Errorf("parseTarget(%q): got %+v, want an error", tt.raw, got)
		case tt.wantAddr != "" && err != nil:
			t.Errorf("parseTarget(%q): %v", tt.raw, err)
		case tt.wantAddr != "" && (got.addr != tt.wantAddr || got.base != "http://"+tt.wantAddr):
			t.Errorf("parseTarget(%q): got %+v, want addr %s", tt.raw, got, tt.wantAddr)
		}
	}
}

// runTool runs the tool with args and returns its exit status and output.
// toolRunGuard bounds each in-process run of the tool in a test.
const toolRunGuard = 3 * time.Minute

func runTool(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	// A hang guard, far above any run a test makes (the longest is about
	// 30 s): a tool run that waits on something that never comes is cut
	// here and fails its test by name, instead of holding the package
	// until go test's -timeout, whose dump does not say which run hung.
	ctx, cancel := context.WithTimeout(t.Context(), toolRunGuard)
	defer cancel()
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-progress") }) {
		// The tests read stderr for warnings; TestProgress tests the lines.
		args = append([]string{"-progress=false"}, args...)
	}
	code = run(ctx, args, &out, &errOut)
	if ctx.Err() == context.DeadlineExceeded {
		t.Errorf("loadtest %s: still running after %v (a hang): exit %d", strings.Join(args, " "), toolRunGuard, code)
	}
	return code, out.String(), errOut.String()
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"help", []string{"-h"}, exitOK, "scenarios: adaptive, attacks, brute-force, cgnat-crowd, credential-stuffing, goodput, mixed, otp-guessing, otp-pumping, plain, queue, retry-storm, seed-trace, throughput"},
		{"unknown flag", []string{"-nope"}, exitError, "flag provided but not defined"},
		{"extra argument", []string{"seed-trace"}, exitError, "unexpected arguments"},
		{"unknown scenario", []string{"-scenario", "flood"}, exitError, `unknown scenario "flood"`},
		{"remote target", []string{"-target", "http://192.0.2.1:18080"}, exitError, "not a loopback address"},
		{"zero duration", []string{"-duration", "0s"}, exitError, "-duration"},
		{"huge duration", []string{"-duration", "11m"}, exitError, "-duration"},
		{"zero requests", []string{"-requests", "0"}, exitError, "-requests"},
		{"bad timeout", []string{"-timeout", "-1s"}, exitError, "-timeout"},
		{"big stagger", []string{"-stagger", "3ms"}, exitError, "-stagger"},
		{"missing trace", []string{"-trace", "does-not-exist.json"}, exitError, "reading trace"},
		{"too few requests allowed", []string{"-trace", seedTracePath, "-requests", "100"}, exitError, "needs 126 requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runTool(t, tt.args...)
			if code != tt.want || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRunConnectionRefused(t *testing.T) {
	t.Parallel()
	addr := testnet.DeadAddr(t) // connection refused

	code, stdout, stderr := runTool(t, "-trace", seedTracePath, "-target", "http://"+addr, "-timeout", "1s")
	if code != exitError || !strings.Contains(stderr, "warming up") {
		t.Errorf("exit %d, stderr %q; want exit %d and a warm-up error", code, stderr, exitError)
	}
	if stdout != "" {
		t.Errorf("stdout: got %q, want nothing", stdout)
	}
}
