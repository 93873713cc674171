package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// reloadPolicy is a policy of one rule, "signup", limit per minute per
// client; extra is appended (more rules, test blocks).
func reloadPolicy(limit int, extra string) string {
	return fmt.Sprintf(`edge {
  listen           = "127.0.0.1:18080"
  admin_listen     = "127.0.0.1:19901"
  upstream         = "http://127.0.0.1:19000"
  trusted_proxies  = ["127.0.0.1/32"]
  forwarded_header = "x-forwarded-for"
  max_body_bytes   = 65536
}

store "memory" {
  max_keys = 10000
}

rule "signup" {
  paths  = ["/signup"]
  key    = ["ip"]
  limit  = %d
  period = "1m"
}
%s`, limit, extra)
}

// reloadNode is a node as serve wires it: its reloader is the gateway's
// Options.Reload, on real loopback listeners, with a demo origin.
type reloadNode struct {
	srv         *gateway.Server
	rl          *reloader
	path        string
	addr, admin string
	logs        *syncBuffer
	ctx         context.Context
}

// syncBuffer is a bytes.Buffer safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const reloadToken = "reload-test-token"

// startReloadNode starts a node on src, on a memory store or on store
// (which the test closes) when given.
func startReloadNode(t *testing.T, src string, store ...rules.Store) *reloadNode {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, diags := builtin.LoadFile(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var st rules.Store
	if len(store) > 0 {
		st = store[0]
	} else {
		ms, err := memstore.New(memstore.Options{MaxKeys: node.Of(p).Store.MaxKeys})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ms.Close() })
		st = ms
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	oln, ln, aln := listen(), listen(), listen()
	wg.Add(1)
	go func() { defer wg.Done(); _ = demo.New().Serve(ctx, oln) }()

	n := &reloadNode{path: path, addr: ln.Addr().String(), admin: aln.Addr().String(), logs: &syncBuffer{}, ctx: ctx}
	log := slog.New(slog.NewJSONHandler(n.logs, nil))
	var err error
	n.srv, err = gateway.New(gateway.Options{
		Policy: p, Store: st, Upstream: "http://" + oln.Addr().String(), Logger: log, Extensions: builtin.Extensions(),
		AdminToken: reloadToken,
		Reload:     func() gateway.ReloadResult { return n.rl.reload("admin") },
	})
	if err != nil {
		t.Fatal(err)
	}
	n.rl = newReloader(ctx, n.srv, path, startSettings{
		listen: n.srv.ListenAddr(), adminListen: n.srv.AdminAddr(), maxBodyBytes: node.Of(p).MaxBodyBytes, keySecretEnv: node.Of(p).KeySecretEnv, decideListen: p.DecideListen,
	}, &runningStore{cfg: node.Of(p).Store}, log, io.Discard)
	wg.Add(2)
	go func() { defer wg.Done(); _ = n.srv.Serve(ctx, ln) }()
	go func() { defer wg.Done(); _ = n.srv.ServeAdmin(ctx, aln) }()
	return n
}

// write replaces the policy file as an editor does: a temporary file in
// the same directory, renamed over the old one.
func (n *reloadNode) write(t *testing.T, src string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(n.path), ".policies.hcl.swp")
	if err := os.WriteFile(tmp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, n.path); err != nil {
		t.Fatal(err)
	}
}

var reloadClient = &http.Client{Timeout: 30 * time.Second}

type reloadReply struct {
	Status      string   `json:"status"`
	Rules       int      `json:"rules"`
	Warnings    []string `json:"warnings"`
	Diagnostics []string `json:"diagnostics"`
	code        int
}

// postReload is POST /admin/reload with the node's token.
func (n *reloadNode) postReload(t *testing.T) reloadReply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.admin+"/admin/reload", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+reloadToken)
	resp, err := reloadClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r reloadReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	r.code = resp.StatusCode
	return r
}

