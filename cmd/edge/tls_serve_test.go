package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testcert"
)

// tlsServePolicy is a policy serving TLS on listen with the pair at the
// paths given (relative to the policy file), its origin the demo origin
// on upstream. cert_file's value starts at line 6, column 17.
func tlsServePolicy(listen, admin, upstream, cert, key string) string {
	return fmt.Sprintf(`edge {
  listen       = %q
  admin_listen = %q
  upstream     = "http://%s"
  tls {
    cert_file = %q
    key_file  = %q
  }
}

rule "signup" {
  paths  = ["/signup"]
  key    = ["ip"]
  limit  = 2
  period = "1m"
}
`, listen, admin, upstream, cert, key)
}

// edgeProcess is `edge serve` in its own process (TestServeHelperProcess).
type edgeProcess struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	err    error
}

func startEdge(t *testing.T, args ...string) *edgeProcess {
	t.Helper()
	return startEdgeEnv(t, nil, args...)
}

// startEdgeEnv is startEdge with env (NAME=VALUE) added to, or replacing,
// the process's environment.
func startEdgeEnv(t *testing.T, env []string, args ...string) *edgeProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelperProcess$")
	cmd.Env = append(append(os.Environ(), "EDGE_SERVE_HELPER="+strings.Join(append([]string{"serve"}, args...), "\n"), "EDGE_ADMIN_TOKEN="+reloadToken, "EDGE_KEY_SECRET="), env...)
	p := &edgeProcess{cmd: cmd, logs: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *edgeProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if p.err != nil {
		t.Errorf("edge serve after SIGTERM: %v\n%s", p.err, p.logs.String())
	}
}

