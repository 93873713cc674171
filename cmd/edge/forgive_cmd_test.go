package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// login is one POST /login from client for username, through the node's
// public listener; it returns the status.
func (n *reloadNode) login(t *testing.T, client, username, password string) int {
	t.Helper()
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, password)
	req, _ := http.NewRequest("POST", "http://"+n.addr+"/login", strings.NewReader(body))
	req.Header.Set("X-Forwarded-For", client)
	req.Header.Set("Content-Type", "application/json")
	resp, err := reloadClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestForgiveCommand: `edge forgive` against a running node of login.hcl
// unlocks a customer locked out by five failures, from the account and
// the address as support knows them, on every rule keyed on them, and
// prints each rule with its key's hash, the exemption's end and the
// scope; an account alone names the rule that needs the address too and
// exits 1; -rule forgives one rule; bad flags exit 2. The audit line has
// the actor and no raw identity.
func TestForgiveCommand(t *testing.T) {
	src, err := os.ReadFile("../../testdata/fixtures/policies/login.hcl")
	if err != nil {
		t.Fatal(err)
	}
	n := startReloadNode(t, string(src))
	t.Setenv("EDGE_ADMIN_TOKEN", reloadToken)
	const client, account = "203.0.113.7", "alice@example.com"
	for range 5 {
		n.login(t, client, account, "wrong")
	}
	if got := n.login(t, client, account, "letmein-demo"); got != http.StatusTooManyRequests {
		t.Fatalf("after five failures: got %d, want 429", got)
	}
	forgive := func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := run(append([]string{"forgive", "-admin", n.admin}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := forgive("-account", account, "-reason", "ticket 7", "-actor", "bob")
	if code != 1 || !strings.Contains(errs, "nothing to forgive") || !strings.Contains(errs, "rule login-failures-account-client needs ip too") {
		t.Errorf("the account alone: exit %d, stdout %q, stderr %q; want 1 naming the rule that needs the ip", code, out, errs)
	}
	code, out, errs = forgive("-account", " Alice@Example.COM", "-ip", client, "-for", "1h", "-reason", "ticket 7", "-actor", "bob")
	if code != 0 || !strings.Contains(out, "forgiven: login-failures-account-client (key ") || !strings.Contains(out, "forgiven: login-per-client (key ") ||
		!strings.Contains(out, "exempt until ") || !strings.Contains(out, "scope: this node (memory store)") {
		t.Fatalf("the account and the address: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if got := n.login(t, client, account, "letmein-demo"); got != http.StatusOK {
		t.Errorf("after edge forgive: got %d, want 200", got)
	}
	if code, out, errs := forgive("-rule", "login-per-client", "-ip", client, "-reason", "ticket 8"); code != 0 || out != "forgiven: login-per-client\nscope: this node (memory store)\n" {
		t.Errorf("-rule: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-ip", client}, "-reason is required"},
		{[]string{"-reason", "x"}, "name the identity"},
		{[]string{"-key", "nonsense", "-reason", "x"}, "is not NAME=VALUE"},
		{[]string{"-reason", "x", "extra"}, `unexpected argument "extra"`},
	} {
		if code, _, errs := forgive(tt.args...); code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", tt.args, code, errs, tt.want)
		}
	}
	logs := n.logs.String()
	if !strings.Contains(logs, `"audit":"forgive"`) || !strings.Contains(logs, `"actor":"bob"`) || !strings.Contains(logs, `"reason":"ticket 7"`) {
		t.Errorf("no audit line with the actor and reason:\n%s", logs)
	}
	for _, raw := range []string{client, account, "Alice@Example.COM"} {
		if strings.Contains(logs, raw) {
			t.Errorf("the logs hold %q", raw)
		}
	}
}
