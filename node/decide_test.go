package node_test

import (
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/node"
)

// hasDiag reports whether diags holds a diagnostic of severity sev whose
// summary is summary.
func hasDiag(diags hcl.Diagnostics, sev hcl.DiagnosticSeverity, summary string) bool {
	for _, d := range diags {
		if d.Severity == sev && d.Summary == summary {
			return true
		}
	}
	return false
}

// TestDecideListenAddress: decide_listen is a HOST:PORT of its own, never
// the public or the admin listener's, a wildcard host included.
func TestDecideListenAddress(t *testing.T) {
	for _, c := range []struct {
		edge  string
		error bool
	}{
		{`decide_listen = "127.0.0.1:8081"`, false},
		{`decide_listen = "[::1]:8081"`, false},
		{`decide_listen = "nope"`, true},
		{`decide_listen = "127.0.0.1:99999"`, true},
		{`listen = "127.0.0.1:8080"` + "\n" + `decide_listen = "127.0.0.1:8080"`, true},
		{`listen = "127.0.0.1:8080"` + "\n" + `decide_listen = ":8080"`, true},
		{`listen = "0.0.0.0:8080"` + "\n" + `decide_listen = "127.0.0.1:8080"`, true},
		{`listen = "127.0.0.1:8080"` + "\n" + `decide_listen = "127.0.0.2:8080"`, false},
		{`decide_listen = "` + node.DefaultAdminListen + `"`, true},
		{`listen = "127.0.0.1:0"` + "\n" + `decide_listen = "127.0.0.1:0"`, false}, // port 0: any free port, never the same
	} {
		src := "edge {\n  trusted_proxies = [\"127.0.0.1/32\"]\n  " + c.edge + "\n}\n"
		p, diags := builtin.Load("d.hcl", []byte(src))
		got := hasDiag(diags, hcl.DiagError, "Invalid decide_listen")
		if got != c.error {
			t.Errorf("%s: Invalid decide_listen %v, want %v (%s)", c.edge, got, c.error, diags.Error())
		}
		if !diags.HasErrors() && p.DecideListen == "" {
			t.Errorf("%s: DecideListen not set", c.edge)
		}
	}
}

// TestDecideListenWithoutTrustedProxies: the decide listener's peer is
// the proxy, so without trusted_proxies every client shares its budget:
// a warning.
func TestDecideListenWithoutTrustedProxies(t *testing.T) {
	_, diags := builtin.Load("d.hcl", []byte("edge {\n  decide_listen = \"127.0.0.1:8081\"\n}\n"))
	if !hasDiag(diags, hcl.DiagWarning, "decide_listen without trusted_proxies") || diags.HasErrors() {
		t.Errorf("no trusted_proxies: %v", diags)
	}
	_, diags = builtin.Load("d.hcl", []byte("edge {\n  decide_listen = \"127.0.0.1:8081\"\n  trusted_proxies = [\"10.0.0.0/8\"]\n}\n"))
	if len(diags) != 0 {
		t.Errorf("with trusted_proxies: %v", diags)
	}
}
