package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/node"
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
	p, diags := builtin.LoadFile(good)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var logs, errb bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	for _, f := range []string{"bad-period.hcl", "syntax.hcl", "duplicate-rule.hcl"} {
		if err := reload(srv, filepath.Join(root, "testdata/fixtures/policies/broken", f), log, &errb, nil); err == nil {
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
	if err := reload(srv, filepath.Join(root, "policies.hcl"), log, &errb, nil); err != nil {
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

// TestServeRefusesRedisWithShortKeySecret: with a Redis store, the key
// secret's value needs at least 32 bytes, counted as given (a 31-character
// value is refused, whatever it encodes); the node does not start.
func TestServeRefusesRedisWithShortKeySecret(t *testing.T) {
	tests := []struct {
		name, secret string
		store        []string // -store flag, or the policy's own store
		refused      bool
	}{
		{"one byte", "k", []string{"-store", "redis://127.0.0.1:1/0"}, true},
		{"31 bytes", strings.Repeat("s", 31), []string{"-store", "redis://127.0.0.1:1/0"}, true},
		{"15 bytes in hex: 30 bytes as given", "00112233445566778899aabbccddee", []string{"-store", "redis://127.0.0.1:1/0"}, true},
		{"the policy's redis store", "short", nil, true},
		{"32 bytes", strings.Repeat("s", 32), []string{"-store", "redis://127.0.0.1:1/0"}, false},
	}
	policy := filepath.Join(t.TempDir(), "redis.hcl")
	src, err := os.ReadFile(filepath.Join(root, "testdata/fixtures/policies/foundation.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	redisSrc := strings.Replace(string(src), `store "memory" {
  max_keys = 100000
}`, `store "redis" {
  url = "redis://127.0.0.1:1/0"
}`, 1)
	if redisSrc == string(src) {
		t.Fatal("foundation.hcl has no memory store block to replace")
	}
	if err := os.WriteFile(policy, []byte(redisSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("EDGE_KEY_SECRET", tt.secret)
			if !tt.refused {
				// Past the secret check the node would start serving:
				// open the store alone.
				p, diags := builtin.LoadFile(policy)
				if diags.HasErrors() {
					t.Fatal(diags.Error())
				}
				st, _, _, err := openStore(p, tt.store[1], len(tt.secret), nil)
				if err != nil {
					t.Fatalf("openStore with a %d-byte secret: %v", len(tt.secret), err)
				}
				st.Close()
				return
			}
			var out, errb bytes.Buffer
			args := append([]string{"-config", policy}, tt.store...)
			code := run(args, &out, &errb)
			want := fmt.Sprintf("needs a key secret of at least 32 bytes in $EDGE_KEY_SECRET (it has %d)", len(tt.secret))
			if code != 1 || !strings.Contains(errb.String(), want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, errb.String(), want)
			}
			// validate checks the file, and warns about the secret.
			errb.Reset()
			if code := run([]string{"validate", "-config", policy}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "warning: "+policy+": the redis store needs a key secret") || !strings.Contains(errb.String(), want) {
				t.Errorf("validate: exit %d, stderr:\n%s\nwant exit 0 and a warning %q", code, errb.String(), want)
			}
		})
	}
}

func TestServeRefusesBadStoreFlag(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-config", filepath.Join(root, "policies.hcl"), "-store", "memcached://x:1"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "-store:") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
}

// downStore is a store whose backend is unreachable.
type downStore struct{}

func (downStore) Take(context.Context, time.Time, []rules.Op, []rules.Result) error {
	return errors.New("connection refused")
}
func (downStore) Close() error { return nil }

// TestReloadAppliesFleetSize: a reload applies the store's fleet_size (the
// "local" fallback's divisor) at once, and warns that the settings which
// need a new store (url, timeout) wait for a restart.
func TestReloadAppliesFleetSize(t *testing.T) {
	fc, err := failclosed.New(downStore{}, failclosed.Options{FleetSize: 1, NoBackgroundProbe: true, FailureThreshold: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	r := &runningStore{cfg: node.StoreConfig{Kind: "redis", URL: "redis://127.0.0.1:1/0", Timeout: 5 * time.Millisecond, FleetSize: 1}, fc: fc}
	np, diags := builtin.Load("p.hcl", []byte(`
store "redis" {
  url        = "redis://:s3cret@127.0.0.1:2/0"
  timeout    = "20ms"
  fleet_size = 5
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r.cfg.MaxKeys = node.Of(np).Store.MaxKeys // the policy's default: unchanged
	var logs bytes.Buffer
	r.apply(np, slog.New(slog.NewJSONHandler(&logs, nil)))
	// limit 10 over 5 nodes: the local bucket allows 2.
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{1}, Limit: 10, Burst: 10,
		PeriodUS: time.Minute.Microseconds(), Cost: 1, Enforce: true, OnError: rules.FailLocal}
	allowed := 0
	for range 10 {
		res := make([]rules.Result, 1)
		if err := fc.Take(context.Background(), time.Now(), []rules.Op{op}, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("after the reload to fleet_size 5: %d of 10 allowed by the local fallback, want ceil(10/5) = 2", allowed)
	}
	out := logs.String()
	for _, want := range []string{`"msg":"store fleet_size changed","from":1,"to":5`, `"settings":"url,timeout"`, "next restart"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("the logs show the password:\n%s", out)
	}
}

// TestStoreDownAtStartIsDegraded: a node whose Redis is down when it
// starts is degraded from the start (its breaker open), so a strict
// readiness probe keeps it out of the load balancer before any request.
func TestStoreDownAtStartIsDegraded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, diags := builtin.LoadFile(filepath.Join(root, "testdata/fixtures/policies/foundation.hcl"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var logs bytes.Buffer
	st, fc, rs, err := openStore(p, "redis://"+addr+"/0", minRedisKeySecret, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if fc == nil || rs == nil {
		t.Fatal("a redis store without its failclosed wrapper")
	}
	if degraded, reason := fc.Degraded(); !degraded || !strings.Contains(reason, "refused") {
		t.Errorf("Redis down at start: Degraded() = %v %q, want degraded", degraded, reason)
	}
	if !strings.Contains(logs.String(), "redis unreachable at start") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}
