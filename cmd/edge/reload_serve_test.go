package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeHelperProcess is `edge` itself, run as a child process by
// TestServeReloadsOnEveryTrigger (a test binary re-executed with
// EDGE_SERVE_HELPER set); it skips otherwise.
func TestServeHelperProcess(t *testing.T) {
	args := os.Getenv("EDGE_SERVE_HELPER")
	if args == "" {
		t.Skip("run by TestServeReloadsOnEveryTrigger")
	}
	os.Exit(run(strings.Split(args, "\n"), os.Stdout, os.Stderr))
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeReloadsOnEveryTrigger: `edge serve` as deployed (its own
// process, its signals) reloads its file on a change of the file, on
// SIGHUP and on `edge reload`, each through the one reload path, and
// stops on SIGTERM.
func TestServeReloadsOnEveryTrigger(t *testing.T) {
	listen, admin := freeAddr(t), freeAddr(t)
	path := filepath.Join(t.TempDir(), "policies.hcl")
	src := func(limit string) string {
		s := strings.Replace(reloadPolicy(2, ""), `"127.0.0.1:18080"`, `"`+listen+`"`, 1)
		s = strings.Replace(s, `"127.0.0.1:19901"`, `"`+admin+`"`, 1)
		return strings.Replace(s, "limit  = 2", "limit  = "+limit, 1)
	}
	if err := os.WriteFile(path, []byte(src("2")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelperProcess$")
	cmd.Env = append(os.Environ(), "EDGE_SERVE_HELPER=serve\n-config\n"+path, "EDGE_ADMIN_TOKEN="+reloadToken, "EDGE_KEY_SECRET=")
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	waitFor(t, "the node's /healthz", func() bool {
		resp, err := http.Get("http://" + admin + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	// The file, replaced as an editor does.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(src("3")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a reload by the file watch", func() bool {
		return strings.Contains(logs.String(), `"msg":"policy reloaded","trigger":"file"`)
	})
	// SIGHUP.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a reload by SIGHUP", func() bool {
		return strings.Contains(logs.String(), `"msg":"policy reloaded","trigger":"signal"`)
	})
	// edge reload, the admin API.
	var out, errb strings.Builder
	t.Setenv("EDGE_ADMIN_TOKEN", reloadToken)
	if code := run([]string{"reload", "-admin", admin}, &out, &errb); code != 0 || out.String() != "reloaded: 1 rules\n" {
		t.Errorf("edge reload: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	// The child's log reaches us through a pipe, after its answer maybe.
	waitFor(t, "a reload by the admin API in the log", func() bool {
		return strings.Contains(logs.String(), `"msg":"policy reloaded","trigger":"admin"`)
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-exited
	if waitErr != nil {
		t.Errorf("edge serve after SIGTERM: %v\n%s", waitErr, logs.String())
	}
}
