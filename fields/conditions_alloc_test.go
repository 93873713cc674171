//go:build !race

package fields_test

import (
	"net/netip"
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

func TestHeaderConditionsAllocateNothing(t *testing.T) {
	p, present := loadCond(t, `header_present = ["X-Monitoring"]`)
	q, equals := loadCond(t, `header_equals = { "X-Partner-Key" = "k" }`)
	f := rulestest.RawHeaders{"X-Monitoring": []byte("1"), "X-Partner-Key": []byte("k")}
	s := rules.NewScratch(1)
	s.Begin(p)
	req := &rules.Request{Client: netip.MustParseAddr("192.0.2.1"), Fields: f}
	allocs := testing.AllocsPerRun(100, func() {
		if present.Eval(req, s) != rules.Present {
			panic("header_present")
		}
		if equals.Eval(req, s) != rules.Present {
			panic("header_equals")
		}
	})
	_ = q
	if allocs != 0 {
		t.Errorf("got %v allocations per evaluation, want 0", allocs)
	}
}
