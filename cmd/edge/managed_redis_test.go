package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// The start-up of a node on Redis as managed services run it
// (docs/deploying.md, "Redis over TLS, ACLs and Sentinel"): TLS with a
// private CA and client certificates, an ACL user whose password comes
// from the environment. The node dials, authenticates and loads its
// script before it serves, and a node that cannot (wrong CA, no client
// certificate, wrong password) starts degraded: /readyz?strict=1 answers
// 503, nothing crashes, and the log says why without the password.

// managedPolicy writes a policy using srv's TLS files by paths relative
// to the policy file, and returns its path.
func managedPolicy(t *testing.T, url string, files testredis.TLSFiles, passwordEnv string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "redis-tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	rel := func(name, from string) string {
		if from == "" {
			return ""
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "redis-tls", name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("  %s = %q\n", strings.TrimSuffix(strings.ReplaceAll(name, ".", "_"), "_pem"), "redis-tls/"+name)
	}
	block := fmt.Sprintf("store \"redis\" {\n  url = %q\n  timeout = \"1s\"\n", url) +
		rel("ca_file.pem", files.CAFile) + rel("cert_file.pem", files.CertFile) + rel("key_file.pem", files.KeyFile)
	if passwordEnv != "" {
		block += fmt.Sprintf("  password_env = %q\n", passwordEnv)
	}
	block += "}\n"
	src, err := os.ReadFile(filepath.Join(root, "testdata/fixtures/policies/foundation.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	policy := strings.Replace(string(src), "store \"memory\" {\n  max_keys = 100000\n}\n", block, 1)
	if policy == string(src) {
		t.Fatal("foundation.hcl has no memory store block to replace")
	}
	path := filepath.Join(dir, "policies.hcl")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startManagedNode opens the store of the policy at path as edge serve
// does and serves the node's admin listener; it returns the admin address,
// or the error openStore returned.
func startManagedNode(t *testing.T, path string, logs io.Writer) (string, error) {
	t.Helper()
	p, diags := builtin.LoadFile(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, fc, _, err := openStore(p, "", minRedisKeySecret, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { st.Close() })
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Health: fc, KeySecret: []byte("a Redis-backed node needs 32 bytes"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return serveAdmin(t, srv), nil
}

func strictReady(t *testing.T, admin string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/readyz?strict=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// scriptCached reports whether srv holds a cached script (SCRIPT FLUSH
// empties it before each case).
func scriptCached(t *testing.T, srv *testredis.Server) bool {
	t.Helper()
	out, err := srv.Do("INFO", "memory")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "number_of_cached_scripts:"); ok {
			return v != "0"
		}
	}
	t.Fatal("INFO memory has no number_of_cached_scripts")
	return false
}

// docsACL is docs/deploying.md's ACL SETUSER line, with password for
// PASSWORD, as arguments.
func docsACL(t *testing.T, password string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs/deploying.md"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(doc)) {
		if strings.HasPrefix(line, "ACL SETUSER edge ") {
			return strings.Fields(strings.Replace(line, ">PASSWORD", ">"+password, 1))
		}
	}
	t.Fatal("docs/deploying.md has no ACL SETUSER edge line")
	return nil
}

func TestManagedRedisAtStart(t *testing.T) {
	ca := testredis.NewCA(t, "managed redis CA")
	srv := testredis.StartTLS(t, testredis.TLSOptions{AuthClients: "yes", CA: ca})
	// The docs' minimal ACL user, as docs/deploying.md writes it.
	if _, err := srv.Do(docsACL(t, "managed-s3cret")...); err != nil {
		t.Fatal(err)
	}
	url := "rediss://edge@" + srv.Addr() + "/0"
	files := srv.TLS()
	tests := []struct {
		name     string
		files    testredis.TLSFiles
		password string // in $EDGE_TEST_REDIS_PASSWORD
		ready    bool
		log      string // in the start-up log line ("|" separates alternatives)
	}{
		{"mTLS and ACL user", files, "managed-s3cret", true, "redis eviction policy checked"},
		{"another CA", testredis.TLSFiles{CAFile: testredis.NewCA(t, "not the server's").File, CertFile: files.CertFile, KeyFile: files.KeyFile}, "managed-s3cret", false, "x509: certificate signed by unknown authority"},
		{"no client certificate", testredis.TLSFiles{CAFile: files.CAFile}, "managed-s3cret", false, "certificate required|connection reset by peer|broken pipe"},
		{"wrong password", files, "not-the-password", false, "redis refused the edge's credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
				t.Fatal(err)
			}
			t.Setenv("EDGE_TEST_REDIS_PASSWORD", tt.password)
			var logs bytes.Buffer
			admin, err := startManagedNode(t, managedPolicy(t, url, tt.files, "EDGE_TEST_REDIS_PASSWORD"), &logs)
			if err != nil {
				t.Fatalf("openStore: %v (a store that cannot connect must not stop the node)", err)
			}
			// openStore has returned: a ready node has authenticated and
			// loaded its script already, before its admin listener
			// answered anything.
			if got := scriptCached(t, srv); got != tt.ready {
				t.Errorf("take script cached when the node started: %v, want %v", got, tt.ready)
			}
			want := 503
			if tt.ready {
				want = 200
			}
			if got := strictReady(t, admin); got != want {
				t.Errorf("/readyz?strict=1: %d, want %d", got, want)
			}
			// TLS 1.3 finishes the client's side of the handshake before the
			// server checks its certificate: the refusal arrives as the
			// server's alert, or as the reset of the socket it closed.
			found := false
			for alt := range strings.SplitSeq(tt.log, "|") {
				found = found || strings.Contains(logs.String(), alt)
			}
			if !found {
				t.Errorf("the start-up log has no %q:\n%s", tt.log, logs.String())
			}
			if strings.Contains(logs.String(), tt.password) {
				t.Errorf("the log shows the password:\n%s", logs.String())
			}
		})
	}
	t.Run("password_env not set", func(t *testing.T) {
		t.Setenv("EDGE_TEST_REDIS_PASSWORD", "")
		_, err := startManagedNode(t, managedPolicy(t, url, files, "EDGE_TEST_REDIS_PASSWORD"), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "$EDGE_TEST_REDIS_PASSWORD") {
			t.Errorf("openStore with an empty password_env: got %v, want an error naming the variable", err)
		}
	})
}

