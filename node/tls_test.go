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
)

// tlsPolicy is a policy whose edge block has a tls block with the two
// paths as written; cert_file's value starts at line 3, column 17, and
// key_file's at line 4, column 17.
func tlsPolicy(cert, key string) string {
	return "edge {\n  tls {\n    cert_file = \"" + cert + "\"\n    key_file  = \"" + key + "\"\n  }\n}\n"
}

// loadTLS writes src as dir/policies.hcl and loads it.
func loadTLS(t *testing.T, dir, src string) (*Config, hcl.Diagnostics) {
	t.Helper()
	path := filepath.Join(dir, "policies.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, diags := builtin.LoadFile(path)
	if p == nil {
		return nil, diags
	}
	return Of(p), diags
}

// TestTLSBlockLoadsThePair: paths are relative to the policy file's
// directory; the compiled block holds them resolved and the pair loaded
// (the leaf the node will serve), and a policy without the block serves
// plain HTTP.
func TestTLSBlockLoadsThePair(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	leaf := testcert.NewCA(t).Issue(t, "edge.example")
	leaf.Write(t, filepath.Join(dir, "certs/edge.crt"), filepath.Join(dir, "certs/edge.key"))
	p, diags := loadTLS(t, dir, tlsPolicy("certs/edge.crt", "certs/edge.key"))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if p.TLS == nil {
		t.Fatal("no TLS in the compiled policy")
	}
	if want := filepath.Join(dir, "certs/edge.crt"); p.TLS.CertFile != want {
		t.Errorf("CertFile = %q, want %q", p.TLS.CertFile, want)
	}
	if want := filepath.Join(dir, "certs/edge.key"); p.TLS.KeyFile != want {
		t.Errorf("KeyFile = %q, want %q", p.TLS.KeyFile, want)
	}
	if c := p.TLS.Certificate; c == nil || c.Leaf == nil || c.Leaf.SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 {
		t.Errorf("the loaded certificate is not the file's leaf: %+v", c)
	}
	// An absolute path is taken as written.
	abs := filepath.Join(dir, "certs/edge.crt")
	if p, diags := loadTLS(t, t.TempDir(), tlsPolicy(abs, filepath.Join(dir, "certs/edge.key"))); diags.HasErrors() || p.TLS.CertFile != abs {
		t.Errorf("absolute paths: %v, %+v", diags, p)
	}
	// A key in the certificate file loads, with a warning.
	both := append(append([]byte{}, leaf.CertPEM...), leaf.KeyPEM...)
	if err := os.WriteFile(filepath.Join(dir, "certs/both.pem"), both, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, diags := loadTLS(t, dir, tlsPolicy("certs/both.pem", "certs/edge.key")); diags.HasErrors() || p.TLS == nil ||
		!strings.Contains(diags.Error(), "policies.hcl:3,17-33: Private key in cert_file") {
		t.Errorf("a key in cert_file: %v", diags)
	}
	if p, diags := loadTLS(t, dir, "edge {\n}\n"); diags.HasErrors() || p.TLS != nil {
		t.Errorf("without a tls block: TLS = %+v, diags %v", p, diags)
	}
}

// TestTLSBlockErrors: each way a pair can be wrong is an error at the
// attribute's value (file:line,col), so `edge validate` fails and a
// reload is refused.
func TestTLSBlockErrors(t *testing.T) {
	ca := testcert.NewCA(t)
	good, other := ca.Issue(t, "edge.example"), ca.Issue(t, "other.example")
	expired := ca.IssueValid(t, "old.example", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	future := ca.IssueValid(t, "future.example", time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	for _, tc := range []struct {
		name       string
		cert, key  []byte // nil: the file is not written
		unreadable bool   // the key file exists but cannot be read
		want       string
	}{
		{name: "missing cert", key: good.KeyPEM, want: "policies.hcl:3,17-27: Missing cert_file; " + "DIR/edge.crt does not exist"},
		{name: "missing key", cert: good.CertPEM, want: "policies.hcl:4,17-27: Missing key_file; DIR/edge.key does not exist"},
		{name: "mismatched pair", cert: good.CertPEM, key: other.KeyPEM, want: "policies.hcl:4,17-27: Invalid key pair; DIR/edge.key with the certificate DIR/edge.crt: tls: private key does not match public key"},
		{name: "key is a certificate", cert: good.CertPEM, key: good.CertPEM, want: "policies.hcl:4,17-27: Invalid key pair"},
		{name: "not PEM", cert: []byte("hello\n"), key: good.KeyPEM, want: `policies.hcl:3,17-27: Invalid certificate; DIR/edge.crt holds no PEM "CERTIFICATE" block`},
		{name: "broken DER", cert: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), key: good.KeyPEM, want: "policies.hcl:3,17-27: Invalid certificate; DIR/edge.crt: certificate 1 of the chain"},
		{name: "empty cert", cert: []byte{}, key: good.KeyPEM, want: "policies.hcl:3,17-27: Invalid cert_file; DIR/edge.crt is empty"},
		{name: "expired", cert: expired.CertPEM, key: expired.KeyPEM, want: "policies.hcl:3,17-27: Certificate expired; DIR/edge.crt (CN=old.example) expired at "},
		{name: "not yet valid", cert: future.CertPEM, key: future.KeyPEM, want: "policies.hcl:3,17-27: Certificate not yet valid; DIR/edge.crt (CN=future.example) is valid from "},
		{name: "unreadable key", cert: good.CertPEM, key: good.KeyPEM, unreadable: true, want: "policies.hcl:4,17-27: Unreadable key_file; open DIR/edge.key: permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.unreadable && os.Geteuid() == 0 {
				t.Skip("root reads a file of mode 0000")
			}
			dir := t.TempDir()
			if tc.cert != nil {
				if err := os.WriteFile(filepath.Join(dir, "edge.crt"), tc.cert, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.key != nil {
				mode := os.FileMode(0o600)
				if tc.unreadable {
					mode = 0
				}
				if err := os.WriteFile(filepath.Join(dir, "edge.key"), tc.key, mode); err != nil {
					t.Fatal(err)
				}
			}
			p, diags := loadTLS(t, dir, tlsPolicy("edge.crt", "edge.key"))
			if !diags.HasErrors() || p != nil {
				t.Fatalf("loaded: %+v, %v", p, diags)
			}
			got := strings.ReplaceAll(diags.Error(), dir, "DIR")
			if want := strings.ReplaceAll(tc.want, "policies.hcl", "DIR/policies.hcl"); !strings.Contains(got, want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}
