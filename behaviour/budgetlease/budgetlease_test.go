package budgetlease_test

import (
	"context"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/behaviour/budgetlease"
	"github.com/edge-gateway/edge/internal/golden"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/internal/teststore"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/leasestore"
)

// leasePolicy is a policy of one hot rule keyed by key, with extra
// attributes and budget_lease { } as given.
func leasePolicy(key, attrs, lease string) string {
	return `rule "api-global" {
  paths  = ["/api/*"]
  key    = ["` + key + `"]
  limit  = 1000
  period = "1s"
` + attrs + `
  budget_lease {
` + lease + `
  }
}
`
}

// TestCompileErrors: budget_lease is refused where a lease cannot hold,
// each with its file:line and why.
func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, key, attrs, lease, want string
	}{
		{"client key", "ip", "", "units = 10", "one hot counter"},
		{"attempts", "global", `count = "attempts"`, "units = 10", `only count = "requests"`},
		{"sliding log", "global", `algorithm = "sliding_log"`, "units = 10", "sliding log"},
		{"one unit", "global", "", "units = 1", "Invalid units"},
		{"over the burst", "global", "burst = 50", "units = 51", "between 2 and 50 (the rule's burst"},
		{"over the window's limit", "global", `algorithm = "fixed_window"`, "units = 1001", "between 2 and 1000 (the rule's limit"},
		{"no units", "global", "", "", `"units" is required`},
		{"concurrency", "global", `algorithm = "concurrency"`, "units = 5", "requests in flight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := rulestest.LoadDiags(leasePolicy(tt.key, tt.attrs, tt.lease))
			lines := golden.Lines(diags)
			if !diags.HasErrors() || !strings.Contains(lines, tt.want) || !strings.Contains(lines, "test.hcl:") {
				t.Errorf("diagnostics:\n%s want an error at test.hcl:LINE with %q", lines, tt.want)
			}
		})
	}
}

// TestEngineLeasesTheHotRule: through the Engine, a rule with
// budget_lease { units = 20 } on a leasing store costs its shared store a
// call per ten requests while far from its limit, admits exactly its limit
// over a window, and a route rule leases each path apart.
func TestEngineLeasesTheHotRule(t *testing.T) {
	for _, key := range []string{"global", "route"} {
		t.Run(key, func(t *testing.T) {
			p := rulestest.Load(t, leasePolicy(key, `algorithm = "fixed_window"`, "units = 20"))
			if st := budgetlease.Of(p.Rules[0]); st == nil || st.Units() != 20 {
				t.Fatalf("rule's stage %v, want budget_lease of 20 units", st)
			}
			shared := &teststore.Counting{Store: rulestest.NewStore(t)}
			e := rulestest.NewEngine(t, leasestore.New(shared, leasestore.Options{}))
			now := rulestest.T0 // the start of a second: one window
			admitted, callsAtLimit := 0, int64(0)
			for i := range 1500 {
				path := "/api/a"
				if key == "route" && i%2 == 1 {
					path = "/api/b"
				}
				req := rulestest.Req{Method: "GET", Path: path, Client: "192.0.2.1"}.Build()
				if d := e.Check(context.Background(), now, p, req, rules.NewScratch(4)); d.Verdict == rules.Forward {
					admitted++
				}
				if i == 999 {
					callsAtLimit = shared.Calls.Load()
				}
			}
			want := 1000
			if key == "route" {
				want = 1500 // two paths, 750 requests each, a limit of 1000 each
			}
			if admitted != want {
				t.Errorf("admitted %d of 1500, want %d", admitted, want)
			}
			// A call per ten requests while far from the limit, then leases
			// halving with what is left: about 120 calls for the first 1000
			// (past the limit each refusal is a call of its own, which
			// failclosed's deny cache answers in a node).
			if callsAtLimit > 130 {
				t.Errorf("%d store calls for the first 1000 requests, want at most 130", callsAtLimit)
			}
		})
	}
}
