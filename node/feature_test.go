package node_test

import (
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// TestOfWhateverTheBlocks: a policy has one Config whichever of the
// node's blocks it writes, in whichever order: the defaults without
// them, the store block's with no edge block, both blocks' when the store
// comes first in the file; and the rules read the same store (Keys).
func TestOfWhateverTheBlocks(t *testing.T) {
	tests := []struct {
		name, src        string
		listen           string
		maxKeys, network int
	}{
		{"none", ``, node.DefaultListen, rules.DefaultMaxKeys, rules.DefaultNetworkIPv4Prefix},
		{"store only", "store \"memory\" {\n  max_keys = 500\n  network_ipv4_prefix = 20\n}\n", node.DefaultListen, 500, 20},
		{"store first", "store \"memory\" {\n  max_keys = 500\n}\nedge {\n  listen = \"127.0.0.1:18080\"\n}\n", "127.0.0.1:18080", 500, rules.DefaultNetworkIPv4Prefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := builtin.Load("p.hcl", []byte(tt.src))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			c := node.Of(p)
			if c.Listen != tt.listen || c.Store.MaxKeys != tt.maxKeys || p.Keys.MaxKeys != tt.maxKeys {
				t.Errorf("listen %q, max_keys %d (rules read %d); want %q, %d", c.Listen, c.Store.MaxKeys, p.Keys.MaxKeys, tt.listen, tt.maxKeys)
			}
			if c.Conns.NetworkIPv4Prefix != tt.network || c.Store.Kind != "memory" {
				t.Errorf("conns' network /%d, store %q; want /%d, memory", c.Conns.NetworkIPv4Prefix, c.Store.Kind, tt.network)
			}
		})
	}
}

// TestEdgeCompilesBeforeStore: the store block reads the edge block's
// client prefixes wherever the file writes it, as rules compiled them
// before (edge, then store).
func TestEdgeCompilesBeforeStore(t *testing.T) {
	src := "store \"memory\" {\n  network_ipv4_prefix = 28\n}\nedge {\n  ipv4_prefix = 24\n}\n"
	_, diags := builtin.Load("p.hcl", []byte(src))
	if len(diags) != 1 || diags[0].Summary != "Network finer than a client" {
		t.Errorf("got %v, want the network finer than ipv4_prefix = 24", diags)
	}
}

// BenchmarkOf is what a request pays for each read of the node's
// configuration (the gateway reads ja4_header and body_timeout per
// request): a type assertion, no allocation.
func BenchmarkOf(b *testing.B) {
	p, diags := builtin.LoadFile("../policies.hcl")
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n += len(node.Of(p).JA4Header)
	}
	_ = n
}
