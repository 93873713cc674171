package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/internal/testcert"
)

// upstreamTLSPolicy is reloadPolicy with an https upstream whose
// upstream_tls reads caFile; line is the line of ca_file's value.
func upstreamTLSPolicy(caFile string) (src string, line int) {
	src = reloadPolicy(2, "")
	src = strings.Replace(src, `upstream         = "http://127.0.0.1:19000"`, `upstream         = "https://127.0.0.1:19443"
  upstream_tls {
    ca_file = "`+caFile+`"
  }`, 1)
	return src, strings.Count(src[:strings.Index(src, "ca_file")], "\n") + 1
}

// TestValidateMissingCAFile: a policy whose upstream_tls names a missing
// ca_file fails `edge validate` with the file, line and column of the
// value; with the file in place, relative to the policy, it passes.
func TestValidateMissingCAFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.hcl")
	src, line := upstreamTLSPolicy("certs/origin-ca.pem")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"validate", "-config", path}, &out, &errb); code != 1 {
		t.Fatalf("validate: exit %d, want 1; stderr:\n%s", code, errb.String())
	}
	want := fmt.Sprintf("%s:%d,15", path, line)
	if !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), "Cannot read ca_file") {
		t.Errorf("stderr lacks %q and Cannot read ca_file:\n%s", want, errb.String())
	}
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "certs/origin-ca.pem"), testcert.NewCA(t).PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run([]string{"validate", "-config", path}, &out, &errb); code != 0 {
		t.Errorf("validate with the CA in place: exit %d:\n%s", code, errb.String())
	}
}

// TestReloadRefusesMissingCAFile: a reload to a policy whose ca_file is
// missing is refused with the diagnostic, and the running policy stays.
func TestReloadRefusesMissingCAFile(t *testing.T) {
	n := startReloadNode(t, reloadPolicy(2, ""))
	old := n.srv.Policy()
	src, line := upstreamTLSPolicy("missing.pem")
	n.write(t, src)
	r := n.postReload(t)
	if r.code != 422 || r.Status != "refused" || len(r.Diagnostics) != 1 {
		t.Fatalf("reload: %d %+v, want 422 refused with 1 diagnostic", r.code, r)
	}
	if d := r.Diagnostics[0]; !strings.HasPrefix(d, fmt.Sprintf("%s:%d,15", n.path, line)) || !strings.Contains(d, "Cannot read ca_file") {
		t.Errorf("diagnostic %q, want it at %s:%d,15", d, n.path, line)
	}
	if n.srv.Policy() != old {
		t.Fatal("a policy with a missing ca_file replaced the running one")
	}
	if got := n.mustSend(t, "POST", "/signup", "198.51.100.1"); got != 200 {
		t.Errorf("after the refused reload the running policy answers %d, want 200 from its origin", got)
	}
}
