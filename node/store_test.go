package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/node"
)

// TestStoreTLSFiles: a rediss store's ca_file, cert_file and key_file are
// read at compile, relative to the policy file's directory, and reach
// StoreConfig as absolute paths with the other connection attributes; a
// key that is not the certificate's is a compile error.
func TestStoreTLSFiles(t *testing.T) {
	ca := testredis.NewCA(t, "compile test CA")
	cert, key := ca.Issue("edge-client", true)
	_, otherKey := ca.Issue("someone-else", true)
	dir := t.TempDir()
	for name, from := range map[string]string{"ca.pem": ca.File, "client.pem": cert, "client.key": key, "other.key": otherKey} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "tls"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls", name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	policy := func(keyFile string) string {
		return fmt.Sprintf(`store "redis" {
  url                   = "rediss+sentinel://edge@mymaster@10.0.0.1:26379,10.0.0.2:26379/0"
  ca_file               = "tls/ca.pem"
  cert_file             = "tls/client.pem"
  key_file              = %q
  server_name           = "Redis.Internal."
  password_env          = "EDGE_REDIS_PASSWORD"
  sentinel_username     = "sentinel-user"
  sentinel_password_env = "EDGE_SENTINEL_PASSWORD"
  dial_timeout          = "2s"
}
`, keyFile)
	}
	file := filepath.Join(dir, "policies.hcl")
	p, diags := builtin.Load(file, []byte(policy("tls/client.key")))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := node.Of(p).Store
	want := node.StoreConfig{
		Kind: "redis", URL: "rediss+sentinel://edge@mymaster@10.0.0.1:26379,10.0.0.2:26379/0",
		CAFile: filepath.Join(dir, "tls/ca.pem"), CertFile: filepath.Join(dir, "tls/client.pem"), KeyFile: filepath.Join(dir, "tls/client.key"),
		ServerName: "redis.internal", PasswordEnv: "EDGE_REDIS_PASSWORD", SentinelUsername: "sentinel-user", SentinelPasswordEnv: "EDGE_SENTINEL_PASSWORD",
		DialTimeout: 2e9,
	}
	got.MaxKeys, got.Timeout, got.FleetSize = 0, 0, 0 // defaults, not under test
	if got != want {
		t.Errorf("StoreConfig:\n got %+v\nwant %+v", got, want)
	}

	_, diags = builtin.Load(file, []byte(policy("tls/other.key")))
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Invalid key_file") {
		t.Errorf("a key of another certificate: got %v, want Invalid key_file", diags)
	}
}

// TestStoreFileNotRegular: a device or a directory named as a store file is
// an error at compile, read no further than its first bytes.
func TestStoreFileNotRegular(t *testing.T) {
	for _, path := range []string{"/dev/zero", t.TempDir()} {
		src := fmt.Sprintf("store \"redis\" {\n  url     = \"rediss://127.0.0.1:6380/0\"\n  ca_file = %q\n}\n", path)
		_, diags := builtin.Load("p.hcl", []byte(src))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "Cannot read ca_file") {
			t.Errorf("ca_file = %q: got %v, want Cannot read ca_file", path, diags)
		}
	}
}

// TestPolicyFilesNotRegular: every PEM file a policy names (the tls,
// upstream_tls and store blocks') is read only when it is a regular file,
// so a path such as /dev/zero is an error at its attribute, not a compile
// that never ends.
func TestPolicyFilesNotRegular(t *testing.T) {
	for _, src := range []string{
		"edge {\n  tls {\n    cert_file = \"/dev/zero\"\n    key_file  = \"/dev/zero\"\n  }\n}\n",
		"edge {\n  upstream = \"https://127.0.0.1:9443\"\n  upstream_tls {\n    ca_file = \"/dev/zero\"\n  }\n}\n",
		"edge {\n  upstream = \"https://127.0.0.1:9443\"\n  upstream_tls {\n    cert_file = \"/dev/zero\"\n    key_file  = \"/dev/zero\"\n  }\n}\n",
	} {
		_, diags := builtin.Load("p.hcl", []byte(src))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "not a regular file") {
			t.Errorf("%s: diagnostics %v, want a not-a-regular-file error", src, diags)
		}
	}
}
