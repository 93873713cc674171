package rules_test

import (
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// phonesRule is a rule of 2,000 keys (100 a network at the default 5%).
const phonesRule = `
rule "phones" {
  paths     = ["/otp/send"]
  key       = ["ip"]
  limit     = 3
  period    = "15m"
  max_keys  = 2000
  sensitive = true
}
`

// TestRuleNetworkKeys: a rule's network bound is its network_share (or,
// on a sensitive rule, the store's, 5% by default) of its key budget,
// rounded down, never fewer than the keys one request makes (two for a
// visitor rule with its IP's ceiling), and none for a share of 100%, one
// that rounds to the whole budget, or a Redis store. An ordinary rule that
// sets no network_share of its own has none, whatever the store sets
// (before, the store's default held every rule, and a large NAT filling an
// ordinary rule's budget had its real users refused).
func TestRuleNetworkKeys(t *testing.T) {
	p := rulestest.Load(t, `
store "memory" {
  max_keys = 80
}
visitor {}
`+phonesRule+`
rule "half-percent" {
  paths         = ["/a"]
  key           = ["ip"]
  limit         = 3
  period        = "15m"
  max_keys      = 2000
  network_share = "0.5%"
}
rule "tiny" {
  paths     = ["/a"]
  key       = ["ip"]
  limit     = 3
  period    = "15m"
  max_keys  = 10
  sensitive = true
}
rule "visitors" {
  paths     = ["/login"]
  key       = ["visitor"]
  limit     = 3
  period    = "15m"
  max_keys  = 10
  sensitive = true
}
rule "ordinary" {
  paths    = ["/a"]
  key      = ["ip"]
  limit    = 3
  period   = "15m"
  max_keys = 2000
}
rule "ordinary-own" {
  paths         = ["/a"]
  key           = ["ip"]
  limit         = 3
  period        = "15m"
  max_keys      = 2000
  network_share = "5%"
}
rule "off" {
  paths         = ["/a"]
  key           = ["ip"]
  limit         = 3
  period        = "15m"
  max_keys      = 2000
  network_share = "100%"
}
rule "whole" {
  paths         = ["/a"]
  key           = ["ip"]
  limit         = 3
  period        = "15m"
  max_keys      = 1
  network_share = "50%"
}
rule "shared-budget" {
  paths     = ["/a"]
  key       = ["ip"]
  limit     = 3
  period    = "15m"
  sensitive = true
}
`)
	for name, want := range map[string]int{
		"phones": 100, "half-percent": 10, "tiny": 1, "visitors": 2, "off": 0, "whole": 0,
		"shared-budget": 2, // 5% of its 40 keys (half the store's: the mint budget has the other)
		// An ordinary rule: only its own share.
		"ordinary":     0,
		"ordinary-own": 100,
	} {
		if got := p.Rule(name).NetworkKeys; got != want {
			t.Errorf("rule %q: NetworkKeys %d, want %d", name, got, want)
		}
	}
	if p.Keys.NetworkShare != rules.DefaultNetworkShare || p.Keys.NetworkIPv4Prefix != 24 || p.Keys.NetworkIPv6Prefix != 48 {
		t.Errorf("store: got share %d ppm, /%d, /%d; want the defaults 50000, /24, /48", p.Keys.NetworkShare, p.Keys.NetworkIPv4Prefix, p.Keys.NetworkIPv6Prefix)
	}
	r := rulestest.Load(t, `
store "redis" {
  url = "redis://127.0.0.1:6379/0"
}
`+phonesRule)
	if got := r.Rule("phones").NetworkKeys; got != 0 {
		t.Errorf("a rule under a Redis store: NetworkKeys %d, want 0 (Redis has no key budgets)", got)
	}
}

// TestOpsCarryTheClientsNetwork: every op of a request carries one
// network, the client's: the same for every address of one IPv6 /48 or
// IPv4 /24 (the default prefixes), another for another network, an IPv4
// address the same whether written plain or IPv4-mapped; each op carries
// its rule's bound. A policy without shares computes none.
func TestOpsCarryTheClientsNetwork(t *testing.T) {
	const src = `
rule "a" {
  paths     = ["/a"]
  key       = ["ip"]
  limit     = 3
  period    = "15m"
  max_keys  = 2000
  sensitive = true
}
rule "b" {
  paths     = ["/a"]
  key       = ["ip"]
  limit     = 3
  period    = "15m"
  max_keys  = 100
  sensitive = true
}
`
	p := rulestest.Load(t, src)
	st := &opsStore{}
	e := rulestest.NewEngine(t, st)
	s := rules.NewScratch(len(p.Rules))
	network := func(client string) uint32 {
		t.Helper()
		check(e, p, req{Method: "GET", Path: "/a", Client: client}, s)
		if len(st.ops) != 2 || st.ops[0].Network != st.ops[1].Network || st.ops[0].Network == 0 {
			t.Fatalf("%s: ops %+v, want two with one network", client, st.ops)
		}
		if st.ops[0].NetworkKeys != 100 || st.ops[1].NetworkKeys != 5 {
			t.Errorf("%s: NetworkKeys %d and %d, want 100 and 5", client, st.ops[0].NetworkKeys, st.ops[1].NetworkKeys)
		}
		return st.ops[0].Network
	}
	v6 := network("2001:db8:a77a:1::1")
	for _, same := range []string{"2001:db8:a77a:ffff::7", "2001:db8:a77a::1"} {
		if network(same) != v6 {
			t.Errorf("%s: another network than 2001:db8:a77a:1::1's, want its /48's", same)
		}
	}
	if network("2001:db8:a77b::1") == v6 {
		t.Error("2001:db8:a77b::1: the network of 2001:db8:a77a::/48, want its own")
	}
	v4 := network("203.0.113.7")
	for _, same := range []string{"203.0.113.200", "::ffff:203.0.113.9"} {
		if network(same) != v4 {
			t.Errorf("%s: another network than 203.0.113.7's, want its /24's", same)
		}
	}
	if network("203.0.114.7") == v4 || v4 == v6 {
		t.Error("203.0.114.7 or an IPv6 network: the network of 203.0.113.0/24, want its own")
	}

	off := rulestest.Load(t, `
store "memory" {
  network_share = "100%"
}
`+src)
	check(e, off, req{Method: "GET", Path: "/a", Client: "203.0.113.7"}, s)
	if st.ops[0].Network != 0 || st.ops[0].NetworkKeys != 0 {
		t.Errorf("no shares: op %+v, want no network and no bound", st.ops[0])
	}
}