// send is one public request from client (X-Forwarded-For, trusted from
// loopback); it returns the status.
func (n *reloadNode) send(method, path, client string) (int, error) {
	req, _ := http.NewRequest(method, "http://"+n.addr+path, nil)
	req.Header.Set("X-Forwarded-For", client)
	resp, err := reloadClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (n *reloadNode) mustSend(t *testing.T, method, path, client string) int {
	t.Helper()
	code, err := n.send(method, path, client)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestReloadEndpointAppliesNewRules: POST /admin/reload swaps a good file
// in (a new rule refuses at once), and the counters of a rule whose name
// and limit are unchanged carry over.
func TestReloadEndpointAppliesNewRules(t *testing.T) {
	n := startReloadNode(t, reloadPolicy(2, ""))
	for i := range 2 {
		if got := n.mustSend(t, "POST", "/signup", "203.0.113.1"); got != 200 {
			t.Fatalf("signup %d: got %d, want 200", i+1, got)
		}
	}
	// Before the reload /api has no rule.
	for range 2 {
		if got := n.mustSend(t, "GET", "/api/items", "203.0.113.2"); got != 200 {
			t.Fatalf("/api before the reload: got %d, want 200", got)
		}
	}
	n.write(t, reloadPolicy(2, `
rule "api" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 1
  period = "1m"
}
`))
	r := n.postReload(t)
	if r.code != 200 || r.Status != "reloaded" || r.Rules != 2 || len(r.Warnings) != 0 {
		t.Fatalf("reload: got %d %+v, want 200 reloaded with 2 rules and no warnings", r.code, r)
	}
	if n.srv.Policy().Rule("api") == nil {
		t.Fatal("the new policy is not the running one")
	}
	if got := n.mustSend(t, "GET", "/api/items", "203.0.113.3"); got != 200 {
		t.Errorf("/api first request after the reload: got %d, want 200", got)
	}
	if got := n.mustSend(t, "GET", "/api/items", "203.0.113.3"); got != 429 {
		t.Errorf("/api second request after the reload: got %d, want 429 from the new rule", got)
	}
	// signup (name and limit unchanged) kept its counter: the client that
	// used its 2 before the reload is refused.
	if got := n.mustSend(t, "POST", "/signup", "203.0.113.1"); got != 429 {
		t.Errorf("signup after the reload: got %d, want 429 (the counter survives the reload)", got)
	}
	if !strings.Contains(n.logs.String(), `"msg":"policy reloaded","trigger":"admin"`) {
		t.Errorf("no reload in the log:\n%s", n.logs.String())
	}
}

// TestReloadRefusedByFailingTestBlock: a file that loads but whose test
// block fails is refused with 422 naming the test at its line, and the
// old policy keeps serving.
func TestReloadRefusedByFailingTestBlock(t *testing.T) {
	n := startReloadNode(t, reloadPolicy(2, ""))
	old := n.srv.Policy()
	src := reloadPolicy(1, `
test "two signups pass" {
  request {
    method = "POST"
    path   = "/signup"
    from   = "203.0.113.7"
    repeat = 2
    expect = "allow"
  }
}
`)
	n.write(t, src)
	r := n.postReload(t)
	if r.code != 422 || r.Status != "refused" || r.Rules != 1 || len(r.Diagnostics) != 1 {
		t.Fatalf("reload: got %d %+v, want 422 refused, the running policy's 1 rule, 1 diagnostic", r.code, r)
	}
	line := strings.Count(src[:strings.Index(src, "test \"")], "\n") + 1
	if d := r.Diagnostics[0]; !strings.HasPrefix(d, fmt.Sprintf("%s:%d,", n.path, line)) || !strings.Contains(d, `test "two signups pass" failed`) {
		t.Errorf("diagnostic %q: want it at %s:%d naming the test", d, n.path, line)
	}
	if n.srv.Policy() != old {
		t.Fatal("a policy whose test fails replaced the running one")
	}
	// The old limit (2) serves.
	for i, want := range []int{200, 200, 429} {
		if got := n.mustSend(t, "POST", "/signup", "198.51.100.1"); got != want {
			t.Errorf("signup %d after the refused reload: got %d, want %d", i+1, got, want)
		}
	}
	if !strings.Contains(n.logs.String(), "reload refused: keeping the running policy") {
		t.Errorf("refusal not logged:\n%s", n.logs.String())
	}
	// The same file with a test that passes goes in.
	n.write(t, reloadPolicy(1, `
test "the second signup is refused" {
  request {
    method = "POST"
    path   = "/signup"
    from   = "203.0.113.7"
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/signup"
    from   = "203.0.113.7"
    expect = "deny"
    rule   = "signup"
  }
}
`))
	if r := n.postReload(t); r.code != 200 || n.srv.Policy() == old {
		t.Fatalf("reload with a passing test: got %d %+v, want 200 and the new policy", r.code, r)
	}
}

// TestReloadNamesSettingsItCannotApply: a reload applies the rules and
// names, in the answer and the log, each changed setting that waits for a
// restart.
func TestReloadNamesSettingsItCannotApply(t *testing.T) {
	n := startReloadNode(t, reloadPolicy(2, ""))
	src := reloadPolicy(5, "")
	for _, r := range [][2]string{
		{`listen           = "127.0.0.1:18080"`, `listen           = "127.0.0.1:28080"`},
		{`admin_listen     = "127.0.0.1:19901"`, `admin_listen     = "127.0.0.1:29901"`},
		{`max_body_bytes   = 65536`, `max_body_bytes   = 1024
  key_secret_env   = "OTHER_SECRET"
  header_timeout   = "20s"`},
		{`store "memory" {
  max_keys = 10000
}`, `store "redis" {
  url = "redis://:hunter2@127.0.0.1:6390/0"
}`},
	} {
		if !strings.Contains(src, r[0]) {
			t.Fatalf("the policy has no %q", r[0])
		}
		src = strings.Replace(src, r[0], r[1], 1)
	}
	n.write(t, src)
	r := n.postReload(t)
	if r.code != 200 || n.srv.Policy().Rule("signup").Limit != 5 {
		t.Fatalf("reload: got %d %+v, want 200 and limit 5 in force", r.code, r)
	}
	settings := []string{"listen", "admin_listen", "max_body_bytes", "header_timeout", "key_secret_env", "store kind", "store url"}
	if len(r.Warnings) != len(settings) {
		t.Errorf("warnings %q: want one for each of %q", r.Warnings, settings)
	}
	logs := n.logs.String()
	for _, s := range settings {
		found := false
		for _, w := range r.Warnings {
			found = found || strings.HasPrefix(w, s+": ")
		}
		if !found {
			t.Errorf("no warning names %s: %q", s, r.Warnings)
		}
		if !strings.Contains(logs, `"setting":"`+s+`"`) {
			t.Errorf("the log does not name %s:\n%s", s, logs)
		}
	}
	if strings.Contains(logs, "hunter2") || strings.Contains(strings.Join(r.Warnings, "\n"), "hunter2") {
		t.Error("the store's password is in the log or the answer")
	}
	// A second reload of the same file warns again: the settings are
	// still not in force.
	if r := n.postReload(t); len(r.Warnings) != len(settings) {
		t.Errorf("second reload: warnings %q, want %d", r.Warnings, len(settings))
	}
	// The node still listens where it started.
	if got := n.mustSend(t, "GET", "/api/x", "203.0.113.9"); got != 200 {
		t.Errorf("after the reload: got %d, want 200 on the original listener", got)
	}
}

// TestReloadOnFileReplace: a change of the file, made as editors make it
// (a new file renamed over the old one), reloads it; a broken one written
// the same way is refused, and the policy before it stays.
func TestReloadOnFileReplace(t *testing.T) {
	n := startReloadNode(t, reloadPolicy(2, ""))
	done, err := n.rl.watch(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	n.write(t, reloadPolicy(7, ""))
	waitFor(t, "the new limit after a rename over the file", func() bool { return n.srv.Policy().Rule("signup").Limit == 7 })
	good := n.srv.Policy()

	broken, err := os.ReadFile(filepath.Join(root, "testdata/fixtures/policies/broken/bad-period.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	n.write(t, string(broken))
	waitFor(t, "the broken file's refusal in the log", func() bool {
		return strings.Contains(n.logs.String(), `"msg":"reload refused: keeping the running policy","trigger":"file"`)
	})
	if n.srv.Policy() != good {
		t.Error("a broken file replaced the running policy")
	}
	// Emptied (a writer that truncates first): nothing loads until it has
	// content.
	if err := os.WriteFile(n.path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the empty file in the log", func() bool { return strings.Contains(n.logs.String(), `"msg":"policy file is empty`) })
	if n.srv.Policy() != good {
		t.Error("an empty file replaced the running policy")
	}
	// Removed, then written anew (rm; cp): the new file reloads.
	if err := os.Remove(n.path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.path, []byte(reloadPolicy(9, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the limit of a file written anew", func() bool { return n.srv.Policy().Rule("signup").Limit == 9 })
	if got := strings.Count(n.logs.String(), `"msg":"policy reloaded","trigger":"file"`); got != 2 {
		t.Errorf("%d reloads by the watch, want 2 (one per new content)", got)
	}
	_ = done
}

// waitFor polls cond for up to 10 seconds: the watch's debounce runs on
// the wall clock; what the test checks is the policy that results.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBrokenReloadsUnderLoad: every file in the broken fixtures, sent as a
// reload while requests flow, is refused (422), and every request is
// answered as the running policy answers it.
func TestBrokenReloadsUnderLoad(t *testing.T) {
	n := startReloadNode(t, reloadPolicy(2, ""))
	good := n.srv.Policy()
	goodSrc, err := os.ReadFile(n.path)
	if err != nil {
		t.Fatal(err)
	}
	// 203.0.113.1 has used its two signups: the running policy refuses it.
	for range 2 {
		n.mustSend(t, "POST", "/signup", "203.0.113.1")
	}
	dir := filepath.Join(root, "testdata/fixtures/policies/broken")
	files, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil || len(files) < 6 {
		t.Fatalf("broken fixtures: %v, %v", files, err)
	}

	// The load: a refused client, fresh clients (allowed once each) and a
	// route without a rule, until the reloads are done (at most 20000).
	stop := make(chan struct{})
	started := make(chan struct{})
	var sent int
	var bad []string
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for i := 0; i < 20000; i++ {
			if i == 30 {
				close(started)
			}
			select {
			case <-stop:
				if i >= 30 {
					return
				}
			default:
			}
			var method, path, client string
			var want int
			switch i % 3 {
			case 0:
				method, path, client, want = "POST", "/signup", "203.0.113.1", 429
			case 1:
				method, path, client, want = "POST", "/signup", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), 200
			default:
				method, path, client, want = "GET", "/api/items", "203.0.113.1", 200
			}
			got, err := n.send(method, path, client)
			sent++
			if err != nil || got != want {
				bad = append(bad, fmt.Sprintf("request %d %s %s from %s: got %d (%v), want %d", i, method, path, client, got, err, want))
			}
		}
	}()
	<-started
	reloads := 0
	for round := range 3 {
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n.write(t, string(src))
			r := n.postReload(t)
			reloads++
			if r.code != 422 || r.Status != "refused" || len(r.Diagnostics) == 0 || r.Rules != 1 {
				t.Errorf("round %d, %s: got %d %+v, want 422 refused with diagnostics", round, filepath.Base(f), r.code, r)
			}
			if n.srv.Policy() != good {
				t.Fatalf("%s replaced the running policy", filepath.Base(f))
			}
		}
	}
	close(stop)
	<-loadDone
	if len(bad) > 0 {
		t.Errorf("%d of %d requests answered otherwise than the running policy does; first: %s", len(bad), sent, bad[0])
	}
	t.Logf("%d requests during %d refused reloads", sent, reloads)
	resp, err := reloadClient.Get("http://" + n.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`edge_reloads_total{result="refused"} %d`, reloads); !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack %q", want)
	}
	// The good file goes back in.
	n.write(t, string(goodSrc))
	if r := n.postReload(t); r.code != 200 {
		t.Errorf("reload of the good file: got %d %+v", r.code, r)
	}
}

// TestReloadCountersAcrossLimitChange: counters are keyed by the rule's
// name, so a rule whose limit changes keeps its state, read under the new
// limit; one whose algorithm changes starts from fresh counters (a state
// of another algorithm reads as fresh: rules.State).
func TestReloadCountersAcrossLimitChange(t *testing.T) {
	t.Run("memory", func(t *testing.T) { countersAcrossLimitChange(t, startReloadNode(t, reloadPolicy(5, ""))) })
	t.Run("redis", func(t *testing.T) {
		addr := os.Getenv("EDGE_REDIS_ADDR")
		if addr == "" {
			t.Skip("EDGE_REDIS_ADDR is not set: no real Redis to test against")
		}
		rs, err := redisstore.New(redisstore.Options{URL: "redis://" + addr + "/0", Timeout: time.Second,
			Prefix: fmt.Sprintf("edgetest:reload:%x:", rand.Uint64())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		// A Redis that does not answer would fail open: this test is about
		// counters in a Redis that does.
		if err := rs.Ping(context.Background()); err != nil {
			t.Fatalf("redis at %s: %v", addr, err)
		}
		countersAcrossLimitChange(t, startReloadNode(t, reloadPolicy(5, ""), rs))
	})
}

func countersAcrossLimitChange(t *testing.T, n *reloadNode) {
	const c = "203.0.113.50"
	for i := range 4 {
		if got := n.mustSend(t, "POST", "/signup", c); got != 200 {
			t.Fatalf("signup %d: got %d, want 200", i+1, got)
		}
	}
	// limit 5 → 3: four used, so the client is over the new limit.
	n.write(t, reloadPolicy(3, ""))
	if r := n.postReload(t); r.code != 200 {
		t.Fatalf("reload: %d %+v", r.code, r)
	}
	if got := n.mustSend(t, "POST", "/signup", c); got != 429 {
		t.Errorf("after lowering the limit to 3: got %d, want 429 (the four signups still count)", got)
	}
	// limit 3 → 10: the same state leaves room.
	n.write(t, reloadPolicy(10, ""))
	if r := n.postReload(t); r.code != 200 {
		t.Fatalf("reload: %d %+v", r.code, r)
	}
	if got := n.mustSend(t, "POST", "/signup", c); got != 200 {
		t.Errorf("after raising the limit to 10: got %d, want 200", got)
	}
	// The algorithm changes: fresh counters, 3 of 3 allowed, then refused.
	n.write(t, strings.Replace(reloadPolicy(3, ""), `period = "1m"`, `period = "1m"
  algorithm = "sliding_log"`, 1))
	if r := n.postReload(t); r.code != 200 {
		t.Fatalf("reload: %d %+v", r.code, r)
	}
	for i, want := range []int{200, 200, 200, 429} {
		if got := n.mustSend(t, "POST", "/signup", c); got != want {
			t.Errorf("sliding_log request %d: got %d, want %d (a new algorithm starts fresh)", i+1, got, want)
		}
	}
}

// TestReloadCommand: `edge reload` posts to the admin API with
// $EDGE_ADMIN_TOKEN and exits 0 once reloaded, 1 on a refusal (422, the
// diagnostics on stderr) or a wrong token.
func TestReloadCommand(t *testing.T) {
	n := startReloadNode(t, reloadPolicy(2, ""))
	t.Setenv("EDGE_ADMIN_TOKEN", reloadToken)
	n.write(t, strings.Replace(reloadPolicy(2, ""), `"127.0.0.1:18080"`, `"127.0.0.1:28080"`, 1))
	var out, errb bytes.Buffer
	if code := run([]string{"reload", "-admin", n.admin}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "reloaded: 1 rules") || !strings.Contains(out.String(), "warning: listen: ") {
		t.Errorf("good file: exit %d, stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	broken, err := os.ReadFile(filepath.Join(root, "testdata/fixtures/policies/broken/bad-period.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	n.write(t, string(broken))
	out.Reset()
	errb.Reset()
	if code := run([]string{"reload", "-admin", "http://" + n.admin}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "refused") || !strings.Contains(errb.String(), n.path+":10,") {
		t.Errorf("broken file: exit %d, stderr:\n%s", code, errb.String())
	}
	t.Setenv("EDGE_ADMIN_TOKEN", "wrong")
	errb.Reset()
	if code := run([]string{"reload", "-admin", n.admin}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "401") {
		t.Errorf("wrong token: exit %d, stderr:\n%s", code, errb.String())
	}
}
