package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
)

const (
	secretA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	secretB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func redisStore(t *testing.T, url string) *redisstore.Store {
	t.Helper()
	rs, err := redisstore.New(redisstore.Options{URL: url, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

// TestKeySecretFingerprint: against a real redis-server, the first node
// writes its secret's fingerprint, the same secret starts again, another
// is refused (naming the procedure) and leaves the fingerprint alone, and
// -rotate-key-secret accepts it and overwrites the fingerprint, after
// which the old secret is refused.
func TestKeySecretFingerprint(t *testing.T) {
	r := testredis.Start(t)
	rs := redisStore(t, r.URL())
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	held := func() string {
		t.Helper()
		v, err := r.Do("GET", "edge:key-fingerprint")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	steps := []struct {
		name    string
		secret  string
		rotate  bool
		refused bool
		holds   string // the secret whose fingerprint Redis holds after the step
	}{
		{"first start", secretA, false, false, secretA},
		{"restart, same secret", secretA, false, false, secretA},
		{"another secret", secretB, false, true, secretA},
		{"another secret, rotating", secretB, true, false, secretB},
		{"rotated, same secret", secretB, false, false, secretB},
		{"the old secret after the rotation", secretA, false, true, secretB},
	}
	for _, st := range steps {
		kf, err := checkKeySecret(rs, []byte(st.secret), "EDGE_KEY_SECRET", st.rotate, log)
		if (err != nil) != st.refused {
			t.Fatalf("%s: got error %v, want refused %v", st.name, err, st.refused)
		}
		if err != nil && (!strings.Contains(err.Error(), "-rotate-key-secret") || !strings.Contains(err.Error(), "Rotating the key secret")) {
			t.Errorf("%s: the error does not name the procedure: %v", st.name, err)
		}
		if err == nil && (kf.Format != rules.KeyFormat2 || !kf.DualUntil.IsZero()) {
			t.Errorf("%s: got key formats %+v, want format 2 (the fleet this test's first node claimed)", st.name, kf)
		}
		if got, want := held(), "2:"+keyFingerprint([]byte(st.holds)); got != want {
			t.Errorf("%s: redis holds %s, want %s", st.name, got, want)
		}
	}
	if strings.Contains(logs.String(), secretA) || strings.Contains(logs.String(), secretB) {
		t.Error("a secret reached the log")
	}
	if keyFingerprint([]byte(secretA)) == keyFingerprint([]byte(secretB)) || len(keyFingerprint([]byte(secretA))) != 64 {
		t.Error("fingerprints are not 64 hex digits telling secrets apart")
	}
}

// TestServeRefusesAChangedKeySecret: `edge serve` on a Redis whose counters
// are keyed under another secret exits 1 before listening, saying why.
func TestServeRefusesAChangedKeySecret(t *testing.T) {
	r := testredis.Start(t)
	if _, err := checkKeySecret(redisStore(t, r.URL()), []byte(secretA), "EDGE_KEY_SECRET", false, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "policies.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "policies.hcl")
	if err := os.WriteFile(cfg, src, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EDGE_KEY_SECRET", secretB)
	var out, errb bytes.Buffer
	code := run([]string{"serve", "-config", cfg, "-store", r.URL(), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "is not the one the counters in redis are keyed under") {
		t.Errorf("exit %d, stderr:\n%s", code, errb.String())
	}
	if v, _ := r.Do("GET", "edge:key-fingerprint"); v != "2:"+keyFingerprint([]byte(secretA)) {
		t.Errorf("the refused node changed the fingerprint to %s", v)
	}
}

// TestKeySecretUncheckedWhenRedisIsDown: a Redis that does not answer at
// start does not stop the node (it serves degraded); the check is skipped
// with a warning.
func TestKeySecretUncheckedWhenRedisIsDown(t *testing.T) {
	r := testredis.Start(t)
	rs := redisStore(t, r.URL())
	r.Kill()
	var logs bytes.Buffer
	kf, err := checkKeySecret(rs, []byte(secretA), "EDGE_KEY_SECRET", false, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("got %v, want the node to start", err)
	}
	if kf != unknownKeyFormat() {
		t.Errorf("got key formats %+v, want both formats until the fleet's is read", kf)
	}
	if !strings.Contains(logs.String(), "could not check the key secret") {
		t.Errorf("no warning: %s", logs.String())
	}
}

// TestKeySecretRotationWindowInRedis: against a real redis-server, a
// node given the new secret and the fleet's as the previous starts the
// rotation (recorded in Redis: the new fingerprint, the previous one and
// the window's end, the policy's longest key lifetime and a margin on),
// and reads keys under both until then; a node with both joins it; one
// with the new secret alone is refused during the window, naming
// $EDGE_KEY_SECRET_PREVIOUS; one still on the old secret alone starts,
// counting under it; after the window the new secret alone starts.
func TestKeySecretRotationWindowInRedis(t *testing.T) {
	r := testredis.Start(t)
	rs := redisStore(t, r.URL())
	log := slog.New(slog.DiscardHandler)
	const env = "EDGE_KEY_SECRET"
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := checkKeySecrets(rs, []byte(secretA), nil, env, false, time.Hour, now, log); err != nil {
		t.Fatal(err)
	}
	kf, err := checkKeySecrets(rs, []byte(secretB), []byte(secretA), env, false, time.Hour, now, log)
	if err != nil {
		t.Fatalf("starting the rotation: %v", err)
	}
	until := now.Add(time.Hour + migrationMargin)
	if !kf.RotateUntil.Equal(until) {
		t.Fatalf("the rotating node's window: got %v, want %v", kf.RotateUntil, until)
	}
	held, err := rs.ReadKeyFormat(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := redisstore.FleetKeyFormat{Fingerprint: keyFingerprint([]byte(secretB)), Format: rules.KeyFormat2, Previous: keyFingerprint([]byte(secretA)), RotateUntil: until}
	if held.String() != want.String() {
		t.Fatalf("redis holds %+v, want %+v", held, want)
	}
	later := now.Add(10 * time.Minute)
	if kf, err := checkKeySecrets(rs, []byte(secretB), []byte(secretA), env, false, time.Hour, later, log); err != nil || !kf.RotateUntil.Equal(until) {
		t.Fatalf("a node joining with both secrets: got %+v, %v, want the window to %v", kf, err, until)
	}
	if _, err := checkKeySecrets(rs, []byte(secretB), nil, env, false, time.Hour, later, log); err == nil || !strings.Contains(err.Error(), "EDGE_KEY_SECRET_PREVIOUS") {
		t.Fatalf("the new secret alone during the window: got %v, want a refusal naming $EDGE_KEY_SECRET_PREVIOUS", err)
	}
	if kf, err := checkKeySecrets(rs, []byte(secretA), nil, env, false, time.Hour, later, log); err != nil || !kf.RotateUntil.IsZero() {
		t.Fatalf("the old secret alone during the window: got %+v, %v, want it to start", kf, err)
	}
	after := until.Add(time.Second)
	if _, err := checkKeySecrets(rs, []byte(secretB), nil, env, false, time.Hour, after, log); err != nil {
		t.Fatalf("the new secret alone after the window: %v", err)
	}
	if _, err := checkKeySecrets(rs, []byte(secretA), nil, env, false, time.Hour, after, log); err == nil {
		t.Fatal("the old secret alone after the window: started, want a refusal")
	}
	if got, _ := rs.ReadKeyFormat(t.Context()); got.String() != want.String() {
		t.Fatalf("redis holds %+v after the checks, want %+v (unchanged)", got, want)
	}
}