// leafSerial dials addr over TLS trusting ca and returns the serial of the
// leaf the node presented.
func leafSerial(t *testing.T, addr string, ca *testcert.CA) (*big.Int, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// serving waits until a new connection to addr is served the certificate
// of serial.
func serving(t *testing.T, addr string, ca *testcert.CA, serial *big.Int, what string) {
	t.Helper()
	waitFor(t, what, func() bool {
		s, err := leafSerial(t, addr, ca)
		return err == nil && s.Cmp(serial) == 0
	})
}

// keepAlive is one HTTP/1.1 connection over TLS, reused for every get.
type keepAlive struct {
	c  *tls.Conn
	br *bufio.Reader
}

func (k *keepAlive) get(t *testing.T, path string) int {
	t.Helper()
	_ = k.c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(k.c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path)
	resp, err := http.ReadResponse(k.br, nil)
	if err != nil {
		t.Fatalf("the connection opened before the swap: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the node closed the keep-alive connection")
	}
	return resp.StatusCode
}

// swapData replaces a Kubernetes-style secret volume's content: the new
// files go to a new directory, a new ..data symlink to it is renamed over
// the old one (the atomic step), and the old directory is removed, as the
// kubelet's AtomicWriter does.
func swapData(t *testing.T, dir, name string, leaf testcert.Leaf) {
	t.Helper()
	ts := filepath.Join(dir, name)
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	leaf.Write(t, filepath.Join(ts, "tls.crt"), filepath.Join(ts, "tls.key"))
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeSwapsCertificatesOnDisk: `edge serve` in its own process picks
// up a certificate replaced on disk without a restart, both as Kubernetes
// swaps a secret volume (..data symlink) and by a rename into place, each
// seen by a client connecting after it, while a connection opened before
// the swaps keeps working; a broken pair on disk, and then a broken pair
// at `edge reload`, are refused (the log and the answer say why) while the
// running certificate keeps serving; a good pair after them is taken.
func TestServeSwapsCertificatesOnDisk(t *testing.T) {
	listen, admin, upstream := freeAddr(t), freeAddr(t), freeAddr(t)
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "tls") // the secret volume
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	first := ca.Issue(t, "first.example")
	swapData(t, secret, "..2026_01_01_v1", first)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(secret, f)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "policies.hcl")
	if err := os.WriteFile(path, []byte(tlsServePolicy(listen, admin, upstream, "tls/tls.crt", "tls/tls.key")), 0o644); err != nil {
		t.Fatal(err)
	}
	edge := startEdge(t, "-config", path, "-demo")
	serving(t, listen, ca, first.Cert.SerialNumber, "the node to serve the first certificate")

	before, err := tls.Dial("tcp", listen, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	old := &keepAlive{c: before, br: bufio.NewReader(before)}
	if st := old.get(t, "/api/x"); st != 200 {
		t.Fatalf("GET /api/x before the swap: %d", st)
	}

	// 1. The secret volume is updated.
	second := ca.Issue(t, "second.example")
	swapData(t, secret, "..2026_01_02_v2", second)
	serving(t, listen, ca, second.Cert.SerialNumber, "the node to serve the second certificate (..data swap)")
	waitFor(t, "the reload's log line", func() bool {
		return strings.Contains(edge.logs.String(), `"msg":"certificate reloaded","trigger":"certificate"`)
	})
	if st := old.get(t, "/api/x"); st != 200 {
		t.Errorf("the connection opened before the swap: %d after it", st)
	}

	// 2. The policy now names plain files, replaced by a rename into place.
	third := ca.Issue(t, "third.example")
	third.Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key"))
	if err := os.WriteFile(path+".tmp", []byte(tlsServePolicy(listen, admin, upstream, "edge.crt", "edge.key")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	serving(t, listen, ca, third.Cert.SerialNumber, "the node to serve the third certificate (policy change)")
	fourth := ca.Issue(t, "fourth.example")
	fourth.Write(t, filepath.Join(dir, "new.crt"), filepath.Join(dir, "new.key"))
	// The key first, then the certificate: between the two renames the
	// pair on disk does not match, and that reload (if the debounce sees
	// it) is refused; the next one takes the good pair.
	if err := os.Rename(filepath.Join(dir, "new.key"), filepath.Join(dir, "edge.key")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new.crt"), filepath.Join(dir, "edge.crt")); err != nil {
		t.Fatal(err)
	}
	serving(t, listen, ca, fourth.Cert.SerialNumber, "the node to serve the fourth certificate (rename into place)")

	// 3. A broken pair on disk: a key that is not the certificate's.
	refusedBefore := strings.Count(edge.logs.String(), `"msg":"certificate reload refused: keeping the running certificate"`)
	stray := ca.Issue(t, "stray.example")
	if err := os.WriteFile(filepath.Join(dir, "new.key"), stray.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new.key"), filepath.Join(dir, "edge.key")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken pair's reload to be refused", func() bool {
		return strings.Count(edge.logs.String(), `"msg":"certificate reload refused: keeping the running certificate"`) > refusedBefore
	})
	if logs := edge.logs.String(); !strings.Contains(logs, "Invalid key pair") || !strings.Contains(logs, "private key does not match public key") {
		t.Errorf("the refusal does not say why:\n%s", logs)
	}
	if s, err := leafSerial(t, listen, ca); err != nil || s.Cmp(fourth.Cert.SerialNumber) != 0 {
		t.Errorf("after the refused reload: serial %v, %v; want the fourth certificate still", s, err)
	}
	// The same pair at `edge reload`: refused, the answer says why.
	var out, errb strings.Builder
	t.Setenv("EDGE_ADMIN_TOKEN", reloadToken)
	if code := run([]string{"reload", "-admin", admin}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "refused") || !strings.Contains(errb.String(), "policies.hcl:7,17-27: Invalid key pair") {
		t.Errorf("edge reload with a broken pair: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if s, err := leafSerial(t, listen, ca); err != nil || s.Cmp(fourth.Cert.SerialNumber) != 0 {
		t.Errorf("after the refused edge reload: serial %v, %v; want the fourth certificate still", s, err)
	}
	if st := old.get(t, "/api/x"); st != 200 {
		t.Errorf("the connection opened before the swaps: %d at the end", st)
	}
	// The key is mended: taken.
	fourth.Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key"))
	fifth := ca.Issue(t, "fifth.example")
	fifth.Write(t, filepath.Join(dir, "new.crt"), filepath.Join(dir, "new.key"))
	if err := os.Rename(filepath.Join(dir, "new.crt"), filepath.Join(dir, "edge.crt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new.key"), filepath.Join(dir, "edge.key")); err != nil {
		t.Fatal(err)
	}
	serving(t, listen, ca, fifth.Cert.SerialNumber, "the node to serve the fifth certificate after the refusals")
	edge.stop(t)
}

// TestValidateRefusesABrokenPair: `edge validate` on a policy whose pair
// is missing or mismatched exits 1 with the attribute's file:line,col;
// `edge serve` does not start on it.
func TestValidateRefusesABrokenPair(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.hcl")
	if err := os.WriteFile(path, []byte(tlsServePolicy("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:1", "edge.crt", "edge.key")), 0o644); err != nil {
		t.Fatal(err)
	}
	validate := func() (int, string) {
		var out, errb strings.Builder
		code := run([]string{"validate", path}, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := validate(); code != 1 || !strings.Contains(out, path+":6,17-27: Missing cert_file") || !strings.Contains(out, path+":7,17-27: Missing key_file") {
		t.Errorf("missing pair: exit %d, output %q", code, out)
	}
	ca.Issue(t, "a.example").Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "other.key"))
	ca.Issue(t, "b.example").Write(t, filepath.Join(dir, "other.crt"), filepath.Join(dir, "edge.key"))
	if code, out := validate(); code != 1 || !strings.Contains(out, path+":7,17-27: Invalid key pair") {
		t.Errorf("mismatched pair: exit %d, output %q", code, out)
	}
	var out, errb strings.Builder
	if code := run([]string{"serve", "-config", path}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not starting") {
		t.Errorf("serve on a mismatched pair: exit %d, stderr %q", code, errb.String())
	}
	ca.Issue(t, "c.example").Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key"))
	if code, out := validate(); code != 0 {
		t.Errorf("a good pair: exit %d, output %q", code, out)
	}
}

// TestReloadNamesATLSChange: a reload that adds or removes the tls block
// cannot change the bound listener; it goes on, and its warnings say so.
func TestReloadNamesATLSChange(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	ca.Issue(t, "a.example").Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key"))
	plain := reloadPolicy(2, "")
	withTLS := strings.Replace(plain, "edge {\n", fmt.Sprintf("edge {\n  tls {\n    cert_file = %q\n    key_file  = %q\n  }\n", filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")), 1)
	for _, tc := range []struct {
		name       string
		start, new string
		want       string
	}{
		{"adding tls", plain, withTLS, "tls: the public listener stays plain HTTP"},
		{"removing tls", withTLS, plain, "tls: the public listener stays TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startReloadNode(t, tc.start)
			servesTLS := n.srv.ServesTLS()
			if servesTLS != (tc.start == withTLS) {
				t.Fatalf("ServesTLS %v at start", servesTLS)
			}
			if err := os.WriteFile(n.path, []byte(tc.new), 0o644); err != nil {
				t.Fatal(err)
			}
			res := n.rl.reload("signal")
			if !res.OK || !strings.Contains(strings.Join(res.Warnings, "\n"), tc.want) {
				t.Errorf("reload: %+v, want a warning %q", res, tc.want)
			}
			if n.srv.ServesTLS() != servesTLS {
				t.Error("a reload changed whether the listener serves TLS")
			}
		})
	}
}

// TestServeRenewsCertificateUnderABrokenPolicy: `edge serve` in its own
// process whose policies.hcl on disk is broken (refused, the running
// policy keeps serving) still serves a certificate renewed on disk, from
// the next handshake on; a broken pair after it is logged and the renewed
// certificate keeps serving; the mended policy then reloads, and serves
// the pair on disk.
func TestServeRenewsCertificateUnderABrokenPolicy(t *testing.T) {
	listen, admin, upstream := freeAddr(t), freeAddr(t), freeAddr(t)
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	first := ca.Issue(t, "first.example")
	first.Write(t, crt, key)
	path := filepath.Join(dir, "policies.hcl")
	good := tlsServePolicy(listen, admin, upstream, "edge.crt", "edge.key")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	edge := startEdge(t, "-config", path, "-demo")
	serving(t, listen, ca, first.Cert.SerialNumber, "the node to serve the first certificate")

	// The policy on disk breaks: refused.
	if err := os.WriteFile(path, []byte(good+"\nrule \"broken\" {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken policy to be refused", func() bool {
		return strings.Contains(edge.logs.String(), `"msg":"reload refused: keeping the running policy"`)
	})

	// The certificate is renewed (certbot's rename into place): served.
	renewed := ca.Issue(t, "renewed.example")
	renewed.Write(t, filepath.Join(dir, "new.crt"), filepath.Join(dir, "new.key"))
	for _, f := range []string{"key", "crt"} {
		if err := os.Rename(filepath.Join(dir, "new."+f), filepath.Join(dir, "edge."+f)); err != nil {
			t.Fatal(err)
		}
	}
	serving(t, listen, ca, renewed.Cert.SerialNumber, "the node to serve the renewed certificate while the policy is broken")
	// The reload is logged once the certificate is installed, so a
	// handshake can see it before the line is written: wait for it.
	waitFor(t, "the certificate reload to be logged", func() bool {
		return strings.Contains(edge.logs.String(), `"msg":"certificate reloaded","trigger":"certificate"`)
	})

	// A broken pair (a stray key): logged, the renewed one keeps serving.
	stray := ca.Issue(t, "stray.example")
	if err := os.WriteFile(filepath.Join(dir, "new.key"), stray.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new.key"), key); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken pair to be refused", func() bool {
		return strings.Contains(edge.logs.String(), `"msg":"certificate reload refused: keeping the running certificate"`)
	})
	if logs := edge.logs.String(); !strings.Contains(logs, "key_file: Invalid key pair") || !strings.Contains(logs, "private key does not match public key") {
		t.Errorf("the refusal does not say why:\n%s", logs)
	}
	if s, err := leafSerial(t, listen, ca); err != nil || s.Cmp(renewed.Cert.SerialNumber) != 0 {
		t.Errorf("after the broken pair: serial %v, %v; want the renewed certificate still", s, err)
	}

	// Pair and policy mended: the policy reloads and serves the pair.
	third := ca.Issue(t, "third.example")
	third.Write(t, crt, key)
	serving(t, listen, ca, third.Cert.SerialNumber, "the node to serve the mended pair")
	if err := os.WriteFile(path+".tmp", []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mended policy to reload", func() bool {
		return strings.Contains(edge.logs.String(), `"msg":"policy reloaded","trigger":"file"`)
	})
	if s, err := leafSerial(t, listen, ca); err != nil || s.Cmp(third.Cert.SerialNumber) != 0 {
		t.Errorf("after the mended policy: serial %v, %v; want the third certificate", s, err)
	}
	edge.stop(t)
}

// TestRefusedReloadServesRenewedCertificate: a reload (POST /admin/reload,
// through `edge reload`; SIGHUP takes the same path) of a broken policy
// is refused, and serves the certificate renewed on disk all the same,
// its answer's warnings saying so; a reload with nothing new on disk says
// nothing of the certificate.
func TestRefusedReloadServesRenewedCertificate(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	first := ca.Issue(t, "first.example")
	first.Write(t, crt, key)
	src := strings.Replace(reloadPolicy(2, ""), "edge {\n", fmt.Sprintf("edge {\n  tls {\n    cert_file = %q\n    key_file  = %q\n  }\n", crt, key), 1)
	n := startReloadNode(t, src)
	serving(t, n.addr, ca, first.Cert.SerialNumber, "the first certificate")

	n.write(t, src+"\nrule \"broken\" {\n")
	renewed := ca.Issue(t, "renewed.example")
	renewed.Write(t, crt, key)
	edgeReload := func() (int, string) {
		var out, errb strings.Builder
		t.Setenv("EDGE_ADMIN_TOKEN", reloadToken)
		code := run([]string{"reload", "-admin", n.admin}, &out, &errb)
		return code, out.String() + errb.String()
	}
	code, out := edgeReload()
	if code != 1 || !strings.Contains(out, "refused") || !strings.Contains(out, "tls: the certificate on disk (serial "+renewed.Cert.SerialNumber.Text(16)) {
		t.Errorf("edge reload of a broken policy with a renewed pair: exit %d, output %q", code, out)
	}
	if s, err := leafSerial(t, n.addr, ca); err != nil || s.Cmp(renewed.Cert.SerialNumber) != 0 {
		t.Errorf("after the refused reload: serial %v, %v; want the renewed certificate", s, err)
	}
	if code, out := edgeReload(); code != 1 || strings.Contains(out, "tls:") {
		t.Errorf("a second refused reload, nothing new on disk: exit %d, output %q", code, out)
	}
}