// TestReadyOnlyOnceRedisAnswers: a node that started while its (TLS) Redis
// was down is not ready (/readyz?strict=1 503) until a check succeeds, and
// when it turns ready the check has dialed, shaken hands and loaded the
// script: the Redis came back empty, so its cached script is the node's
// doing, before any request.
func TestReadyOnlyOnceRedisAnswers(t *testing.T) {
	srv := testredis.StartTLS(t, testredis.TLSOptions{})
	srv.Kill()
	var logs bytes.Buffer
	admin, err := startManagedNode(t, managedPolicy(t, srv.URL(), srv.TLS(), ""), &logs)
	if err != nil {
		t.Fatal(err)
	}
	if got := strictReady(t, admin); got != 503 {
		t.Fatalf("/readyz?strict=1 with Redis down: %d, want 503", got)
	}
	srv.Restart()
	deadline := time.Now().Add(20 * time.Second) // a hang guard: the breaker probes every 200ms
	for strictReady(t, admin) != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("not ready 20s after Redis returned:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond) // polling for an event, not timing it
	}
	if !scriptCached(t, srv) {
		t.Error("ready, but the take script is not loaded: the first request would pay for it")
	}
	if n := srv.Clients(t); n < 2 {
		t.Errorf("ready with %d connections open, want the check's and the flushers' (at least 2)", n)
	}
}

