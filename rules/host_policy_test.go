package rules

import (
	"testing"

	"github.com/edge-gateway/edge/route"
)

// TestPolicyHostsAreReadAsRequestHosts: a rule's hosts go through
// AppendHost, as the request's host does, so any spelling of one host in
// the policy matches every spelling of it in a request.
func TestPolicyHostsAreReadAsRequestHosts(t *testing.T) {
	t.Parallel()
	p, diags := Load("p.hcl", []byte(`
rule "login" {
  paths  = ["/login"]
  hosts  = ["Login.Example.COM.:443", "::1", "[0::2]", "[::ffff:192.0.2.1]"]
  key    = ["ip"]
  limit  = 5
  period = "1m"
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r := p.Rule("login")
	for _, h := range []string{"login.example.com", "LOGIN.example.com.:80", "[::1]", "[0:0::2]:8080", "192.0.2.1"} {
		_, name, ok := route.AppendHost(nil, nil, []byte(h))
		if !ok || !r.matchHost(name) {
			t.Errorf("host %q (name %q, %v): the rule does not match it", h, name, ok)
		}
	}
	if r.matchHost([]byte("other.example.com")) {
		t.Error("the rule matches another host")
	}
}
