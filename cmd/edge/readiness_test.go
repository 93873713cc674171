package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/internal/testredis"
)

// Readiness when Redis refuses the node (docs/operations.md, "Health and
// readiness"): a wrong password, or an ACL that lacks what the node needs,
// is a configuration error under which every login and OTP send answers
// 503. Such a node is not ready (/readyz 503, `edge health` exit 1, the
// refusal said), strict or not, while a Redis that is merely down leaves it
// ready and degraded (TestHealthStoreDown). Liveness (/healthz) stays 200.

// serveProcess starts `edge serve` as deployed, in its own process (the
// test binary re-run as TestServeHelperProcess), on the shipped policy
// with -store url, and returns its public and admin addresses once its
// admin listener answers.
func serveProcess(t *testing.T, url string) (listen, admin string, logs *syncBuffer) {
	t.Helper()
	listen, admin = freeAddr(t), freeAddr(t)
	p := startEdgeEnv(t, []string{"EDGE_KEY_SECRET=a fleet's secret, at least 32 bytes long"},
		"-config", filepath.Join(root, "policies.hcl"), "-listen", listen, "-admin", admin, "-store", url)
	logs, exited := p.logs, p.exited
	waitFor(t, "the node's admin listener", func() bool {
		resp, err := http.Get("http://" + admin + "/healthz")
		if err != nil {
			select {
			case <-exited:
				t.Fatalf("edge serve exited:\n%s", logs.String())
			default:
			}
			return false
		}
		resp.Body.Close()
		return true
	})
	return listen, admin, logs
}

// healthProcess runs `edge health args…` in its own process and returns
// its exit code and output.
func healthProcess(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelperProcess$")
	cmd.Env = append(os.Environ(), "EDGE_SERVE_HELPER="+strings.Join(append([]string{"health"}, args...), "\n"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// get returns the status and body of a GET of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNotReadyWhenRedisRefusesPassword: a node started with a wrong Redis
// password (WRONGPASS) or none (NOAUTH) is alive and not ready, and says
// why; with the right one it is ready.
func TestNotReadyWhenRedisRefusesPassword(t *testing.T) {
	srv := testredis.StartAuth(t, "the-right-pass")
	tests := []struct {
		name  string
		url   string
		ready bool
		why   string
	}{
		{"wrong password", "redis://:not-the-pass@" + srv.Addr() + "/0", false, "WRONGPASS"},
		{"no password", "redis://" + srv.Addr() + "/0", false, "NOAUTH"},
		{"right password", "redis://:the-right-pass@" + srv.Addr() + "/0", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, admin, logs := serveProcess(t, tt.url)
			if st, _ := get(t, "http://"+admin+"/healthz"); st != 200 {
				t.Errorf("/healthz: %d, want 200 (the process is alive)", st)
			}
			if code, out, errb := healthProcess(t, "-admin", admin, "-live"); code != 0 || out != "live (ok)\n" {
				t.Errorf("edge health -live: exit %d, stdout %q, stderr %q; want 0, live (ok)", code, out, errb)
			}
			st, body := get(t, "http://"+admin+"/readyz")
			code, out, errb := healthProcess(t, "-admin", admin)
			if tt.ready {
				if st != 200 || code != 0 || out != "ready (ok)\n" {
					t.Errorf("/readyz %d %q; edge health exit %d, stdout %q, stderr %q; want 200 and exit 0, ready (ok)", st, body, code, out, errb)
				}
				return
			}
			if st != 503 || !strings.Contains(body, `"status":"unready"`) || !strings.Contains(body, tt.why) || !strings.Contains(body, "login-per-visitor") {
				t.Errorf("/readyz: %d %q, want 503, unready, %s and the rules that fail closed", st, body, tt.why)
			}
			if code != 1 || out != "" || !strings.Contains(errb, "not ready") || !strings.Contains(errb, tt.why) {
				t.Errorf("edge health: exit %d, stdout %q, stderr %q; want exit 1 and not ready: … %s", code, out, errb, tt.why)
			}
			if strings.Contains(logs.String(), "not-the-pass") || strings.Contains(body, "not-the-pass") {
				t.Error("the log or /readyz shows the password")
			}
		})
	}
}

// TestReadinessFollowsACL: a ready node whose ACL later loses the keys it
// needs (NOPERM; PING and SCRIPT LOAD still allowed) turns not ready at its
// first refused call, and ready again once the ACL is restored, without a
// request: the background check tries a call like the rules' while the
// refusal lasts.
func TestReadinessFollowsACL(t *testing.T) {
	srv := testredis.StartAuth(t, "the-right-pass")
	listen, admin, logs := serveProcess(t, "redis://:the-right-pass@"+srv.Addr()+"/0")
	if code, out, errb := healthProcess(t, "-admin", admin); code != 0 {
		t.Fatalf("before the ACL change: edge health exit %d, %q %q; want 0", code, out, errb)
	}
	if _, err := srv.Do("ACL", "SETUSER", "default", "resetkeys"); err != nil {
		t.Fatal(err)
	}
	if st, _ := get(t, "http://"+listen+"/api/items"); st == 200 {
		t.Errorf("a request while Redis refuses the node's keys: 200")
	}
	st, body := get(t, "http://"+admin+"/readyz")
	if st != 503 || !strings.Contains(body, "NOPERM") {
		t.Errorf("/readyz after a refused call: %d %q, want 503 naming NOPERM", st, body)
	}
	if code, _, errb := healthProcess(t, "-admin", admin); code != 1 || !strings.Contains(errb, "NOPERM") {
		t.Errorf("edge health after a refused call: exit %d, stderr %q; want 1 naming NOPERM", code, errb)
	}
	if _, err := srv.Do("ACL", "SETUSER", "default", "allkeys"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node to be ready once the ACL is restored", func() bool {
		st, _ := get(t, "http://"+admin+"/readyz")
		return st == 200
	})
	if !strings.Contains(logs.String(), "store accepts this node again") {
		t.Errorf("the log does not say the refusal ended:\n%s", logs.String())
	}
}
