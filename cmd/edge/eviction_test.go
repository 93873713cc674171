package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// redisCheckPolicy is a policy on Redis with a budget of a second: a
// start-up check must not time out on a busy machine (openStoreLogs' url
// replaces the policy's, as the -store flag does).
func redisCheckPolicy(t *testing.T) *rules.Policy {
	t.Helper()
	p, diags := builtin.Load("p.hcl", []byte("store \"redis\" {\n  url     = \"redis://127.0.0.1:1/0\"\n  timeout = \"1s\"\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// openStoreLogs opens p's store at url as edge serve does (it closes when
// the test ends) and returns what it logged meanwhile, as JSON lines.
func openStoreLogs(t *testing.T, p *rules.Policy, url string) string {
	t.Helper()
	var logs bytes.Buffer
	st, _, _, err := openStore(p, url, minRedisKeySecret, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return logs.String()
}

// lastLine is the last line of logs that contains s, or "".
func lastLine(logs, s string) string {
	var line string
	for l := range strings.Lines(logs) {
		if strings.Contains(l, s) {
			line = l
		}
	}
	return line
}

// TestRedisEvictionPolicyChecked: a node on Redis reads maxmemory-policy
// at start and says loudly (error level) when it can evict live counters,
// that it is fine when it cannot, and that it could not check when CONFIG
// is refused. Each against a real redis-server whose policy CONFIG SET
// set.
func TestRedisEvictionPolicyChecked(t *testing.T) {
	p := redisCheckPolicy(t)
	tests := []struct {
		name, policy string
		noConfig     bool   // the store's user may not run CONFIG
		want         string // in the log line
		level        string
	}{
		{"allkeys", "allkeys-lru", false, "REDIS EVICTS LIVE COUNTERS: maxmemory-policy allkeys-lru", "ERROR"},
		{"volatile-lru", "volatile-lru", false, "REDIS EVICTS LIVE COUNTERS: every edge key has a TTL", "ERROR"},
		{"noeviction", "noeviction", false, "redis eviction policy checked", "INFO"},
		{"volatile-ttl", "volatile-ttl", false, "redis eviction policy checked", "INFO"},
		{"CONFIG refused", "allkeys-lru", true, "could not check redis maxmemory-policy", "WARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testredis.Start(t)
			if _, err := r.Do("CONFIG", "SET", "maxmemory-policy", tt.policy); err != nil {
				t.Fatal(err)
			}
			url := r.URL()
			if tt.noConfig {
				if _, err := r.Do("ACL", "SETUSER", "edge", "on", ">edge-pass", "~*", "+@all", "-config"); err != nil {
					t.Fatal(err)
				}
				url = "redis://edge:edge-pass@" + r.Addr() + "/0"
			}
			logs := openStoreLogs(t, p, url)
			line := lastLine(logs, tt.want)
			if line == "" || !strings.Contains(line, `"level":"`+tt.level+`"`) {
				t.Fatalf("no %s line with %q in the logs:\n%s", tt.level, tt.want, logs)
			}
			if !tt.noConfig && !strings.Contains(line, `"maxmemory_policy":"`+tt.policy+`"`) {
				t.Errorf("the line does not name the policy: %s", line)
			}
		})
	}
}

// TestReloadAppliesMaxKeys: a reload that changes the memory store's
// max_keys applies at once (the rules' key budgets travel in their ops),
// and says so rather than asking for a restart.
func TestReloadAppliesMaxKeys(t *testing.T) {
	r := &runningStore{cfg: node.StoreConfig{Kind: "memory", StoreKeys: rules.StoreKeys{MaxKeys: 100000}, FleetSize: 1, Timeout: node.DefaultStoreTimeout}}
	np, diags := builtin.Load("p.hcl", []byte("store \"memory\" {\n  max_keys = 5000\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var logs bytes.Buffer
	r.apply(np, slog.New(slog.NewJSONHandler(&logs, nil)))
	out := logs.String()
	if !strings.Contains(out, `"msg":"store max_keys changed: the rules' key budgets follow it from their next new key","from":100000,"to":5000`) || strings.Contains(out, "next restart") {
		t.Errorf("got logs:\n%s", out)
	}
	if r.cfg.MaxKeys != 5000 {
		t.Errorf("the running settings: got max_keys %d, want 5000", r.cfg.MaxKeys)
	}
}
