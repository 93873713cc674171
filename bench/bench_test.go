package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/internal/teststack"
)

// benchRules are bench/policy.hcl's rules, as run.sh checks them.
var benchRules = []string{"bench-per-ip", "bench-per-network", "bench-per-api-key", "bench-per-route", "bench-per-ip-shadow"}

// binDir holds the binaries the tests build, once per test binary.
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binary returns the path of the built command pkg ("cmd/edge",
// "bench/minproxy"), building both on first use.
func binary(t *testing.T, name string) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "edge-bench-test")
		if binErr != nil {
			return
		}
		for _, pkg := range []string{"cmd/edge", "bench/minproxy"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, filepath.Base(pkg)), "github.com/edge-gateway/edge/"+pkg).CombinedOutput()
			if err != nil {
				binErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// freeAddr returns a loopback HOST:PORT nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startOrigin serves the demo origin on loopback until the test ends.
func startOrigin(t *testing.T) (*demo.Origin, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := demo.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = o.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return o, ln.Addr().String()
}

// start runs the program until the test ends (SIGTERM to the process it
// started, SIGKILL after 10 s) and returns once addr accepts connections;
// it fails the test if the program exits or does not listen within 30 s.
func start(t *testing.T, addr string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	// Polling for start-up, not for correctness.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		select {
		case <-done:
			t.Fatalf("%s exited: %s", filepath.Base(name), out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s: %s", filepath.Base(name), addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startEdge runs the built edge on policy (a file of bench/, memory store)
// in front of the origin at originAddr until the test ends, and returns
// its listener's and its admin listener's addresses.
func startEdge(t *testing.T, policy, originAddr string) (listen, admin string) {
	t.Helper()
	listen, admin = freeAddr(t), freeAddr(t)
	start(t, listen, binary(t, "edge"), "serve", "-config", policy, "-store", "memory", "-log-level", "warn",
		"-listen", listen, "-admin", admin, "-upstream", "http://"+originAddr)
	return listen, admin
}

// startNginx checks the template file with `nginx -t` once rendered
// (renderNginx) and runs NGINX on it in front of the origin at
// originAddr until the test ends; it returns its listener's address.
func startNginx(t *testing.T, file, originAddr string) string {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	listen := freeAddr(t)
	conf := renderNginx(t, file, dir, listen, originAddr)
	errLog := filepath.Join(dir, "error.log")
	if out, err := exec.Command(bin, "-t", "-p", dir, "-c", conf, "-e", errLog).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	start(t, listen, bin, "-p", dir, "-c", conf, "-e", errLog, "-g", "daemon off;")
	return listen
}

// target is one side of a pair the bench compares: its name and address.
type target struct{ name, addr string }

// startPair starts the demo origin and, in front of it, the edge on policy
// and NGINX on the template conf (skipping without NGINX, before anything
// starts), as goodput.sh and refusal.sh do; it returns the origin and the
// two targets, edge first.
func startPair(t *testing.T, policy, conf string) (*demo.Origin, []target) {
	t.Helper()
	nginxBinary(t)
	origin, originAddr := startOrigin(t)
	edgeAddr, _ := startEdge(t, policy, originAddr)
	return origin, []target{{"edge", edgeAddr}, {"nginx", startNginx(t, conf, originAddr)}}
}

// status sends req on c and returns the answer's status, its body read
// and closed.
func status(c *http.Client, req *http.Request) (int, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// sendBenchLoad sends n requests of the bench load (GET /api/bench, client
// i of 198.18.0.0/15 in X-Forwarded-For and API key i mod 100, as the
// load tool's plain scenario sends them) to addr, and fails the test on
// any answer but 200.
func sendBenchLoad(t *testing.T, addr string, n int) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	for i := range n {
		req, err := http.NewRequest("GET", "http://"+addr+"/api/bench", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.%d.%d", i>>8&0xff, i&0xff))
		req.Header.Set("X-Api-Key", "bench-key-"+strconv.Itoa(i%100))
		code, err := status(c, req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if code != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200 (nothing in the bench refuses)", i, code)
		}
	}
}

// TestBenchPoliciesValidate: `edge validate` accepts both policies, without
// a warning, with five rules and none.
func TestBenchPoliciesValidate(t *testing.T) {
	edge := binary(t, "edge")
	for _, tt := range []struct{ file, want string }{
		{"policy.hcl", "policy.hcl: valid, 5 rules\n"},
		{"empty.hcl", "empty.hcl: valid, 0 rules\n"},
		{"goodput.hcl", "goodput.hcl: valid, 1 rules\n"},
		{"refusal.hcl", "refusal.hcl: valid, 1 rules\n"},
	} {
		cmd := exec.Command(edge, "validate", "-config", tt.file)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stdout.String() != tt.want || stderr.String() != "" {
			t.Errorf("edge validate -config %s: %v, stdout %q, stderr %q; want %q and nothing else", tt.file, err, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// decisionLine is one edge_decisions_total sample of the metrics page.
var decisionLine = regexp.MustCompile(`(?m)^edge_decisions_total\{decision="([a-z_]+)",rule="([^"]+)"\} (\d+)$`)

// TestBenchPolicyDecidesAndForwardsEveryRequest: the built edge on
// policy.hcl (memory store, as run.sh starts it) answers 200 to each of
// 300 requests of the bench load, the origin sees every one, and each of
// the five rules allowed each request: no rule skips, refuses, would
// refuse in shadow or falls back, so the bench measures all five on every
// request.
func TestBenchPolicyDecidesAndForwardsEveryRequest(t *testing.T) {
	origin, originAddr := startOrigin(t)
	listen, admin := startEdge(t, "policy.hcl", originAddr)
	const n = 300
	sendBenchLoad(t, listen, n)
	if got := origin.Hits()["/api/bench"]; got != n {
		t.Errorf("origin saw %d requests, want %d", got, n)
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	allowed := make(map[string]int)
	for _, m := range decisionLine.FindAllStringSubmatch(string(page), -1) {
		v, _ := strconv.Atoi(m[3])
		if m[1] == "allow" {
			allowed[m[2]] = v
		} else if v != 0 {
			t.Errorf("rule %s: %d %s decisions, want none", m[2], v, m[1])
		}
	}
	for _, r := range benchRules {
		if allowed[r] != n {
			t.Errorf("rule %s allowed %d requests, want all %d", r, allowed[r], n)
		}
	}
	if len(allowed) != len(benchRules) {
		t.Errorf("rules with decisions: %v, want %v", allowed, benchRules)
	}
}

// nginxBinary is Debian's nginx, or a skip (a failure under
// EDGE_REQUIRE_STACKS=1, as CI runs, which installs nginx-light).
func nginxBinary(t *testing.T) string {
	t.Helper()
	return teststack.Binary(t, "nginx", "nginx-light", "/usr/sbin/nginx")
}

// renderNginx fills in the template file (nginx.conf, goodput-nginx.conf)
// as run.sh does.
func renderNginx(t *testing.T, file, dir, listen, upstream string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := strings.NewReplacer("@USER@", user, "@LISTEN@", listen, "@UPSTREAM@", upstream).Replace(string(src))
	if strings.Contains(conf, "@") {
		t.Fatalf("nginx.conf has a placeholder run.sh does not fill in:\n%s", conf)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNginxConfig: NGINX accepts nginx.conf (`nginx -t`), it is the
// deployment issue 16 describes (a worker per core, limit_req per client
// address, keepalive to the origin), and NGINX on it forwards 300 requests
// of the bench load from 300 addresses, none refused.
func TestNginxConfig(t *testing.T) {
	nginxBinary(t) // a skip before anything is read
	src, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"worker_processes auto;", "limit_req_zone $binary_remote_addr zone=per_ip", "limit_req zone=per_ip burst=", "real_ip_header X-Forwarded-For;", "keepalive 64;", `proxy_set_header Connection "";`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	origin, originAddr := startOrigin(t)
	listen := startNginx(t, "nginx.conf", originAddr)
	const n = 300
	sendBenchLoad(t, listen, n)
	if got := origin.Hits()["/api/bench"]; got != n {
		t.Errorf("origin saw %d requests through nginx, want %d", got, n)
	}
}

// TestMinproxyForwards: minproxy forwards the bench load to the origin.
func TestMinproxyForwards(t *testing.T) {
	bin := binary(t, "minproxy")
	origin, originAddr := startOrigin(t)
	listen := freeAddr(t)
	start(t, listen, bin, "-listen", listen, "-upstream", originAddr)
	const n = 100
	sendBenchLoad(t, listen, n)
	if got := origin.Hits()["/api/bench"]; got != n {
		t.Errorf("origin saw %d requests through minproxy, want %d", got, n)
	}
	// Loopback only.
	if out, err := exec.Command(bin, "-listen", "0.0.0.0:0").CombinedOutput(); err == nil || !strings.Contains(string(out), "loopback") {
		t.Errorf("minproxy -listen 0.0.0.0:0: %v %s, want a refusal", err, out)
	}
}

// TestGoodputRulesAgree: bench/goodput.hcl on the edge and
// bench/goodput-nginx.conf on NGINX are one rule: 12 logins back to back
// from one address are each admitted as long as the burst and the
// rate allow (5 at once, then 1 a second: at most 5 plus 1 for each
// whole second the 12 took), the rest refused with a 429, on both; and
// another address is not held by the first one's refusals.
func TestGoodputRulesAgree(t *testing.T) {
	_, targets := startPair(t, "goodput.hcl", "goodput-nginx.conf")

	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	login := func(addr, client string) int {
		req, err := http.NewRequest("POST", "http://"+addr+"/login", strings.NewReader(`{"username":"user1@example.com","password":"letmein-demo"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", client)
		code, err := status(c, req)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	for _, target := range targets {
		start := time.Now()
		admitted := 0
		for i := range 12 {
			switch code := login(target.addr, "192.0.2.7"); code {
			case http.StatusOK:
				admitted++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("%s: login %d: status %d, want 200 or 429", target.name, i, code)
			}
		}
		most := 5 + int(time.Since(start)/time.Second)
		if admitted < 5 || admitted > most {
			t.Errorf("%s: %d of 12 logins admitted, want the burst of 5, at most %d in the time they took", target.name, admitted, most)
		}
		if code := login(target.addr, "192.0.2.8"); code != http.StatusOK {
			t.Errorf("%s: another address's login: status %d, want 200", target.name, code)
		}
	}
}

// TestRefusalRulesAgree: bench/refusal.hcl on the edge and
// bench/refusal-nginx.conf on NGINX forward an address's first request
// and refuse its next 20 with a 429, and the origin sees only the first:
// the refusal path the run measures never touches the origin.
func TestRefusalRulesAgree(t *testing.T) {
	origin, targets := startPair(t, "refusal.hcl", "refusal-nginx.conf")

	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	for i, target := range targets {
		client := fmt.Sprintf("198.18.0.%d", i+1)
		for j := range 21 {
			req, err := http.NewRequest("GET", "http://"+target.addr+"/api/bench", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Forwarded-For", client)
			code, err := status(c, req)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[j == 0]; code != want {
				t.Errorf("%s: request %d: status %d, want %d", target.name, j, code, want)
			}
		}
		if got := origin.Hits()["/api/bench"]; got != int64(i+1) {
			t.Errorf("after %s: the origin saw %d requests, want %d: one per address", target.name, got, i+1)
		}
	}
}
