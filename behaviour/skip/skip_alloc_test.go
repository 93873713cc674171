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
	ops.Fields = rawFields{"X-Ops": []byte("1")}
	check(e, p, rulestest.Req{Method: "POST", Path: "/login", Host: "example.com", Client: "10.1.2.3"}, s) // size the Scratch
	allocs := testing.AllocsPerRun(100, func() {
		e.Check(t.Context(), rulestest.T0, p, office, s)
		e.Check(t.Context(), rulestest.T0, p, ops, s)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per pair of checks, want 0", allocs)
	}
}

// rawFields answers headers without converting.
type rawFields map[string][]byte

func (f rawFields) Header(n []byte) []byte { return f[string(n)] }
func (rawFields) Cookie([]byte) []byte     { return nil }
func (rawFields) Query([]byte) []byte      { return nil }
func (rawFields) RawQuery() []byte         { return nil }
func (rawFields) Body() ([]byte, []byte)   { return nil, nil }
func (rawFields) Cookies() []byte          { return nil }