// TestDeployingStoreExample: the store block docs/deploying.md shows in
// "Redis over TLS, ACLs and Sentinel" compiles (with its files in place)
// and becomes the store options it describes: the TLS files resolved
// against the policy's directory, the password from password_env; the
// -store flag replaces the url and keeps them, except the TLS files for a
// plain url.
func TestDeployingStoreExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs/deploying.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Redis over TLS, ACLs and Sentinel\n")
	if !ok {
		t.Fatal("docs/deploying.md has no Redis over TLS section")
	}
	_, block, _ := strings.Cut(section, "```hcl\n")
	block, _, _ = strings.Cut(block, "```")
	dir := t.TempDir()
	ca := testredis.NewCA(t, "docs example CA")
	cert, key := ca.Issue("edge", true)
	if err := os.Mkdir(filepath.Join(dir, "redis-tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, from := range map[string]string{"ca.pem": ca.File, "edge.pem": cert, "edge.key": key} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "redis-tls", name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, diags := builtin.Load(filepath.Join(dir, "policies.hcl"), []byte(block))
	if diags.HasErrors() {
		t.Fatalf("the docs' store block: %s\n%s", diags.Error(), block)
	}
	t.Setenv("EDGE_REDIS_PASSWORD", "from-the-environment")
	tests := []struct {
		flag    string
		wantURL string
		tls     bool
	}{
		{"", "rediss://edge@redis.internal:6380/0", true},
		{"rediss+sentinel://edge@mymaster@10.0.0.1:26379", "rediss+sentinel://edge@mymaster@10.0.0.1:26379", true},
	}
	for _, tt := range tests {
		url := node.Of(p).Store.URL
		if tt.flag != "" {
			url = tt.flag
		}
		o, err := redisOptions(node.Of(p).Store, url)
		if err != nil {
			t.Fatal(err)
		}
		if o.URL != tt.wantURL || o.Password != "from-the-environment" {
			t.Errorf("-store %q: URL %q, password %q; want %q and the variable's", tt.flag, o.URL, o.Password, tt.wantURL)
		}
		wantTLS := redisstore.TLS{}
		if tt.tls {
			wantTLS = redisstore.TLS{CAFile: filepath.Join(dir, "redis-tls/ca.pem"), CertFile: filepath.Join(dir, "redis-tls/edge.pem"), KeyFile: filepath.Join(dir, "redis-tls/edge.key")}
		}
		if o.TLS != wantTLS {
			t.Errorf("-store %q: TLS %+v, want %+v", tt.flag, o.TLS, wantTLS)
		}
		if o.DialTimeout != redisstore.DefaultDialTimeout {
			t.Errorf("-store %q: DialTimeout %v, want the default %v", tt.flag, o.DialTimeout, redisstore.DefaultDialTimeout)
		}
	}
	// A plain -store over the TLS block would send the password in the
	// clear: refused, saying why.
	for _, flag := range []string{"redis://edge@10.0.0.1:6379/0", "redis+sentinel://mymaster@10.0.0.1:26379"} {
		if _, err := redisOptions(node.Of(p).Store, flag); err == nil || !strings.Contains(err.Error(), "is not TLS, but the policy's store block is") {
			t.Errorf("-store %q over a TLS store block: err %v, want it refused", flag, err)
		}
	}
}

// TestServeOnManagedRedis: `edge serve` as deployed (its own process), on
// a Redis that wants TLS with client certificates and an ACL user whose
// password is in the environment, with the -store flag naming the URL
// (the block's files and password_env still apply): the very first
// answer its admin listener gives /readyz?strict=1 is 200, since the
// listener opens only once the store's check has passed, and by then the
// script is loaded.
func TestServeOnManagedRedis(t *testing.T) {
	srv := testredis.StartTLS(t, testredis.TLSOptions{AuthClients: "yes"})
	if _, err := srv.Do(docsACL(t, "serve-s3cret")...); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	// The policy names another server; -store replaces its url only.
	path := managedPolicy(t, "rediss://nobody@127.0.0.1:1/0", srv.TLS(), "EDGE_TEST_REDIS_PASSWORD")
	listen, admin := freeAddr(t), freeAddr(t)
	p := startEdgeEnv(t, []string{"EDGE_KEY_SECRET=a fleet's secret, at least 32 bytes long", "EDGE_TEST_REDIS_PASSWORD=serve-s3cret"},
		"-config", path, "-listen", listen, "-admin", admin, "-store", "rediss://edge@"+srv.Addr()+"/0")
	logs, exited := p.logs, p.exited
	var first int
	waitFor(t, "the node's admin listener", func() bool {
		resp, err := http.Get("http://" + admin + "/readyz?strict=1")
		if err != nil {
			select {
			case <-exited:
				t.Fatalf("edge serve exited:\n%s", logs.String())
			default:
			}
			return false
		}
		resp.Body.Close()
		first = resp.StatusCode
		return true
	})
	if first != 200 {
		t.Errorf("the first /readyz?strict=1 answered %d, want 200:\n%s", first, logs.String())
	}
	if !scriptCached(t, srv) {
		t.Error("ready, but the take script is not loaded")
	}
	if strings.Contains(logs.String(), "serve-s3cret") {
		t.Errorf("the log shows the password:\n%s", logs.String())
	}
}
