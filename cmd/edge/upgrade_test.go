//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
)

// Binary upgrades (upgrade.go) tested as deployed: the edge binary, built
// here, started as its own process, upgraded by SIGUSR2 to the file that
// replaced it, under a closed-loop load. EDGE_LONG_TESTS=1 runs more rounds
// under more load.

// hangGuard bounds every wait on a condition of these tests.
const hangGuard = 30 * time.Second

// edgeBinary builds ./cmd/edge into a directory of the test's (the go
// build cache makes every build after the first a link) and returns the
// build, the release a test installs, and a copy of it installed at the
// path the node runs from (which the test replaces).
func edgeBinary(t *testing.T) (bin, release string) {
	t.Helper()
	dir := t.TempDir()
	release = filepath.Join(dir, "release", "edge")
	if out, err := exec.Command("go", "build", "-o", release, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin = filepath.Join(dir, "bin", "edge")
	installBinary(t, release, bin)
	return bin, release
}

// installBinary puts src at dst as a deployment does: written beside it,
// then renamed over it (the running process keeps the old file).
func installBinary(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// upgradePolicy is a node with an IP rule, a visitor rule, and the load's
// route, which no rule matches.
func upgradePolicy(listen, admin, upstream string) string {
	return upgradePolicyOn(listen, admin, upstream, "store \"memory\" {\n  max_keys = 10000\n}")
}

// upgradePolicyOn is upgradePolicy with the store block store.
func upgradePolicyOn(listen, admin, upstream, store string) string {
	return fmt.Sprintf(`edge {
  listen           = %q
  admin_listen     = %q
  upstream         = "http://%s"
  trusted_proxies  = ["127.0.0.1/32"]
  forwarded_header = "x-forwarded-for"
}

%s

visitor {
  cookie     = "__edge_vid"
  secret_env = "EDGE_TEST_VISITOR_SECRETS"
  secure     = false
}

rule "signup" {
  paths  = ["/signup"]
  key    = ["ip"]
  limit  = 2
  period = "1h"
}

rule "api-per-visitor" {
  paths     = ["/api/*"]
  key       = ["visitor"]
  algorithm = "fixed_window"
  limit     = 2
  period    = "1h"
}
`, listen, admin, upstream, store)
}

// upgradeNode is an edge process tree under test: the process started,
// and whichever serves after upgrades.
type upgradeNode struct {
	bin, policy string
	addr, admin string
	logPath     string
	notify      *notifySocket
	first       *exec.Cmd
	exited      chan struct{} // the first process exited
}

// startUpgradeNode starts bin on a policy of its own with an in-test
// origin, its key and visitor secrets unset (random: the upgrade must hand
// them over), and waits until it is ready (READY=1 on its notify socket).
// extra are more arguments of serve and env more variables.
func startUpgradeNode(t *testing.T, bin string, extra []string, env ...string) *upgradeNode {
	t.Helper()
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})}
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go origin.Serve(oln)
	t.Cleanup(func() { origin.Close() })

	dir := t.TempDir()
	n := &upgradeNode{bin: bin, addr: freeAddr(t), admin: freeAddr(t), policy: filepath.Join(dir, "policies.hcl"), logPath: filepath.Join(dir, "edge.log")}
	src := upgradePolicy(n.addr, n.admin, oln.Addr().String())
	if len(extra) == 2 && extra[0] == "-store" && strings.HasPrefix(extra[1], "redis://") {
		// A store call's budget for a busy machine: with the default 5ms
		// an ordinary rule fails open under load and a refused client
		// passes, which is not what the test is about.
		src = upgradePolicyOn(n.addr, n.admin, oln.Addr().String(), fmt.Sprintf("store \"redis\" {\n  url     = %q\n  timeout = \"1s\"\n}", extra[1]))
	}
	if err := os.WriteFile(n.policy, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	n.notify = listenNotify(t, filepath.Join(dir, "notify"))
	logf, err := os.Create(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"serve", "-config", n.policy}, extra...)...)
	// An *os.File, not a pipe: Wait returns when this process exits,
	// though the process it upgrades to keeps the file open.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(append(os.Environ(), "EDGE_KEY_SECRET=", "EDGE_TEST_VISITOR_SECRETS=", "NOTIFY_SOCKET="+n.notify.name), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.first, n.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() { n.stopAll(t) })
	if m := n.notify.await(t, "READY=1"); m.pid != cmd.Process.Pid {
		t.Fatalf("READY=1 from pid %d, want %d", m.pid, cmd.Process.Pid)
	}
	return n
}

