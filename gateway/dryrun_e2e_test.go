package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/internal/testredis"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// dryProbe is a rule that refuses a client's third request for an hour, so
// only a dry-run toggle (or its end) changes its answer within a test.
const dryProbe = `rule "dry-probe" {
  paths  = ["/dry/*"]
  key    = ["ip"]
  limit  = 2
  period = "1h"
}

rule "login-per-ip" {`

const dryToken = "dry-run-token"

func dryPolicy(t testing.TB, storeReplace ...string) *rules.Policy {
	return loadPolicy(t, foundation, append([]string{`rule "login-per-ip" {`, dryProbe}, storeReplace...)...)
}

// probe sends one request to the dry-probe rule from one client.
func probe(t testing.TB, addr string) int {
	return do(t, "GET", "http://"+addr+"/dry/x", "", "X-Forwarded-For", "203.0.113.9").status
}

func toggle(t testing.TB, admin, body string) reply {
	return do(t, "POST", "http://"+admin+"/admin/dry-run", body, "Authorization", "Bearer "+dryToken, "X-Edge-Actor", "alice")
}

type rulesAnswer struct {
	NodeDryRun      bool        `json:"node_dry_run"`
	NodeDryRunUntil string      `json:"node_dry_run_until"`
	Rules           []adminRule `json:"rules"`
}

func adminRulesOf(t testing.TB, admin, name string) (rulesAnswer, adminRule) {
	t.Helper()
	r := do(t, "GET", "http://"+admin+"/admin/rules", "", "Authorization", "Bearer "+dryToken)
	if r.status != http.StatusOK {
		t.Fatalf("GET /admin/rules: got %d %s, want 200", r.status, r.body)
	}
	var a rulesAnswer
	if err := json.Unmarshal([]byte(r.body), &a); err != nil {
		t.Fatal(err)
	}
	for _, ar := range a.Rules {
		if ar.Name == name {
			return a, ar
		}
	}
	t.Fatalf("GET /admin/rules lacks rule %q", name)
	return a, adminRule{}
}

// TestDryRunToggleExpires: a dry-run toggle for 2 seconds turns the rule's
// refusals into forwarded requests counted as dry_run_deny, and enforcement
// returns by itself when the request clock passes the toggle's end; the
// toggle is in the audit log with its actor and reason.
func TestDryRunToggleExpires(t *testing.T) {
	start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: start}
	var logs syncBuffer
	n := startNode(t, dryPolicy(t), nodeOptions{clock: clk, logs: &logs, adminToken: dryToken})

	if got := []int{probe(t, n.addr), probe(t, n.addr), probe(t, n.addr)}; got[2] != http.StatusTooManyRequests || got[0] == 429 || got[1] == 429 {
		t.Fatalf("before the toggle: got %v, want two forwarded then 429", got)
	}
	r := toggle(t, n.admin, `{"rule": "dry-probe", "dry_run": true, "for": "2s", "reason": "INC-7 false positives"}`)
	want := fmt.Sprintf(`{"dry_run":true,"rule":"dry-probe","until":%q}`, start.Add(2*time.Second).Format(time.RFC3339))
	if r.status != http.StatusOK || compact(t, r.body) != want {
		t.Fatalf("POST /admin/dry-run: got %d %s, want 200 %s", r.status, r.body, want)
	}
	_, ar := adminRulesOf(t, n.admin, "dry-probe")
	if !ar.DryRun || ar.DryRunUntil != "2026-12-02T00:00:02Z" || ar.DryRunReason != "INC-7 false positives" {
		t.Errorf("GET /admin/rules during the toggle: got dry_run %v until %q reason %q", ar.DryRun, ar.DryRunUntil, ar.DryRunReason)
	}

	hits := n.origin.Hits()["/dry/x"]
	for i := range 3 {
		clk.Advance(500 * time.Millisecond) // 0.5s, 1s, 1.5s: still within the toggle
		if got := probe(t, n.addr); got == http.StatusTooManyRequests {
			t.Errorf("request %d during the toggle: got 429, want forwarded", i)
		}
	}
	if got := n.origin.Hits()["/dry/x"] - hits; got != 3 {
		t.Errorf("the origin got %d requests during the toggle, want 3", got)
	}
	m := do(t, "GET", "http://"+n.admin+"/metrics", "").body
	if w := `edge_decisions_total{decision="dry_run_deny",rule="dry-probe"} 3`; !strings.Contains(m, w) {
		t.Errorf("metrics lack %q", w)
	}
	_, ar = adminRulesOf(t, n.admin, "dry-probe")
	if ar.Decisions["dry_run_deny"] != 3 || ar.Decisions["deny"] != 1 || ar.Decisions["allow"] != 2 {
		t.Errorf("GET /admin/rules decisions: got %v, want allow 2, deny 1, dry_run_deny 3", ar.Decisions)
	}

	clk.Advance(500 * time.Millisecond) // 2s: the toggle has ended
	if got := probe(t, n.addr); got != http.StatusTooManyRequests {
		t.Errorf("after the toggle: got %d, want 429 (enforcement back by itself)", got)
	}
	if _, ar := adminRulesOf(t, n.admin, "dry-probe"); ar.DryRun || ar.DryRunUntil != "" {
		t.Errorf("GET /admin/rules after the toggle: got dry_run %v until %q, want false and empty", ar.DryRun, ar.DryRunUntil)
	}

	var audit map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["audit"] == "dry-run" {
			audit = rec
		}
	}
	for k, v := range map[string]any{"actor": "alice", "reason": "INC-7 false positives", "rule": "dry-probe", "dry_run": true, "until": "2026-12-02T00:00:02Z", "scope": "node"} {
		if audit[k] != v {
			t.Errorf("audit record %s: got %v, want %v (record %v)", k, audit[k], v, audit)
		}
	}
}

