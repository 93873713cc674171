package gateway

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// Weighted costs through the real server (docs/policy.md, "cost"): the
// shipped policies.hcl's api-export-per-ip rule (gcra, 100 an hour, 10
// charged up front, settle_from = "X-Actual-Cost", max_cost 50) in front of
// the demo origin, whose /api/export?cost=N names N as the real cost. The
// clock is fake and moves only when the test says.
//
// It runs on the memory store and on a real redis-server (the Lua script's
// add and refund, deciding at the test's clock: UseCallerClock; skipped
// without redis-server unless EDGE_REQUIRE_STACKS).
func TestExportCostSettlesThroughTheServer(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testExportCost(t, nil) })
	t.Run("redis", func(t *testing.T) {
		rs, err := redisstore.New(redisstore.Options{URL: testredis.Start(t).URL(), Timeout: time.Second, UseCallerClock: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		testExportCost(t, rs)
	})
}

func testExportCost(t *testing.T, store rules.Store) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: clk, store: store})
	export := func(cost string, header ...string) reply {
		t.Helper()
		url := "http://" + n.addr + "/api/export"
		if cost != "" {
			url += "?cost=" + cost
		}
		return do(t, "GET", url, "", header...)
	}
	remaining := func(r reply) int {
		t.Helper()
		// RateLimit: "api-export-per-ip";r=N;t=T, among the others.
		for _, item := range strings.Split(r.header.Get("RateLimit"), ",") {
			item = strings.TrimSpace(item)
			if !strings.HasPrefix(item, `"api-export-per-ip";`) {
				continue
			}
			for _, p := range strings.Split(item, ";") {
				if v, ok := strings.CutPrefix(p, "r="); ok {
					r, err := strconv.Atoi(v)
					if err != nil {
						t.Fatalf("RateLimit %q", item)
					}
					return r
				}
			}
		}
		t.Fatalf("no api-export-per-ip in RateLimit %q", r.header.Get("RateLimit"))
		return 0
	}

	// The estimate, 10, is charged: 90 left; the origin said 10 (its
	// default), so nothing is settled.
	r := export("")
	if r.status != 200 || remaining(r) != 90 {
		t.Fatalf("first export: %d, r=%d, want 200 and 90", r.status, remaining(r))
	}
	if v := r.header.Get("X-Actual-Cost"); v != "" {
		t.Errorf("the origin's X-Actual-Cost reached the client: %q", v)
	}
	// Real cost 50: 40 more charged after the answer (which still shows
	// the state before the settle: 80 left after this one's 10).
	if r := export("50"); r.status != 200 || remaining(r) != 80 {
		t.Fatalf("second export: %d, r=%d, want 200 and 80", r.status, remaining(r))
	}
	if r := export(""); r.status != 200 || remaining(r) != 30 {
		t.Fatalf("after a settle of 40: r=%d, want 30", remaining(r))
	}
	// The origin names a cost over max_cost: clamped to 50 (40 more), and
	// counted; 30 - 10 - 40 leaves 20 units of debt.
	before := testutil.ToFloat64(n.srv.m.settleInvalid)
	if r := export("5000"); r.status != 200 || remaining(r) != 20 {
		t.Fatalf("fourth export: %d r=%d", r.status, remaining(r))
	}
	if got := testutil.ToFloat64(n.srv.m.settleInvalid) - before; got != 1 {
		t.Errorf("edge_settle_invalid_total rose by %v, want 1", got)
	}
	// 20 left, 40 charged: 20 in debt. Refused, with a Retry-After that
	// covers the debt and the 10 of the next estimate: 30 units × 36 s.
	r = export("")
	if r.status != 429 || r.header.Get("Retry-After") != "1080" {
		t.Fatalf("in debt: %d Retry-After %q, want 429 and 1080", r.status, r.header.Get("Retry-After"))
	}
	clk.Advance(1080*time.Second - time.Second)
	if r := export(""); r.status != 429 {
		t.Fatalf("a second early: %d, want 429", r.status)
	}
	clk.Advance(time.Second)
	// Real cost 0: all 10 refunded. Then invalid values leave the
	// estimate standing (and count), a negative one reads as 0.
	if r := export("0"); r.status != 200 || remaining(r) != 0 {
		t.Fatalf("recovered: %d r=%d, want 200 and 0 (%v)", r.status, remaining(r), r.header)
	}
	if r := export("abc"); r.status != 200 || remaining(r) != 0 {
		t.Fatalf("after a refund of 10: %d r=%d, want 200 and 0", r.status, remaining(r))
	}
	if r := export(""); r.status != 429 {
		t.Fatalf("after an invalid settle (the estimate stood): %d, want 429", r.status)
	}
	if got := testutil.ToFloat64(n.srv.m.settleInvalid) - before; got != 2 {
		t.Errorf("edge_settle_invalid_total rose by %v, want 2", got)
	}
	// Forwarded: the four before the debt, and the two after it.
	var hits int64
	for path, h := range n.hits(t) {
		if strings.HasPrefix(path, "/api/export") {
			hits += h
		}
	}
	if hits != 6 {
		t.Errorf("the origin saw %d exports, want 6", hits)
	}
}
