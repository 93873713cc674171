//go:build !race

package skip_test

import (
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

func TestSkipAllocatesNothing(t *testing.T) {
	p := rulestest.Load(t, exemptPolicy)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(len(p.Rules))
	office := rulestest.Req{Method: "POST", Path: "/login", Host: "example.com", Client: "10.1.2.3"}.Build()
	ops := rulestest.Req{Method: "POST", Path: "/login", Host: "example.com", Client: "192.0.2.5", Fields: rulestest.Fields{HeaderValues: map[string]string{"X-Ops": "1"}}}.Build()
	ops.Fields = rulestest.RawHeaders{"X-Ops": []byte("1")}
	e.Check(t.Context(), rulestest.T0, p, office, s) // size the Scratch
	allocs := testing.AllocsPerRun(100, func() {
		e.Check(t.Context(), rulestest.T0, p, office, s)
		e.Check(t.Context(), rulestest.T0, p, ops, s)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per pair of checks, want 0", allocs)
	}
}
