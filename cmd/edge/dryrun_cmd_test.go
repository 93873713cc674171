package main

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/rules/memstore"
)

const dryRunToken = "dry-run-cli-token"

// startDryRunNode runs a node of the foundation policy with an admin token
// and its JSON logs in logs; it returns the server and the admin address.
func startDryRunNode(t *testing.T, logs *bytes.Buffer, mu *sync.Mutex) (*gateway.Server, string) {
	t.Helper()
	p, diags := builtin.LoadFile("../../testdata/fixtures/policies/foundation.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after serveAdmin's
	srv, err := gateway.New(gateway.Options{
		Policy: p, Store: st, AdminToken: dryRunToken, Extensions: builtin.Extensions(),
		Logger: slog.New(slog.NewJSONHandler(lockedWriter{logs, mu}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, serveAdmin(t, srv)
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestDryRunCommand(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	srv, admin := startDryRunNode(t, &logs, &mu)
	t.Setenv("EDGE_ADMIN_TOKEN", dryRunToken)
	login := srv.Policy().Rules[0]
	for _, r := range srv.Policy().Rules {
		if r.Name == "login-per-ip" {
			login = r
		}
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		out, err string
		dry      bool // login-per-ip in dry-run afterwards
	}{
		{"on", []string{"on", "-rule", "login-per-ip", "-for", "10m", "-reason", "INC-5", "-actor", "bob", "-admin", admin}, 0, "dry-run on: rule login-per-ip until ", "", true},
		{"off, mode after flags", []string{"-rule", "login-per-ip", "-admin", admin, "off", "-reason", "INC-5 done"}, 0, "dry-run off: rule login-per-ip enforces\n", "", false},
		{"every rule", []string{"on", "-for", "1m", "-reason", "rollout", "-admin", admin}, 0, "dry-run on: every rule until ", "", true},
		{"every rule off", []string{"off", "-reason", "rollout done", "-admin", admin}, 0, "dry-run off: every rule enforces\n", "", false},
		{"policy dry-run stays", []string{"off", "-rule", "api-shadow-tight", "-reason", "x", "-admin", admin}, 0, "stays in dry-run", "", false},
		{"unknown rule", []string{"on", "-rule", "nope", "-reason", "x", "-admin", admin}, 1, "", `unknown rule "nope"`, false},
		{"too long", []string{"on", "-rule", "login-per-ip", "-for", "48h", "-reason", "x", "-admin", admin}, 1, "", "at most 24h", false},
		{"no reason", []string{"on", "-rule", "login-per-ip", "-admin", admin}, 2, "", "-reason is required", false},
		{"no mode", []string{"-reason", "x", "-admin", admin}, 2, "", "usage: edge dry-run on|off", false},
		{"bad mode", []string{"maybe", "-reason", "x", "-admin", admin}, 2, "", "usage: edge dry-run on|off", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(append([]string{"dry-run"}, tt.args...), &out, &errb); code != tt.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tt.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tt.out) || !strings.Contains(errb.String(), tt.err) {
				t.Errorf("got stdout %q stderr %q, want %q and %q", out.String(), errb.String(), tt.out, tt.err)
			}
			if got := !srv.Engine().RuleEnforces(srv.Policy(), login, time.Now()); got != tt.dry {
				t.Errorf("login-per-ip in dry-run: got %v, want %v", got, tt.dry)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), `"audit":"dry-run","actor":"bob","reason":"INC-5","rule":"login-per-ip","dry_run":true`) {
		t.Errorf("the audit log lacks the toggle by bob:\n%s", logs.String())
	}
	if ts := srv.Engine().DryRuns().List(); len(ts) != 0 {
		t.Errorf("toggles left: %v, want none", ts)
	}
}