// logLines returns the node's JSON log lines (every process's: they share
// the file).
func (n *upgradeNode) logLines(t *testing.T) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// awaitLog waits for the count-th log line with message msg and returns it.
func (n *upgradeNode) awaitLog(t *testing.T, msg string, count int) map[string]any {
	t.Helper()
	var found map[string]any
	waitUntil(t, fmt.Sprintf("log line %d %q", count, msg), func() bool {
		seen := 0
		for _, l := range n.logLines(t) {
			if l["msg"] == msg {
				if seen++; seen == count {
					found = l
					return true
				}
			}
		}
		return false
	})
	return found
}

// servingPIDs are the PIDs the node's processes logged as serving, in
// order.
func (n *upgradeNode) servingPIDs(t *testing.T) []int {
	var pids []int
	for _, l := range n.logLines(t) {
		if l["msg"] == "edge listening" {
			if f, ok := l["pid"].(float64); ok {
				pids = append(pids, int(f))
			}
		}
	}
	return pids
}

// stopAll stops every process the node started that is still running.
func (n *upgradeNode) stopAll(t *testing.T) {
	for _, pid := range n.servingPIDs(t) {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	select {
	case <-n.exited:
	case <-time.After(hangGuard):
	}
}

// alive reports whether pid runs (a zombie, exited and not yet reaped by
// whoever adopted it, does not).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, hangGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// post sends one request from the client address ip (through the trusted
// X-Forwarded-For) and returns its status.
func post(t *testing.T, c *http.Client, url, ip string) int {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader("x=1"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", ip)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s from %s: %v", url, ip, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// refusedClients drives two clients to refusal: an IP on /signup, and a
// visitor (its cookie in jar) on /api/. It returns the visitor's client.
func refusedClients(t *testing.T, n *upgradeNode) *http.Client {
	t.Helper()
	plain := &http.Client{Timeout: hangGuard}
	for i, want := range []int{200, 200, 429} {
		if got := post(t, plain, "http://"+n.addr+"/signup", "203.0.113.7"); got != want {
			t.Fatalf("signup %d from 203.0.113.7: got %d, want %d", i+1, got, want)
		}
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	visitor := &http.Client{Timeout: hangGuard, Jar: jar}
	post(t, visitor, "http://"+n.addr+"/api/items", "198.51.100.20") // mints the cookie
	u := mustURL(t, "http://"+n.addr+"/")
	if len(jar.Cookies(u)) == 0 {
		t.Fatal("no visitor cookie minted")
	}
	for i := 0; ; i++ {
		if post(t, visitor, "http://"+n.addr+"/api/items", "198.51.100.20") == 429 {
			break
		}
		if i == 5 {
			t.Fatal("the visitor was never refused")
		}
	}
	return visitor
}

// checkStillRefused: both clients are refused, and fresh ones are not.
func checkStillRefused(t *testing.T, n *upgradeNode, visitor *http.Client, round int) {
	t.Helper()
	plain := &http.Client{Timeout: hangGuard}
	if got := post(t, plain, "http://"+n.addr+"/signup", "203.0.113.7"); got != 429 {
		t.Errorf("after upgrade %d, the refused IP: got %d, want 429 (its counter handed over, under the handed-over key secret)", round, got)
	}
	if got := post(t, visitor, "http://"+n.addr+"/api/items", "198.51.100.20"); got != 429 {
		t.Errorf("after upgrade %d, the refused visitor: got %d, want 429 (its cookie verifies under the handed-over visitor secret)", round, got)
	}
	if got := post(t, plain, "http://"+n.addr+"/signup", fmt.Sprintf("203.0.113.%d", 100+round)); got != 200 {
		t.Errorf("after upgrade %d, a fresh IP: got %d, want 200", round, got)
	}
}

// load is a closed loop of clients, each on its own keep-alive
// connection. Half of them POST, which no client resends on its own (RFC
// 9110 §9.2.2; Go's Transport retries only idempotent requests on a
// connection the server closed): a POST sent on a connection the draining
// node closed would be lost, so every one of them must be answered
// (gateway/drain.go).
type load struct {
	stop              chan struct{}
	stopOnce          sync.Once
	wg                sync.WaitGroup
	ok, refused, lost atomic.Int64
	other             atomic.Int64 // answers other than 200
	per               []atomic.Int64
	maxLatency        atomic.Int64 // ns
	errMu             sync.Mutex
	errs              []string
}

func startLoad(t *testing.T, addr string, clients int) *load {
	l := &load{stop: make(chan struct{}), per: make([]atomic.Int64, clients)}
	t.Cleanup(l.finish)
	for i := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: hangGuard}
			url := fmt.Sprintf("http://%s/load/%d", addr, i)
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", url, nil)
				if i%2 == 0 {
					req, _ = http.NewRequest("POST", url, strings.NewReader("a=1"))
				}
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i+1))
				start := time.Now()
				resp, err := c.Do(req)
				if d := int64(time.Since(start)); d > l.maxLatency.Load() {
					l.maxLatency.Store(d) // racy max: a report, not a check
				}
				switch {
				case errors.Is(err, syscall.ECONNREFUSED):
					l.refused.Add(1)
				case err != nil:
					l.lost.Add(1)
					l.errMu.Lock()
					l.errs = append(l.errs, err.Error())
					l.errMu.Unlock()
				default:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						l.ok.Add(1)
					} else {
						l.other.Add(1)
					}
				}
				l.per[i].Add(1)
			}
		}()
	}
	return l
}

