package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// root is the module root: go test runs in cmd/edge.
const root = "../.."

func TestValidateAcceptsShippedAndFixturePolicies(t *testing.T) {
	for _, f := range []string{
		"policies.hcl",
		"testdata/fixtures/policies/foundation.hcl",
		"testdata/fixtures/policies/visitors.hcl",
		"testdata/fixtures/policies/otp.hcl",
		"loadtest/testdata/cgnat-crowd.hcl",
	} {
		t.Run(f, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"validate", "-config", filepath.Join(root, f)}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
			}
			if !strings.Contains(out.String(), "valid") {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}

func TestValidateRefusesBrokenPolicies(t *testing.T) {
	tests := []struct {
		file  string
		lines []string // any of these FILE:LINE, prefixes
	}{
		{"unknown-algorithm.hcl", []string{"9"}},
		{"bad-period.hcl", []string{"10"}},
		{"duplicate-rule.hcl", []string{"13"}},
		{"bad-cidr.hcl", []string{"4"}},
		{"unknown-key.hcl", []string{"8"}},
		{"syntax.hcl", []string{"6", "7"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(root, "testdata/fixtures/policies/broken", tt.file)
			var out, errb bytes.Buffer
			if code := run([]string{"validate", "-config", path}, &out, &errb); code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			ok := false
			for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
				for _, want := range tt.lines {
					if strings.HasPrefix(l, path+":"+want+",") {
						ok = true
					}
				}
			}
			if !ok {
				t.Errorf("no diagnostic at line %v:\n%s", tt.lines, errb.String())
			}
		})
	}
}

func TestValidateDetails(t *testing.T) {
	dir := filepath.Join(root, "testdata/fixtures/policies/broken")
	tests := []struct{ file, want string }{
		{"unknown-algorithm.hcl", `Did you mean "leaky_bucket"?`},
		{"duplicate-rule.hcl", "duplicate-rule.hcl:6,"},
		{"bad-cidr.hcl", `"10.0.0.300/32" is not a CIDR`},
		{"unknown-key.hcl", `"fingerprint" is not a characteristic`},
		{"bad-period.hcl", `"five minutes" is not a duration`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		run([]string{"validate", "-config", filepath.Join(dir, tt.file)}, &out, &errb)
		if !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%s: stderr lacks %q:\n%s", tt.file, tt.want, errb.String())
		}
	}
}

func TestServeRefusesBrokenPolicy(t *testing.T) {
	var out, errb bytes.Buffer
	path := filepath.Join(root, "testdata/fixtures/policies/broken/bad-period.hcl")
	if code := run([]string{"-config", path}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "bad-period.hcl:10,") {
		t.Errorf("stderr lacks the diagnostic:\n%s", errb.String())
	}
}

func TestValidateMissingFile(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"validate", "-config", filepath.Join(t.TempDir(), "nope.hcl")}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if _, err := os.Stat("nope.hcl"); err == nil {
		t.Fatal("validate created a file")
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}

func TestReloadKeepsRunningPolicyOnErrors(t *testing.T) {
	good := filepath.Join(root, "testdata/fixtures/policies/foundation.hcl")
	p, diags := rules.LoadFile(good)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := gateway.New(gateway.Options{Policy: p, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var logs, errb bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	for _, f := range []string{"bad-period.hcl", "syntax.hcl", "duplicate-rule.hcl"} {
		if err := reload(srv, filepath.Join(root, "testdata/fixtures/policies/broken", f), log, &errb); err == nil {
			t.Errorf("%s: reload accepted a broken policy", f)
		}
		if srv.Policy() != p {
			t.Fatalf("%s: the running policy was replaced", f)
		}
	}
	if !strings.Contains(logs.String(), "reload refused") || !strings.Contains(errb.String(), "bad-period.hcl:10,") {
		t.Errorf("refusal not reported:\n%s\n%s", logs.String(), errb.String())
	}
	// A good file is swapped in.
	if err := reload(srv, filepath.Join(root, "policies.hcl"), log, &errb); err != nil {
		t.Fatal(err)
	}
	if srv.Policy() == p || srv.Policy().Rule("login-per-visitor") == nil {
		t.Error("a valid policy was not swapped in")
	}
}

func TestServeRefusesRedisWithoutKeySecret(t *testing.T) {
	t.Setenv("EDGE_KEY_SECRET", "")
	var out, errb bytes.Buffer
	code := run([]string{"-config", filepath.Join(root, "testdata/fixtures/policies/foundation.hcl"), "-store", "redis://127.0.0.1:1/0"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "needs the key secret in $EDGE_KEY_SECRET") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
}

func TestServeRefusesBadStoreFlag(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-config", filepath.Join(root, "policies.hcl"), "-store", "memcached://x:1"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "-store:") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
}
