package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/rules/memstore"
)

const explainCmdPolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32"]
}
rule "login-per-ip" {
  methods = ["POST"]
  paths   = ["/login"]
  key     = ["ip"]
  limit   = 1
  period  = "1h"
}
rule "no-wp-admin" {
  paths  = ["/wp-admin/*"]
  action = "deny"
}
`

// startExplainNode serves explainCmdPolicy's admin API on loopback and
// returns its address.
func startExplainNode(t *testing.T, token string) string {
	t.Helper()
	p, diags := builtin.Load("explain.hcl", []byte(explainCmdPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after serveAdmin's
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://127.0.0.1:1", AdminToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return serveAdmin(t, srv)
}

func runExplain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"explain"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestExplainCommand: edge explain prints the verdict and a line per
// matching rule; asking twice shows the same remaining (nothing consumed);
// -header lines reach the node (a forwarding header from the trusted
// proxy names the client, which gets its own key); a deny action is
// reported as forbidden by its rule; -raw prints the node's JSON, which
// holds no address; a wrong token, a missing -from and bad JSON fail.
func TestExplainCommand(t *testing.T) {
	const token = "cli-explain-token"
	admin := startExplainNode(t, token)
	t.Setenv("EDGE_ADMIN_TOKEN", token)

	for range 2 {
		code, out, errs := runExplain(t, "-admin", admin, "-method", "POST", "-path", "/login", "-from", "192.0.2.7", "-json", `{"username":"a"}`)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		if !strings.HasPrefix(out, "verdict: forward\n") || !hasRow(out, "login-per-ip", "allow", "1") {
			t.Fatalf("got:\n%s\nwant verdict forward and login-per-ip allow with 1 remaining", out)
		}
	}

	key := func(args ...string) string {
		t.Helper()
		code, out, errs := runExplain(t, append([]string{"-admin", admin, "-raw", "-method", "POST", "-path", "/login"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		var a explainAnswer
		if err := json.Unmarshal([]byte(out), &a); err != nil || len(a.Matches) != 1 {
			t.Fatalf("-raw printed %q (%v), want the answer with one match", out, err)
		}
		for _, leak := range []string{"198.51.100.1", "198.51.100.2", "192.0.2.7"} {
			if strings.Contains(out, leak) {
				t.Errorf("the answer carries %s:\n%s", leak, out)
			}
		}
		return a.Matches[0].Key
	}
	viaProxy1 := key("-from", "127.0.0.1", "-header", "X-Forwarded-For: 198.51.100.1")
	viaProxy2 := key("-from", "127.0.0.1", "-header", "X-Forwarded-For: 198.51.100.2")
	direct := key("-from", "198.51.100.1")
	if viaProxy1 == viaProxy2 || viaProxy1 != direct {
		t.Errorf("keys: through the proxy for .1 %s, for .2 %s, .1 directly %s; want .1's two alike and .2's another", viaProxy1, viaProxy2, direct)
	}

	code, out, _ := runExplain(t, "-admin", admin, "-path", "/wp-admin/setup.php", "-from", "192.0.2.7")
	if code != 0 || !strings.HasPrefix(out, "verdict: forbidden (403), refused by no-wp-admin\n") {
		t.Errorf("exit %d, got:\n%s\nwant forbidden by no-wp-admin", code, out)
	}

	t.Setenv("EDGE_ADMIN_TOKEN", "wrong")
	if code, _, errs := runExplain(t, "-admin", admin, "-from", "192.0.2.7"); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("a wrong token: exit %d, stderr %q; want 1 and the 401", code, errs)
	}
	if code, _, _ := runExplain(t, "-admin", admin); code != 2 {
		t.Errorf("without -from: exit %d, want 2", code)
	}
	if code, _, _ := runExplain(t, "-admin", admin, "-from", "192.0.2.7", "-json", "{"); code != 2 {
		t.Errorf("bad -json: exit %d, want 2", code)
	}
}

// hasRow reports whether out has a table line with these fields in
// order, separated by spaces.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		got := strings.Fields(line)
		if len(got) >= len(fields) && strings.Join(got[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
