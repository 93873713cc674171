package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testcert"
	. "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// upClient is a client certificate ca issued, valid from notBefore to
// notAfter (zero: the testcert default).
func upClient(t *testing.T, ca *testcert.CA, cn string, notBefore, notAfter time.Time) testcert.Leaf {
	t.Helper()
	return ca.IssueSpec(t, testcert.Spec{CN: cn, Client: true, NotBefore: notBefore, NotAfter: notAfter})
}

// upLoad writes files into a new directory and compiles the policy src
// there, as policies.hcl.
func upLoad(t *testing.T, src string, files map[string][]byte) (*rules.Policy, hcl.Diagnostics, string) {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "policies.hcl")
	p, diags := builtin.Load(path, []byte(src))
	return p, diags, path
}

// upDiag finds the diagnostic whose summary is summary and checks that it
// is an error (or a warning) starting at line:col.
func upDiag(t *testing.T, diags hcl.Diagnostics, summary string, sev hcl.DiagnosticSeverity, line, col int) *hcl.Diagnostic {
	t.Helper()
	for _, d := range diags {
		if d.Summary != summary {
			continue
		}
		if d.Severity != sev {
			t.Errorf("%s: severity %v, want %v", summary, d.Severity, sev)
		}
		if d.Subject == nil || d.Subject.Start.Line != line || d.Subject.Start.Column != col {
			t.Errorf("%s at %v, want line %d col %d", summary, d.Subject, line, col)
		}
		return d
	}
	t.Fatalf("no %q diagnostic in:\n%s", summary, diags.Error())
	return nil
}

func TestUpstreamTLSCompiles(t *testing.T) {
	tca := testcert.NewCASpec(t, testcert.Spec{CN: "test CA"})
	client := upClient(t, tca, "edge client", time.Time{}, time.Time{})
	ca, cert, key := tca.PEM, client.CertPEM, client.KeyPEM
	src := `edge {
  upstream         = "https://origin.internal:8443"
  upstream_timeout = "2s"
  upstream_tls {
    ca_file     = "ca.pem"
    cert_file   = "certs/client.pem"
    key_file    = "certs/client.key"
    server_name = "Origin.Example."
  }
}
`
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"ca.pem": ca, "certs/client.pem": cert, "certs/client.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, diags := builtin.Load(filepath.Join(dir, "policies.hcl"), []byte(src))
	if diags.HasErrors() || len(diags) > 0 {
		t.Fatalf("diagnostics: %s", diags.Error())
	}
	ut := Of(p).UpstreamTLS
	if ut == nil || ut.RootCAs == nil || ut.Certificate == nil {
		t.Fatalf("UpstreamTLS = %+v, want a pool and a certificate", ut)
	}
	if ut.CAFile != filepath.Join(dir, "ca.pem") || ut.CertFile != filepath.Join(dir, "certs/client.pem") || ut.KeyFile != filepath.Join(dir, "certs/client.key") {
		t.Errorf("paths not resolved against the policy's directory: %q %q %q", ut.CAFile, ut.CertFile, ut.KeyFile)
	}
	if ut.ServerName != "origin.example" {
		t.Errorf("ServerName %q, want origin.example", ut.ServerName)
	}
	if p.UpstreamTimeout != 2*time.Second {
		t.Errorf("UpstreamTimeout %v, want 2s", p.UpstreamTimeout)
	}

	// The digest follows the files' contents: the same block over other
	// bytes is another client; over the same bytes, the same.
	again, _ := builtin.Load(filepath.Join(dir, "policies.hcl"), []byte(src))
	if Of(again).UpstreamTLS.Digest != ut.Digest {
		t.Error("the same files gave another digest")
	}
	ca2 := testcert.NewCASpec(t, testcert.Spec{CN: "other CA"}).PEM
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca2, 0o600); err != nil {
		t.Fatal(err)
	}
	changed, diags := builtin.Load(filepath.Join(dir, "policies.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if Of(changed).UpstreamTLS.Digest == ut.Digest {
		t.Error("a rewritten ca_file kept the digest: a reload would keep the old CA")
	}
}

