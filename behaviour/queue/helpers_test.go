package queue_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

var t0 = time.Unix(1_800_000_000, 0)

func loadDiags(src string) (*rules.Policy, hcl.Diagnostics) {
	return builtin.Load("test.hcl", []byte(src))
}

// costEngine is an engine on a memory store, a policy and a Scratch, at
// an instant of its own clock.
type costEngine struct {
	t   *testing.T
	e   *rules.Engine
	p   *rules.Policy
	s   *rules.Scratch
	now time.Time
}

func newCostEngine(t *testing.T, src string) *costEngine {
	t.Helper()
	p, diags := loadDiags(src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	e, err := rules.NewEngine(rules.EngineOptions{Store: ms, Secret: []byte("test secret")})
	if err != nil {
		t.Fatal(err)
	}
	return &costEngine{t: t, e: e, p: p, s: rules.NewScratch(4), now: t0}
}

// send decides a GET of path from one client at k.now.
func (k *costEngine) send(path string, f rules.Fields) rules.Decision {
	r := &rules.Request{
		Method: []byte("GET"),
		Path:   route.AppendMatchPath(nil, []byte(path), true),
		Client: netip.MustParseAddr("192.0.2.9"),
		Fields: f,
	}
	return k.e.Check(context.Background(), k.now, k.p, r, k.s)
}
