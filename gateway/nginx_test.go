package gateway

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/teststack"
)

// Debian's real nginx in the gateway's tests (the shared cache of
// cache_e2e_test.go, the auth_request front of decide_nginx_e2e_test.go):
// one binary lookup, one way to start it in the test's directory and to
// stop it.

// nginxBinary is Debian's nginx, or a skip (a failure under
// EDGE_REQUIRE_STACKS=1, as CI runs).
func nginxBinary(t *testing.T) string {
	t.Helper()
	return teststack.Binary(t, "nginx", "nginx-light", "/usr/sbin/nginx")
}

// freeAddr returns a loopback HOST:PORT nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// nginxMain is what a test's nginx.conf says in its main context: one
// worker, the pid file and the error log (at info) in dir, and, when the
// test runs as root, workers running as root (as nobody they could not
// write dir).
func nginxMain(dir string) string {
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	return user + "worker_processes 1;\npid " + dir + "/nginx.pid;\nerror_log " + dir + "/error.log info;"
}

// nginxHTTP is what a test's nginx.conf says first in its http block: no
// access log, the temporary directories in dir.
func nginxHTTP(dir string) string {
	return "  access_log off;\n  client_body_temp_path " + dir + "/body;\n  proxy_temp_path " + dir + "/proxy;\n  fastcgi_temp_path " + dir + "/fastcgi;\n  uwsgi_temp_path " + dir + "/uwsgi;\n  scgi_temp_path " + dir + "/scgi;\n"
}

// runNginx writes conf to dir/nginx.conf and runs nginx on it in the
// foreground (prefix dir) until the test ends, when it sends the master it
// started SIGTERM (SIGKILL after 10 s). It returns once nginx accepts
// connections on addr, the address conf listens on, and fails the test if
// nginx exits or does not listen within 10 s. errorLog is dir/error.log,
// as nginxMain names it.
func runNginx(t *testing.T, dir, conf, addr string) (errorLog string) {
	t.Helper()
	bin := nginxBinary(t)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	errorLog = filepath.Join(dir, "error.log")
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-g", "daemon off;")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // the master we started, by its pid
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	// Polling for start-up, not for correctness.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return errorLog
		}
		select {
		case <-done:
			log, _ := os.ReadFile(errorLog)
			t.Fatalf("nginx exited: %s%s", stderr.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s: %s", addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
