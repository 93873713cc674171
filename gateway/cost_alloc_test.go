//go:build !race

package gateway

import (
	"context"
	"testing"
)

// benchCostPolicy adds weighted costs to the bench policy: a cost read
// from a request header (clamped, every line read) and settled from the
// origin's X-Actual-Cost, and a constant cost (docs/policy.md, "cost").
const benchCostPolicy = benchPolicy + `
rule "cost-header" {
  paths       = ["/login"]
  key         = ["ip"]
  limit       = 1000000
  period      = "1s"
  cost        = "header:X-Cost"
  max_cost    = 10
  settle_from = "X-Actual-Cost"
}
rule "cost-constant" {
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "sliding_window"
  limit     = 1000000
  period    = "1s"
  cost      = 3
}
`

// TestCostDecisionPathAllocatesNothing: reading and clamping a cost header
// and charging it add no allocation to the decision path, nor does the
// settle after the origin's answer.
func TestCostDecisionPathAllocatesNothing(t *testing.T) {
	bs := newBenchSetupWith(t, benchCostPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", nil)
	bs.ctx.Request.Header.Set("X-Cost", "4")
	bs.ctx.Request.Header.Add("X-Cost", "2")
	bs.ctx.Response.Header.Set("X-Actual-Cost", "7")
	if !bs.s.decide(bs.ctx, bs.st, bs.rs) || !bs.rs.d.Settle {
		t.Fatalf("setup: verdict %d settle %v", bs.rs.d.Verdict, bs.rs.d.Settle)
	}
	var costs []int64
	for _, m := range bs.rs.sc.Matches {
		if m.Op >= 0 && (m.Rule.Name == "cost-header" || m.Rule.Name == "cost-constant") {
			costs = append(costs, bs.rs.sc.Ops[m.Op].Cost)
		}
	}
	if len(costs) != 2 || costs[0] != 4 || costs[1] != 3 {
		t.Fatalf("costs %v, want [4 3] (the larger header line, the constant)", costs)
	}
	if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
		t.Errorf("decision path with costs allocates %.1f times per request, want 0", n)
	}
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		bs.s.decide(bs.ctx, bs.st, bs.rs)
		bs.rs.sc.SetResponse(&bs.ctx.Response.Header)
		if called, err := bs.s.engine.Settle(ctx, bs.rs.now, bs.rs.sc, 200, nil); !called || err != nil {
			t.Fatalf("settle: %v %v", called, err)
		}
	})
	if n != 0 {
		t.Errorf("decision and settle allocate %.1f times per request, want 0", n)
	}
}

// BenchmarkDecisionPathCost is BenchmarkDecisionPath with the two cost
// rules, and the settle after the answer.
func BenchmarkDecisionPathCost(b *testing.B) {
	bs := newBenchSetupWith(b, benchCostPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", nil)
	bs.ctx.Request.Header.Set("X-Cost", "4")
	bs.ctx.Response.Header.Set("X-Actual-Cost", "7")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		bs.s.decide(bs.ctx, bs.st, bs.rs)
		bs.rs.sc.SetResponse(&bs.ctx.Response.Header)
		_, _ = bs.s.engine.Settle(ctx, bs.rs.now, bs.rs.sc, 200, nil)
	}
}
