package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
)

// TestKeyFormatMigrate: on a format 1 fleet (the bare fingerprint older
// nodes write), migrate refuses a window shorter than the policy's longest
// key lifetime plus the margin, starts one otherwise (status then says
// so), and a second migrate leaves the first's window alone.
func TestKeyFormatMigrate(t *testing.T) {
	r := testredis.Start(t)
	rs := redisStore(t, r.URL())
	if _, err := rs.ClaimKeyFingerprint(context.Background(), keyFingerprint([]byte(secretA)), false); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "policies.hcl")
	src := "rule \"r\" {\n  key    = [\"ip\"]\n  limit  = 5\n  period = \"1h\"\n}\n"
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EDGE_KEY_SECRET", secretA)
	t0 := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return t0 }
	runCmd := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := keyFormatRun(append([]string{"-config", cfg, "-store", r.URL()}, args...), &out, &errb, now)
		return code, out.String() + errb.String()
	}
	if code, out := runCmd("-window", "30m", "migrate"); code != 2 || !strings.Contains(out, "shorter") {
		t.Errorf("a 30m window under a 1h period: exit %d: %s", code, out)
	}
	if code, out := runCmd("migrate"); code != 0 || !strings.Contains(out, "migrating to key format 2") {
		t.Fatalf("migrate: exit %d: %s", code, out)
	}
	p, diags := builtin.LoadFile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if p.LongestKeyLifetime() < time.Hour {
		t.Fatalf("LongestKeyLifetime %v is under the rule's 1h period", p.LongestKeyLifetime())
	}
	want := t0.Add(p.LongestKeyLifetime() + migrationMargin)
	f, err := rs.ReadKeyFormat(context.Background())
	if err != nil || f.Format != rules.KeyFormat2 || !f.DualUntil.Equal(want) {
		t.Fatalf("after migrate: got %+v, %v; want format 2 dual until %v", f, err, want)
	}
	if code, out := runCmd("status"); code != 0 || !strings.Contains(out, "migrating") {
		t.Errorf("status: exit %d: %s", code, out)
	}
	if code, out := runCmd("-window", "48h", "migrate"); code != 0 || !strings.Contains(out, "migrating:") {
		t.Errorf("second migrate: exit %d: %s", code, out)
	}
	if f2, _ := rs.ReadKeyFormat(context.Background()); !f2.DualUntil.Equal(want) {
		t.Errorf("a second migrate moved the window to %v", f2.DualUntil)
	}
}