// TestDryRunNodeWide: "*" puts every rule in dry-run until it is turned
// off, and /readyz and /admin/rules say so.
func TestDryRunNodeWide(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	n := startNode(t, dryPolicy(t), nodeOptions{clock: clk, adminToken: dryToken})
	probe(t, n.addr)
	probe(t, n.addr)
	readyDry := func() bool {
		var body struct {
			DryRun bool `json:"dry_run"`
		}
		if err := json.Unmarshal([]byte(do(t, "GET", "http://"+n.admin+"/readyz", "").body), &body); err != nil {
			t.Fatal(err)
		}
		return body.DryRun
	}
	if readyDry() || probe(t, n.addr) != http.StatusTooManyRequests {
		t.Fatal("before the toggle: want /readyz dry_run false and a 429")
	}
	if r := toggle(t, n.admin, `{"rule": "*", "dry_run": true, "for": "30m", "reason": "rollout"}`); r.status != http.StatusOK {
		t.Fatalf("POST /admin/dry-run *: got %d %s", r.status, r.body)
	}
	a, ar := adminRulesOf(t, n.admin, "dry-probe")
	if !readyDry() || !a.NodeDryRun || a.NodeDryRunUntil != "2026-12-02T00:30:00Z" || !ar.DryRun {
		t.Errorf("node-wide toggle on: got readyz %v, node_dry_run %v until %q, rule dry_run %v", readyDry(), a.NodeDryRun, a.NodeDryRunUntil, ar.DryRun)
	}
	if got := probe(t, n.addr); got == http.StatusTooManyRequests {
		t.Error("node-wide toggle on: got 429, want forwarded")
	}
	r := toggle(t, n.admin, `{"rule": "*", "dry_run": false, "reason": "rollout done"}`)
	if r.status != http.StatusOK || compact(t, r.body) != `{"dry_run":false,"rule":"*","until":""}` {
		t.Fatalf("POST /admin/dry-run * off: got %d %s", r.status, r.body)
	}
	if readyDry() || probe(t, n.addr) != http.StatusTooManyRequests {
		t.Error("node-wide toggle off: want /readyz dry_run false and a 429")
	}
}