// awaitEach waits until every client has made at least n more requests
// than it had at from.
func (l *load) awaitEach(t *testing.T, n int64) {
	t.Helper()
	from := make([]int64, len(l.per))
	for i := range l.per {
		from[i] = l.per[i].Load()
	}
	waitUntil(t, fmt.Sprintf("%d more requests from every client", n), func() bool {
		for i := range l.per {
			if l.per[i].Load()-from[i] < n {
				return false
			}
		}
		return true
	})
}

// finish stops the clients and waits for them; startLoad has the test
// call it at the latest when it ends.
func (l *load) finish() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// TestBinaryUpgradeUnderLoad: SIGUSR2 upgrades the node to the binary
// that replaced its file, under a closed-loop load: no connection is
// refused and every request gets an answer; the process that serves after
// is the new one; clients refused before are refused after (their
// counters, the random key secret and the random visitor secret all
// handed over); systemd hears MAINPID from the old process and READY from
// the new. Upgrades chain: each new process upgrades in turn.
func TestBinaryUpgradeUnderLoad(t *testing.T) {
	rounds, clients, after := 2, 8, int64(30)
	if os.Getenv("EDGE_LONG_TESTS") == "1" {
		rounds, clients, after = 20, 32, 300
	}
	bin, release := edgeBinary(t)
	n := startUpgradeNode(t, bin, nil)
	visitor := refusedClients(t, n)

	l := startLoad(t, n.addr, clients)
	l.awaitEach(t, 20)

	pid := n.first.Process.Pid
	var gaps []float64
	for round := 1; round <= rounds; round++ {
		installBinary(t, release, bin) // the new release, renamed over the old
		if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		// The old process names the new one to systemd, and the new one
		// says it is ready once it serves.
		newPID := n.notify.awaitUpgrade(t, pid)
		took := n.awaitLog(t, "binary upgrade: took over from the previous process", round)
		if got := int(took["parent_pid"].(float64)); got != pid {
			t.Errorf("round %d: the new process's parent is %d, want %d", round, got, pid)
		}
		if keys, _ := took["keys"].(float64); keys < 2 {
			t.Errorf("round %d: %v keys handed over, want the two refused clients' at least", round, took["keys"])
		}
		gap, _ := took["accept_gap_ms"].(float64)
		gaps = append(gaps, gap)
		// The old process exits once the new one accepts.
		waitUntil(t, fmt.Sprintf("round %d: the old process %d to exit", round, pid), func() bool {
			if pid == n.first.Process.Pid {
				select {
				case <-n.exited:
					return true
				default:
					return false
				}
			}
			return !alive(pid)
		})
		if pid == n.first.Process.Pid && n.first.ProcessState.ExitCode() != 0 {
			t.Errorf("the first process exited %d, want 0", n.first.ProcessState.ExitCode())
		}
		if !alive(newPID) {
			t.Fatalf("round %d: the new process %d is not running", round, newPID)
		}
		// It runs the binary that replaced the file.
		exe, err1 := os.Stat("/proc/" + strconv.Itoa(newPID) + "/exe")
		want, err2 := os.Stat(bin)
		if err1 != nil || err2 != nil || !os.SameFile(exe, want) {
			t.Errorf("round %d: the new process does not run the file now at %s (%v, %v)", round, bin, err1, err2)
		}
		l.awaitEach(t, after) // served by the new process only: the old one is gone
		checkStillRefused(t, n, visitor, round)
		pid = newPID
	}
	l.finish()

	total := l.ok.Load() + l.other.Load() + l.lost.Load() + l.refused.Load()
	t.Logf("%d upgrades, %d clients, %d requests: %d answered 200, %d other answers, %d refused connections, %d lost; accept gaps (ms) %v; slowest request %v",
		rounds, clients, total, l.ok.Load(), l.other.Load(), l.refused.Load(), l.lost.Load(), gaps, time.Duration(l.maxLatency.Load()))
	if l.refused.Load() != 0 {
		t.Errorf("%d connections refused", l.refused.Load())
	}
	if l.lost.Load() != 0 {
		t.Errorf("%d requests got no answer: %v", l.lost.Load(), l.errs[:min(len(l.errs), 5)])
	}
	if l.other.Load() != 0 {
		t.Errorf("%d answers other than 200", l.other.Load())
	}

	// The last process stops as systemd stops it, saying so.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := n.notify.await(t, "STOPPING=1"); m.pid != pid {
		t.Errorf("STOPPING=1 from pid %d, want %d", m.pid, pid)
	}
	waitUntil(t, "the last process to exit", func() bool { return !alive(pid) })
}

