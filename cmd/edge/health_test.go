package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// startHealthNode serves a node's admin listener on loopback: on a memory
// store, or, with redisDown, on a Redis store whose server is not there
// (the failclosed wrapper edge serve puts around it, degraded from the
// start). It returns the admin listener's address.
func startHealthNode(t *testing.T, redisDown bool) string {
	t.Helper()
	p, diags := builtin.LoadFile(filepath.Join(root, "policies.hcl"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var st rules.Store
	var health gateway.Health
	if redisDown {
		dead := freeAddr(t) // nothing listens there now
		s, fc, _, err := openStore(p, "redis://"+dead+"/0", minRedisKeySecret, slog.New(slog.NewJSONHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		st, health = s, fc
	} else {
		ms, err := memstore.New(memstore.Options{MaxKeys: node.Of(p).Store.MaxKeys})
		if err != nil {
			t.Fatal(err)
		}
		st = ms
	}
	t.Cleanup(func() { st.Close() })
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Health: health, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return serveAdmin(t, srv)
}

func runHealth(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"health"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestHealthReady: a serving node is ready, strictly too, and says so on
// stdout.
func TestHealthReady(t *testing.T) {
	admin := startHealthNode(t, false)
	for _, args := range [][]string{{"-admin", admin}, {"-admin", "http://" + admin}, {"-admin", admin, "-strict"}} {
		code, out, errb := runHealth(args...)
		if code != 0 || out != "ready (ok)\n" {
			t.Errorf("edge health %v: exit %d, stdout %q, stderr %q; want 0, \"ready (ok)\"", args, code, out, errb)
		}
	}
}

// TestHealthStoreDown: a node whose Redis is down is ready but degraded
// (exit 0, the reason printed), and not ready with -strict (exit 1,
// /readyz?strict=1's 503 and the reason on stderr).
func TestHealthStoreDown(t *testing.T) {
	admin := startHealthNode(t, true)
	code, out, errb := runHealth("-admin", admin)
	if code != 0 || !strings.HasPrefix(out, "ready (degraded: ") || !strings.Contains(out, "refused") {
		t.Errorf("edge health on a degraded node: exit %d, stdout %q, stderr %q; want 0 and the degraded reason", code, out, errb)
	}
	code, out, errb = runHealth("-admin", admin, "-strict")
	if code != 1 || out != "" || !strings.Contains(errb, "/readyz?strict=1 answered 503 Service Unavailable: degraded: ") || !strings.Contains(errb, "refused") {
		t.Errorf("edge health -strict on a degraded node: exit %d, stdout %q, stderr %q; want 1, the 503 and the reason", code, out, errb)
	}
}

// TestHealthNothingListening: no node on the address is exit 1 and a
// message that says so; a node that accepts and never answers is exit 1
// once -timeout has passed.
func TestHealthNothingListening(t *testing.T) {
	dead := freeAddr(t)
	code, out, errb := runHealth("-admin", dead)
	if code != 1 || out != "" || !strings.Contains(errb, "not ready: http://"+dead+"/readyz: connection refused: nothing listens there") {
		t.Errorf("edge health on a closed port: exit %d, stdout %q, stderr %q", code, out, errb)
	}

	mute, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel's backlog), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	code, _, errb = runHealth("-admin", mute.Addr().String(), "-timeout", "50ms")
	if code != 1 || !strings.Contains(errb, "no answer within 50ms") {
		t.Errorf("edge health on a mute listener: exit %d, stderr %q; want 1, no answer within 50ms", code, errb)
	}
}

// TestHealthReadsConfig: -config probes the policy's admin_listen, with an
// unspecified host probed on loopback; a policy with errors is not ready.
func TestHealthReadsConfig(t *testing.T) {
	admin := startHealthNode(t, false)
	_, port, _ := net.SplitHostPort(admin)
	src, err := os.ReadFile(filepath.Join(root, "policies.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, listen := range []string{admin, "0.0.0.0:" + port} {
		s := strings.Replace(string(src), `admin_listen = "127.0.0.1:9901"`, `admin_listen = "`+listen+`"`, 1)
		if s == string(src) {
			t.Fatal("policies.hcl has no admin_listen = \"127.0.0.1:9901\" line to rewrite")
		}
		path := filepath.Join(dir, "policies.hcl")
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errb := runHealth("-config", path); code != 0 || out != "ready (ok)\n" {
			t.Errorf("edge health -config (admin_listen %s): exit %d, stdout %q, stderr %q", listen, code, out, errb)
		}
		// -admin wins over -config.
		if code, _, errb := runHealth("-config", path, "-admin", freeAddr(t)); code != 1 || !strings.Contains(errb, "connection refused") {
			t.Errorf("edge health -config -admin CLOSED: exit %d, stderr %q; want -admin probed", code, errb)
		}
	}
	// A file with errors the running node refused at a reload (it keeps
	// serving, /readyz 200): the probe reads admin_listen alone and the
	// node is ready; a typo in a shared policy must not restart every
	// healthy node.
	broken := filepath.Join(dir, "broken.hcl")
	brokenSrc := strings.Replace(string(src), `admin_listen = "127.0.0.1:9901"`, `admin_listen = "`+admin+`"`, 1) + "\nrule \"typo\" {\n  limit = \"ten\"\n  no_such = 1\n"
	if err := os.WriteFile(broken, []byte(brokenSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, diags := builtin.LoadFile(broken); !diags.HasErrors() {
		t.Fatal("the broken policy loads")
	}
	if code, out, errb := runHealth("-config", broken); code != 0 || out != "ready (ok)\n" {
		t.Errorf("edge health -config BROKEN: exit %d, stdout %q, stderr %q; want the node ready", code, out, errb)
	}
	// admin_listen that is not a string, or no file: the default address
	// is probed, and said so.
	bad := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(bad, []byte("edge {\n  admin_listen = 9901\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing.hcl")} {
		if _, _, errb := runHealth("-config", path, "-timeout", "500ms"); !strings.Contains(errb, "probing "+defaultAdminListen) {
			t.Errorf("edge health -config %s: stderr %q; want the default probed", path, errb)
		}
	}
}

// TestHealthFlags: -h is 0; bad flags and addresses are 2.
func TestHealthFlags(t *testing.T) {
	for _, h := range []string{"-h", "--help", "-help"} {
		if code, _, errb := runHealth(h); code != 0 || !strings.Contains(errb, "usage: edge health") {
			t.Errorf("edge health %s: exit %d, stderr %q", h, code, errb)
		}
	}
	for _, args := range [][]string{
		{"-no-such-flag"},
		{"extra"},
		{"-timeout", "0s"},
		{"-admin", "https://127.0.0.1:9901"},
		{"-admin", "127.0.0.1:9901/readyz"},
		{"-admin", "no-port"},
	} {
		if code, _, errb := runHealth(args...); code != 2 {
			t.Errorf("edge health %v: exit %d, want 2\n%s", args, code, errb)
		}
	}
}
