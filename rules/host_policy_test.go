package rules

import (
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/route"
)

// ipStub stands for package basic's ip characteristic, which an internal
// test cannot import (basic imports rules): a key this test never counts.
var ipStub = Feature{Name: "stub", Characteristics: []CharacteristicType{{Name: "ip", Tag: TagIP,
	Compile: func(*Compiler, *Rule, string, hcl.Range) Characteristic { return globalStub{} }}}}

// globalStub is one value for every request.
type globalStub struct{}

func (globalStub) AppendValue(buf []byte, _ *Request, _ *Scratch) ([]byte, Status) {
	return buf, Present
}

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
`), ipStub)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r := p.Rule("login")
	matchHost := func(name []byte) bool { return r.Route.Match([]byte("GET"), nil, []byte("/login"), name) }
	for _, h := range []string{"login.example.com", "LOGIN.example.com.:80", "[::1]", "[0:0::2]:8080", "192.0.2.1"} {
		_, name, ok := route.AppendHost(nil, nil, []byte(h))
		if !ok || !matchHost(name) {
			t.Errorf("host %q (name %q, %v): the rule does not match it", h, name, ok)
		}
	}
	if matchHost([]byte("other.example.com")) {
		t.Error("the rule matches another host")
	}
}
