//go:build !race

package gateway

import (
	"testing"

	"github.com/edge-gateway/edge/nat"
)

// TestDecisionPathAllocatesNothing guards the zero-allocation decision path
// (docs/architecture.md, "Extension points"): client key, route match,
// five rules, memstore.
func TestDecisionPathAllocatesNothing(t *testing.T) {
	for _, tt := range []struct{ name, peer, xff string }{
		{"ipv4", "10.1.2.3", "203.0.113.9, 10.0.0.2"},
		{"ipv6", "fd00::1", "2001:db8:1:2::9, fd00::2"},
	} {
		bs := newBenchSetup(t, tt.peer, tt.xff)
		if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
			t.Errorf("%s: decision path allocates %.1f times per request, want 0", tt.name, n)
		}
	}
}

// TestVisitorDecisionPathAllocatesNothing: verifying a visitor cookie and
// the visitor rule's two ops add no allocation.
func TestVisitorDecisionPathAllocatesNothing(t *testing.T) {
	bs := newBenchSetupWith(t, benchVisitorPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", validCookie)
	if _, ok := nat.ConfigOf(bs.st.policy).Visitor(bs.rs.sc); !ok {
		t.Fatal("cookie not valid")
	}
	if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
		t.Errorf("decision path with a visitor cookie allocates %.1f times per request, want 0", n)
	}
}