// TestDryRunOffKeepsPolicyDryRun: turning a toggle off never enforces a
// rule the policy puts in dry-run; the answer says it still is.
func TestDryRunOffKeepsPolicyDryRun(t *testing.T) {
	n := startNode(t, dryPolicy(t), nodeOptions{adminToken: dryToken})
	r := toggle(t, n.admin, `{"rule": "api-shadow-tight", "dry_run": false, "reason": "try to enforce"}`)
	if r.status != http.StatusOK || compact(t, r.body) != `{"dry_run":true,"rule":"api-shadow-tight","until":""}` {
		t.Errorf("off for a policy dry_run rule: got %d %s, want 200 with dry_run true", r.status, r.body)
	}
}

// TestDryRunRefusesBadInput: each bad toggle is a 400 and changes nothing.
func TestDryRunRefusesBadInput(t *testing.T) {
	n := startNode(t, dryPolicy(t), nodeOptions{adminToken: dryToken})
	probe(t, n.addr)
	probe(t, n.addr)
	tests := []struct{ name, body, want string }{
		{"unknown rule", `{"rule": "nope", "dry_run": true, "for": "1m", "reason": "x"}`, "unknown rule"},
		{"missing reason", `{"rule": "dry-probe", "dry_run": true, "for": "1m"}`, `"reason" is required`},
		{"blank reason", `{"rule": "dry-probe", "dry_run": true, "for": "1m", "reason": "  "}`, `"reason" is required`},
		{"missing rule", `{"dry_run": true, "for": "1m", "reason": "x"}`, `"rule" is required`},
		{"missing dry_run", `{"rule": "dry-probe", "for": "1m", "reason": "x"}`, `"dry_run" is required`},
		{"missing for", `{"rule": "dry-probe", "dry_run": true, "reason": "x"}`, `"for" is required`},
		{"for over 24h", `{"rule": "dry-probe", "dry_run": true, "for": "25h", "reason": "x"}`, "at most 24h"},
		{"for negative", `{"rule": "dry-probe", "dry_run": true, "for": "-1m", "reason": "x"}`, "at most 24h"},
		{"for garbage", `{"rule": "dry-probe", "dry_run": true, "for": "soon", "reason": "x"}`, "at most 24h"},
		{"for with off", `{"rule": "dry-probe", "dry_run": false, "for": "1m", "reason": "x"}`, `"for" goes with`},
		{"unknown field", `{"rule": "dry-probe", "dry_run": true, "for": "1m", "reason": "x", "force": true}`, "unknown field"},
		{"not json", `dry-probe on`, "body:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := toggle(t, n.admin, tt.body)
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(r.body), &e)
			if r.status != http.StatusBadRequest || !strings.Contains(e.Error, tt.want) {
				t.Errorf("got %d %s, want 400 with %q", r.status, r.body, tt.want)
			}
		})
	}
	if got := probe(t, n.addr); got != http.StatusTooManyRequests {
		t.Errorf("after refused toggles: got %d, want 429 (nothing changed)", got)
	}
	if ts := n.srv.Engine().DryRuns().List(); len(ts) != 0 {
		t.Errorf("after refused toggles: got toggles %v, want none", ts)
	}
}