// TestBinaryUpgradeFailureKeepsServing: a new binary that does not start
// (a script that exits 1), then a policy that does not load, each fail
// the upgrade with a log line saying why, and the old process keeps
// serving with its counters; once both are fixed, the next SIGUSR2
// upgrades.
func TestBinaryUpgradeFailureKeepsServing(t *testing.T) {
	bin, release := edgeBinary(t)
	n := startUpgradeNode(t, bin, nil)
	visitor := refusedClients(t, n)
	pid := n.first.Process.Pid
	plain := &http.Client{Timeout: hangGuard}

	serving := func(what string) {
		t.Helper()
		if !alive(pid) {
			t.Fatalf("%s: the old process exited", what)
		}
		if got := post(t, plain, "http://"+n.addr+"/signup", "203.0.113.7"); got != 429 {
			t.Errorf("%s: the refused IP: got %d, want 429", what, got)
		}
		if got := post(t, plain, "http://"+n.addr+"/signup", "203.0.113.50"); got != 200 {
			t.Errorf("%s: a fresh IP: got %d, want 200", what, got)
		}
		if pids := n.servingPIDs(t); !slices.Equal(pids, []int{pid}) {
			t.Errorf("%s: processes that served: %v, want only %d", what, pids, pid)
		}
	}

	// 1. A broken binary.
	script := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho broken release >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	installBinary(t, script, bin)
	syscall.Kill(pid, syscall.SIGUSR2)
	failed := n.awaitLog(t, "binary upgrade failed: still serving", 1)
	if e, _ := failed["error"].(string); !strings.Contains(e, "exited before it was ready") {
		t.Errorf("the failure says %q, want that the new process exited before it was ready", e)
	}
	serving("after a broken binary")

	// 2. The right binary, a broken policy: the new process refuses it
	// (the old one's reload of the file refuses it too).
	installBinary(t, release, bin)
	good, err := os.ReadFile(n.policy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.policy, []byte("edge {\n  listen = \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGUSR2)
	n.awaitLog(t, "binary upgrade failed: still serving", 2)
	serving("after a broken policy")
	if !strings.Contains(readFile(t, n.logPath), "has errors; not starting") {
		t.Error("the new process's log does not say why it did not start")
	}

	// 3. Both fixed: the upgrade goes through, counters and all.
	if err := os.WriteFile(n.policy, good, 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGUSR2)
	newPID := n.notify.awaitUpgrade(t, pid)
	n.awaitLog(t, "binary upgrade: took over from the previous process", 1)
	select {
	case <-n.exited:
	case <-time.After(hangGuard):
		t.Fatal("the old process did not exit after a good upgrade")
	}
	checkStillRefused(t, n, visitor, 1)
	syscall.Kill(newPID, syscall.SIGTERM)
	waitUntil(t, "the new process to exit", func() bool { return !alive(newPID) })
}

// awaitUpgrade waits for an upgrade's notifications: MAINPID=<new> from
// the old process, then READY=1 from the new one, whose PID it returns;
// STOPPING=1 on the way fails the test. Others (a reload's RELOADING=1 and
// READY=1) are skipped.
func (s *notifySocket) awaitUpgrade(t *testing.T, old int) int {
	t.Helper()
	mainPID := 0
	for {
		m := s.next(t)
		for line := range strings.SplitSeq(m.text, "\n") {
			if v, ok := strings.CutPrefix(line, "MAINPID="); ok {
				if m.pid != old {
					t.Errorf("MAINPID=%s sent by pid %d, want the old process %d (NotifyAccess=main)", v, m.pid, old)
				}
				mainPID, _ = strconv.Atoi(v)
			}
			if line == "STOPPING=1" {
				t.Errorf("STOPPING=1 from pid %d during the upgrade: systemd would stop the unit", m.pid)
			}
			if line == "READY=1" && m.pid != old {
				if mainPID != m.pid {
					t.Fatalf("READY=1 from pid %d before the old process named it the main PID (MAINPID=%d)", m.pid, mainPID)
				}
				return m.pid
			}
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSocketActivation: a socket passed as systemd passes it (descriptor
// 3, $LISTEN_FDS, $LISTEN_FDNAMES, $LISTEN_PID the node's own PID) is the
// public listener, whatever the policy's listen says; the admin listener,
// without a socket, is bound as usual.
func TestSocketActivation(t *testing.T) {
	bin, _ := edgeBinary(t)
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go origin.Serve(oln)
	t.Cleanup(func() { origin.Close() })

	sock, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sockFile, err := sock.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	sock.Close() // the node holds the socket now, through sockFile's copy
	dir := t.TempDir()
	policyListen, admin := freeAddr(t), freeAddr(t)
	policy := filepath.Join(dir, "policies.hcl")
	if err := os.WriteFile(policy, []byte(upgradePolicy(policyListen, admin, oln.Addr().String())), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "edge.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// sh sets LISTEN_PID to its own PID, which exec keeps: as systemd sets
	// it between fork and exec.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, "serve", "-config", policy)
	cmd.ExtraFiles = []*os.File{sockFile}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "LISTEN_FDNAMES=public", "EDGE_KEY_SECRET=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sockFile.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	n := &upgradeNode{logPath: logPath}
	listening := n.awaitLog(t, "edge listening", 1)
	sockAddr, _ := listening["addr"].(string)
	if sockAddr != sock.Addr().String() {
		t.Errorf("the node listens on %s, want the passed socket %s", sockAddr, sock.Addr())
	}
	resp, err := (&http.Client{Timeout: hangGuard}).Get("http://" + sock.Addr().String() + "/load/1")
	if err != nil {
		t.Fatalf("through the passed socket: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("through the passed socket: got %d, want 200", resp.StatusCode)
	}
	if c, err := net.Dial("tcp", policyListen); err == nil {
		c.Close()
		t.Errorf("something listens on the policy's %s too", policyListen)
	}
	warned := n.awaitLog(t, "listening on the socket systemd passed, not on the address the policy or flag names: the socket unit's ListenStream= decides", 1)
	if warned["configured"] != policyListen {
		t.Errorf("the warning names %v, want %s", warned["configured"], policyListen)
	}
	if resp, err := http.Get("http://" + admin + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("the admin listener, bound as usual: %v", err)
	} else {
		resp.Body.Close()
	}
}

// TestBinaryUpgradeWithRedis: with the counters in Redis nothing but the
// secrets is handed over, and clients refused before are refused after.
func TestBinaryUpgradeWithRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("EDGE_REQUIRE_STACKS") == "1" {
		t.Fatal("redis-server is not installed (EDGE_REQUIRE_STACKS=1: .ci/run installs it)")
	}
	rs := testredis.Start(t) // skips without redis-server
	bin, _ := edgeBinary(t)
	n := startUpgradeNode(t, bin, []string{"-store", "redis://" + rs.Addr() + "/0"}, "EDGE_KEY_SECRET="+strings.Repeat("k", 32))
	visitor := refusedClients(t, n)
	l := startLoad(t, n.addr, 4)
	l.awaitEach(t, 10)
	pid := n.first.Process.Pid
	syscall.Kill(pid, syscall.SIGUSR2)
	newPID := n.notify.awaitUpgrade(t, pid)
	took := n.awaitLog(t, "binary upgrade: took over from the previous process", 1)
	if keys, _ := took["keys"].(float64); keys != 0 {
		t.Errorf("%v keys handed over, want none: they are in Redis", took["keys"])
	}
	select {
	case <-n.exited:
	case <-time.After(hangGuard):
		t.Fatal("the old process did not exit")
	}
	l.awaitEach(t, 10)
	l.finish()
	if l.refused.Load()+l.lost.Load()+l.other.Load() != 0 {
		t.Errorf("%d refused, %d lost, %d not 200: %v", l.refused.Load(), l.lost.Load(), l.other.Load(), l.errs)
	}
	checkStillRefused(t, n, visitor, 1)
	syscall.Kill(newPID, syscall.SIGTERM)
	waitUntil(t, "the new process to exit", func() bool { return !alive(newPID) })
}