func TestUpstreamDefaults(t *testing.T) {
	p, diags, _ := upLoad(t, `edge { upstream = "https://origin.example" }`, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if Of(p).UpstreamTLS != nil || p.UpstreamTimeout != rules.DefaultUpstreamTimeout || Of(p).Upstream != "https://origin.example" {
		t.Errorf("got UpstreamTLS %v, timeout %v, upstream %q", Of(p).UpstreamTLS, p.UpstreamTimeout, Of(p).Upstream)
	}
	p, diags, _ = upLoad(t, ``, nil)
	if diags.HasErrors() || p.UpstreamTimeout != rules.DefaultUpstreamTimeout {
		t.Errorf("no edge block: timeout %v, %s", p.UpstreamTimeout, diags.Error())
	}
}

func TestUpstreamTLSRefusals(t *testing.T) {
	tca := testcert.NewCASpec(t, testcert.Spec{CN: "test CA"})
	ca, caKey := tca.PEM, upClient(t, tca, "test CA's key", time.Time{}, time.Time{}).KeyPEM
	cert := upClient(t, tca, "edge client", time.Time{}, time.Time{}).CertPEM
	otherKey := upClient(t, tca, "other", time.Time{}, time.Time{}).KeyPEM
	files := map[string][]byte{
		"ca.pem": ca, "ca.key": caKey, "client.pem": cert, "other.key": otherKey,
		"garbage.pem":  []byte("not a certificate\n"),
		"trailing.pem": append(append([]byte{}, ca...), "junk"...),
	}
	tests := []struct {
		name, block, summary string
		line, col            int
		detail               string
	}{
		{"missing ca_file", `ca_file = "nope.pem"`, "Cannot read ca_file", 4, 15, "no such file"},
		{"garbage ca_file", `ca_file = "garbage.pem"`, "Invalid ca_file", 4, 15, "not a PEM block"},
		{"trailing junk", `ca_file = "trailing.pem"`, "Invalid ca_file", 4, 15, "not a PEM block"},
		{"a key in ca_file", `ca_file = "ca.key"`, "Invalid ca_file", 4, 15, "a PRIVATE KEY block; want only CERTIFICATE blocks"},
		{"cert without key", `cert_file = "client.pem"`, "Missing key_file", 4, 17, "needs key_file"},
		{"key without cert", `key_file = "other.key"`, "Missing cert_file", 4, 16, "needs cert_file"},
		{"missing cert_file", "cert_file = \"nope.pem\"\n    key_file = \"other.key\"", "Cannot read cert_file", 4, 17, "no such file"},
		{"missing key_file", "cert_file = \"client.pem\"\n    key_file = \"nope.key\"", "Cannot read key_file", 5, 16, "no such file"},
		{"garbage cert_file", "cert_file = \"garbage.pem\"\n    key_file = \"other.key\"", "Invalid cert_file", 4, 17, "no PEM certificate"},
		{"mismatched pair", "cert_file = \"client.pem\"\n    key_file = \"other.key\"", "Invalid key_file", 5, 16, "does not match"},
		{"server_name with a port", `server_name = "origin:443"`, "Invalid server_name", 4, 19, "not a host name"},
		{"empty server_name", `server_name = ""`, "Invalid server_name", 4, 19, "not a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "edge {\n  upstream = \"https://origin.example:443\"\n  upstream_tls {\n    " + tt.block + "\n  }\n}\n"
			p, diags, _ := upLoad(t, src, files)
			if p != nil || !diags.HasErrors() {
				t.Fatalf("the policy loaded: %v", diags)
			}
			d := upDiag(t, diags, tt.summary, hcl.DiagError, tt.line, tt.col)
			if !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("detail %q lacks %q", d.Detail, tt.detail)
			}
		})
	}
}

func TestUpstreamRefusals(t *testing.T) {
	tests := []struct {
		name, edge, summary string
		line, col           int
	}{
		{"ftp", `upstream = "ftp://origin:21"`, "Invalid upstream", 2, 14},
		{"no host", `upstream = "https://"`, "Invalid upstream", 2, 14},
		{"a path", `upstream = "https://origin/app"`, "Invalid upstream", 2, 14},
		{"a query", `upstream = "http://origin:80?x=1"`, "Invalid upstream", 2, 14},
		{"userinfo", `upstream = "https://user:pw@origin"`, "Invalid upstream", 2, 14},
		{"upstream_tls over http", "upstream = \"http://origin:80\"\n  upstream_tls {}", "Unexpected upstream_tls", 3, 3},
		{"upstream_tls over the default upstream", "upstream_tls {}", "Unexpected upstream_tls", 2, 3},
		{"timeout not a duration", `upstream_timeout = "soon"`, "Invalid upstream_timeout", 2, 22},
		{"timeout too short", `upstream_timeout = "1ms"`, "Invalid upstream_timeout", 2, 22},
		{"timeout too long", `upstream_timeout = "1h"`, "Invalid upstream_timeout", 2, 22},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, _ := upLoad(t, "edge {\n  "+tt.edge+"\n}\n", nil)
			upDiag(t, diags, tt.summary, hcl.DiagError, tt.line, tt.col)
		})
	}
	for _, ok := range []string{"http://origin", "http://origin:9000/", "https://[::1]:8443", "HTTPS://Origin.Example"} {
		if _, _, err := ParseUpstream(ok); err != nil {
			t.Errorf("ParseUpstream(%q): %v", ok, err)
		}
	}
}

func TestUpstreamTLSExpiredWarns(t *testing.T) {
	now := time.Now()
	old := testcert.NewCASpec(t, testcert.Spec{CN: "old CA", NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	oldCA, newCA := old.PEM, testcert.NewCASpec(t, testcert.Spec{CN: "new CA"}).PEM
	client := upClient(t, old, "edge client", now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	cert, key := client.CertPEM, client.KeyPEM
	src := "edge {\n  upstream = \"https://origin.example\"\n  upstream_tls {\n    ca_file = \"bundle.pem\"\n    cert_file = \"client.pem\"\n    key_file = \"client.key\"\n  }\n}\n"
	p, diags, _ := upLoad(t, src, map[string][]byte{"bundle.pem": append(append([]byte{}, oldCA...), newCA...), "client.pem": cert, "client.key": key})
	if diags.HasErrors() || p == nil {
		t.Fatalf("an expired certificate is a warning, not an error: %s", diags.Error())
	}
	upDiag(t, diags, "Expired CA certificate", hcl.DiagWarning, 4, 15)
	upDiag(t, diags, "Expired cert_file", hcl.DiagWarning, 5, 17)
}