// TestAdminRulesListsRules: every rule, with its match as compiled.
func TestAdminRulesListsRules(t *testing.T) {
	p := dryPolicy(t)
	n := startNode(t, p, nodeOptions{adminToken: dryToken})
	a, ar := adminRulesOf(t, n.admin, "login-per-ip")
	if len(a.Rules) != len(p.Rules) {
		t.Errorf("got %d rules, want %d", len(a.Rules), len(p.Rules))
	}
	got, _ := json.Marshal(ar)
	want := `{"name":"login-per-ip","methods":["POST"],"paths":["/login"],"hosts":[],"key":["ip"],"algorithm":"gcra","limit":5,"period":"1m0s","sensitive":true,"action":"limit","dry_run":false,"dry_run_until":"","dry_run_reason":"","decisions":{"allow":0,"deny":0,"dry_run_deny":0,"invalid_identity":0,"missing_identity":0,"skip":0,"store_error_allow":0,"store_error_deny":0}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, shadow := adminRulesOf(t, n.admin, "api-shadow-tight"); !shadow.DryRun || shadow.Paths[0] != "/api/*" {
		t.Errorf("api-shadow-tight: got dry_run %v paths %v, want true and /api/*", shadow.DryRun, shadow.Paths)
	}
}

// dryFleetNode is a fleet node with an admin API and the shared test clock.
type dryFleetNode struct {
	srv         *Server
	addr, admin string
}

// startDryRunFleet runs n nodes on one Redis as startFleet does, each with
// the admin token, the test clock and its Redis store for fleet toggles.
func startDryRunFleet(t testing.TB, p *rules.Policy, clk *fakeClock, n int) []dryFleetNode {
	t.Helper()
	return startDryRunFleetLogged(t, p, clk, make([]io.Writer, n))
}

// startDryRunFleetLogged is startDryRunFleet with one node for each of
// logs, node i writing its JSON log lines to logs[i] when it is not nil.
func startDryRunFleetLogged(t testing.TB, p *rules.Policy, clk *fakeClock, logs []io.Writer) []dryFleetNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	origin := demo.New()
	oln := listen(t)
	wg.Add(1)
	go func() { defer wg.Done(); _ = origin.Serve(ctx, oln) }()
	var nodes []dryFleetNode
	for _, w := range logs {
		log := slog.New(slog.DiscardHandler)
		if w != nil {
			log = slog.New(slog.NewJSONHandler(w, nil))
		}
		rs, err := redisstore.New(redisstore.Options{URL: nodecfg.Of(p).Store.URL, Timeout: nodecfg.Of(p).Store.Timeout})
		if err != nil {
			t.Fatal(err)
		}
		fc, err := failclosed.New(rs, failclosed.Options{FleetSize: nodecfg.Of(p).Store.FleetSize, FailureSpan: breakerSpanBudgets * nodecfg.Of(p).Store.Timeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fc.Close() })
		srv, err := New(Options{
			Policy: p, Store: fc, KeySecret: []byte("one fleet, one secret, 32+ bytes long"), Extensions: builtin.Extensions(),
			Upstream: "http://" + oln.Addr().String(), Registry: prometheus.NewRegistry(), Health: fc,
			Fleet: rs, AdminToken: dryToken, Clock: clk, Logger: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		ln, aln := listen(t), listen(t)
		nodes = append(nodes, dryFleetNode{srv, ln.Addr().String(), aln.Addr().String()})
		wg.Add(2)
		go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
		go func() { defer wg.Done(); _ = srv.ServeAdmin(ctx, aln) }()
	}
	return nodes
}

// eventually polls cond until it holds, for at most 10 seconds: the fleet
// applies a toggle within one poll (a second); what is tested is the
// effect, the bound only ends a broken test.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling for propagation, not for correctness
	}
}

// TestDryRunToggleAcrossFleet: a toggle made on one node is applied by the
// other through Redis, with its expiry; turning it off on either node
// reaches the other.
func TestDryRunToggleAcrossFleet(t *testing.T) {
	r := testredis.Start(t)
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	p := dryPolicy(t, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url     = %q\n  timeout = \"1s\"\n}", r.URL()))
	nodes := startDryRunFleet(t, p, clk, 2)
	a, b := nodes[0], nodes[1]
	probe(t, a.addr)
	probe(t, b.addr)
	if probe(t, a.addr) != http.StatusTooManyRequests || probe(t, b.addr) != http.StatusTooManyRequests {
		t.Fatal("before the toggle: want both nodes to refuse the third request (one shared count)")
	}

	if r := toggle(t, a.admin, `{"rule": "dry-probe", "dry_run": true, "for": "2s", "reason": "INC-8"}`); r.status != http.StatusOK {
		t.Fatalf("toggle on node a: got %d %s", r.status, r.body)
	}
	if got := probe(t, a.addr); got == http.StatusTooManyRequests {
		t.Error("node a right after its own toggle: got 429, want forwarded")
	}
	eventually(t, "node b never applied node a's toggle", func() bool { return probe(t, b.addr) != http.StatusTooManyRequests })
	if _, ar := adminRulesOf(t, b.admin, "dry-probe"); !ar.DryRun || ar.DryRunReason != "INC-8" || ar.DryRunUntil != "2026-12-02T00:00:02Z" || ar.Decisions["dry_run_deny"] < 1 {
		t.Errorf("node b's /admin/rules: got %+v, want the toggle with its reason and end, and a dry_run_deny", ar)
	}
	v, err := r.Do("HGET", "edge:dry-run", "dry-probe")
	if err != nil || !strings.Contains(v, `"reason":"INC-8"`) || !strings.Contains(v, `"actor":"alice"`) {
		t.Errorf("Redis edge:dry-run dry-probe: got %q (%v), want the toggle with its reason and actor", v, err)
	}

	clk.Advance(2 * time.Second) // the toggle's end, on every node's clock
	if probe(t, a.addr) != http.StatusTooManyRequests || probe(t, b.addr) != http.StatusTooManyRequests {
		t.Error("after the toggle's end: want both nodes to refuse again by themselves")
	}

	if r := toggle(t, b.admin, `{"rule": "dry-probe", "dry_run": true, "for": "1h", "reason": "INC-9"}`); r.status != http.StatusOK {
		t.Fatalf("toggle on node b: got %d %s", r.status, r.body)
	}
	eventually(t, "node a never applied node b's toggle", func() bool { return probe(t, a.addr) != http.StatusTooManyRequests })
	if r := toggle(t, a.admin, `{"rule": "dry-probe", "dry_run": false, "reason": "INC-9 over"}`); r.status != http.StatusOK {
		t.Fatalf("toggle off on node a: got %d %s", r.status, r.body)
	}
	if got := probe(t, a.addr); got != http.StatusTooManyRequests {
		t.Errorf("node a right after turning it off: got %d, want 429", got)
	}
	eventually(t, "node b never applied node a's off", func() bool { return probe(t, b.addr) == http.StatusTooManyRequests })
}

// compact re-encodes a JSON body with sorted keys and no spaces.
func compact(t testing.TB, body string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	b, _ := json.Marshal(v)
	return string(bytes.TrimSpace(b))
}

// TestDryRunFleetRedisDown: when Redis cannot take a toggle the answer is
// 503 and nothing changes, and the toggles in force stay while Redis
// cannot be read.
func TestDryRunFleetRedisDown(t *testing.T) {
	r := testredis.Start(t)
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	p := dryPolicy(t, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url     = %q\n  timeout = \"1s\"\n}", r.URL()))
	n := startDryRunFleet(t, p, clk, 1)[0]
	if r := toggle(t, n.admin, `{"rule": "dry-probe", "dry_run": true, "for": "1h", "reason": "INC-10"}`); r.status != http.StatusOK {
		t.Fatalf("toggle: got %d %s", r.status, r.body)
	}
	r.Kill()
	n.srv.pollDryRuns(t.Context()) // a poll that cannot read the hash
	if r := toggle(t, n.admin, `{"rule": "dry-probe", "dry_run": false, "reason": "INC-10 over"}`); r.status != http.StatusServiceUnavailable {
		t.Errorf("toggle off with Redis down: got %d %s, want 503", r.status, r.body)
	}
	if r := toggle(t, n.admin, `{"rule": "*", "dry_run": true, "for": "1h", "reason": "INC-11"}`); r.status != http.StatusServiceUnavailable {
		t.Errorf("toggle on with Redis down: got %d %s, want 503", r.status, r.body)
	}
	a, ar := adminRulesOf(t, n.admin, "dry-probe")
	if !ar.DryRun || ar.DryRunReason != "INC-10" || a.NodeDryRun {
		t.Errorf("after refused toggles: got rule dry_run %v reason %q, node %v; want the first toggle only", ar.DryRun, ar.DryRunReason, a.NodeDryRun)
	}
}
