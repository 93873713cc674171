package cost_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/cost"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

func TestRequestCost(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want int64
	}{
		{"", 1}, {"   ", 1}, // absent: what a client declaring nothing pays
		{"3", 3}, {" 7\t", 7}, {"007", 7},
		{"0", 1}, {"-5", 1}, {"-0", 1}, // never 0 or negative
		{"50", 50}, {"51", 50}, {"1000000000000000000", 50}, {"99999999999999999999999999999", 50},
		{"abc", 50}, {"1e18", 50}, {"+5", 50}, {"2, 3", 50}, {"5abc", 50}, {"-", 50}, {"0x10", 50},
		{strings.Repeat("1", cost.MaxCostHeaderBytes+1), 50},
	} {
		if got := cost.RequestCost([]byte(tt.v), 50); got != tt.want {
			t.Errorf("RequestCost(%q, 50) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

func TestSettleCost(t *testing.T) {
	for _, tt := range []struct {
		v           string
		want        int64
		ok, clamped bool
	}{
		{"", 0, false, false},
		{"12", 12, true, false}, {" 0 ", 0, true, false}, {"50", 50, true, false},
		{"-3", 0, true, true}, {"51", 50, true, true}, {"1000000000000000000000", 50, true, true},
		{"abc", 0, false, true}, {"1.5", 0, false, true}, {strings.Repeat("9", 40), 0, false, true},
	} {
		got, ok, clamped := cost.SettleCost([]byte(tt.v), 50)
		if got != tt.want || ok != tt.ok || clamped != tt.clamped {
			t.Errorf("SettleCost(%q, 50) = %d, %v, %v; want %d, %v, %v", tt.v, got, ok, clamped, tt.want, tt.ok, tt.clamped)
		}
	}
}

func TestCostCompile(t *testing.T) {
	base := `rule "r" {
  paths = ["/api/*"]
  key = ["ip"]
  limit = 10
  period = "1m"
  %s
}`
	for _, tt := range []struct{ attrs, err string }{
		{`cost = 3`, ""},
		{`cost = "header:X-Cost"
  max_cost = 10`, ""},
		{`settle_from = "X-Actual-Cost"
  max_cost = 10`, ""},
		{`cost = 2
  settle_from = "X-Actual-Cost"
  max_cost = 5`, ""},
		{`cost = 0`, "Invalid cost"},
		{`cost = -1`, "Invalid cost"},
		{`cost = 1.5`, "Invalid cost"},
		{`cost = 11`, "cost too high"},
		{`cost = "X-Cost"`, "Invalid cost"},
		{`cost = "header:"`, "Invalid cost"},
		{`cost = "header:X Cost"`, "Invalid cost"},
		{`cost = "header:X-Cost"`, "Missing max_cost"},
		{`settle_from = "X-Actual-Cost"`, "Missing max_cost"},
		{`cost = "header:X-Cost"
  max_cost = 11`, "max_cost too high"},
		{`cost = "header:X-Cost"
  max_cost = 0`, "Invalid max_cost"},
		{`cost = 5
  max_cost = 6`, "max_cost not used"},
		{`cost = 5
  settle_from = "X-Actual-Cost"
  max_cost = 4`, "max_cost too low"},
		{`settle_from = "X Actual"
  max_cost = 4`, "Invalid settle_from"},
		{`settle_from = "X-Actual-Cost"
  max_cost = 4
  count = "failures"`, "settle_from with count"},
		{`settle_from = "X-Actual-Cost"
  max_cost = 4
  reset_on_success = true`, "settle_from with reset_on_success"},
		{`count_distinct = "header:X-User"
  cost = 2`, "cost not used"},
	} {
		_, diags := rulestest.LoadDiags(fmt.Sprintf(base, tt.attrs))
		rulestest.WantError(t, tt.attrs, diags, tt.err)
	}
	// The bucket algorithms' capacity is their burst.
	if _, diags := rulestest.LoadDiags(`rule "r" {
  key = ["ip"]
  limit = 10
  burst = 40
  period = "1m"
  cost = "header:X-Cost"
  max_cost = 40
}`); diags.HasErrors() {
		t.Errorf("max_cost = burst: %v", diags.Error())
	}
	p := rulestest.Load(t, fmt.Sprintf(base, `cost = "header:X-Cost"
  max_cost = 10
  settle_from = "X-Actual-Cost"`))
	r := cost.Of(p.Rules[0])
	if r.Cost() != 0 || r.CostHeader() != "X-Cost" || r.MaxCost() != 10 || r.SettleFrom() != "X-Actual-Cost" {
		t.Errorf("compiled: cost %d header %q max %d settle %q", r.Cost(), r.CostHeader(), r.MaxCost(), r.SettleFrom())
	}
}

// respHeaders is a map-backed rules.ResponseHeaders.
type respHeaders map[string]string

func (h respHeaders) PeekBytes(n []byte) []byte { return rulestest.Fields{HeaderValues: h}.Header(n) }

// multiFields adds every value of a header (cost.MultiHeader).
type multiFields struct {
	rulestest.Fields
	all map[string][]string
}

func (f multiFields) HeaderAll(name string) [][]byte {
	var out [][]byte
	for _, v := range f.all[name] {
		out = append(out, []byte(v))
	}
	return out
}

// costEngine is a rulestest.Run of the policy under test that answers
// with response headers.
type costEngine struct{ *rulestest.Run }

func newCostEngine(t *testing.T, src string) *costEngine {
	return &costEngine{rulestest.NewRun(t, src)}
}

// answer settles the last request with the origin's headers h.
func (k *costEngine) answer(h respHeaders) bool {
	k.T.Helper()
	k.S.SetResponse(h)
	called, err := k.E.Settle(context.Background(), k.Now, k.S, 200, nil)
	if err != nil {
		k.T.Fatal(err)
	}
	return called
}

func TestEngineCostFromHeader(t *testing.T) {
	k := newCostEngine(t, `rule "api" {
  paths = ["/api/*"]
  key = ["ip"]
  algorithm = "fixed_window"
  limit = 100
  period = "1m"
  cost = "header:X-Cost"
  max_cost = 40
}`)
	k.Now = time.Unix(1_800_000_040, 0) // a window's start: nothing rolls over below
	left := int64(100)
	for _, tt := range []struct {
		name string
		f    rules.Fields
		want int64
	}{
		{"7", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "7"}}, 7},
		{"missing", rulestest.Fields{}, 1},
		{"0", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "0"}}, 1},
		{"-5", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "-5"}}, 1},
		{"1e18", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "1e18"}}, 40},
		{"huge", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "1000000000000000000"}}, 40},
		{"abc", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "abc"}}, 40},
		{"repeated", multiFields{Fields: rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "1"}}, all: map[string][]string{"X-Cost": {"1", "9"}}}, 9},
	} {
		if left < tt.want {
			k.Now = k.Now.Add(time.Minute)
			left = 100
		}
		d := k.Get("/api/x", tt.f)
		if d.Verdict != rules.Forward {
			t.Fatalf("%s: verdict %d", tt.name, d.Verdict)
		}
		op, res := k.S.Ops[0], k.S.Res[0]
		left -= tt.want
		if op.Cost != tt.want || res.Remaining != left {
			t.Errorf("%s: cost %d remaining %d, want cost %d remaining %d", tt.name, op.Cost, res.Remaining, tt.want, left)
		}
	}
	// A cost larger than what is left is refused, and takes nothing.
	k.Now, left = k.Now.Add(time.Minute), 100
	for range 2 {
		k.Get("/api/x", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "40"}})
	}
	if d := k.Get("/api/x", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "21"}}); d.Verdict != rules.RefuseLimit {
		t.Errorf("21 with 20 left: verdict %d, want refused", d.Verdict)
	}
	if d := k.Get("/api/x", rulestest.Fields{HeaderValues: map[string]string{"X-Cost": "20"}}); d.Verdict != rules.Forward || k.S.Res[0].Remaining != 0 {
		t.Errorf("20 with 20 left: verdict %d remaining %d, want forwarded, 0", d.Verdict, k.S.Res[0].Remaining)
	}
}

func TestEngineSettleFrom(t *testing.T) {
	for _, alg := range []string{"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window", "sliding_log"} {
		t.Run(alg, func(t *testing.T) {
			k := newCostEngine(t, `rule "export" {
  paths = ["/api/export"]
  key = ["ip"]
  algorithm = "`+alg+`"
  limit = 20
  period = "1m"
  cost = 2
  max_cost = 20
  settle_from = "X-Actual-Cost"
}`)
			k.Now = time.Unix(1_800_000_040, 0) // a window's start
			d := k.Get("/api/export", nil)
			if d.Verdict != rules.Forward || !d.Settle || k.S.Res[0].Remaining != 18 {
				t.Fatalf("first: verdict %d settle %v remaining %d", d.Verdict, d.Settle, k.S.Res[0].Remaining)
			}
			// The origin says it cost 12: 10 more are charged.
			if !k.answer(respHeaders{"X-Actual-Cost": "12"}) {
				t.Fatal("settle made no store call")
			}
			if d := k.Get("/api/export", nil); d.Verdict != rules.Forward || k.S.Res[0].Remaining != 6 {
				t.Fatalf("after 12: verdict %d remaining %d, want 6 left", d.Verdict, k.S.Res[0].Remaining)
			}
			// Real cost 1 (estimate 2): one unit refunded.
			k.answer(respHeaders{"X-Actual-Cost": "1"})
			if d := k.Get("/api/export", nil); d.Verdict != rules.Forward || k.S.Res[0].Remaining != 5 {
				t.Fatalf("after a refund: remaining %d, want 5", k.S.Res[0].Remaining)
			}
			// Real cost 20 with 5 left: the served request is charged in
			// full (the settle never refuses), the balance goes below
			// empty (not for sliding_log, which holds at most limit).
			k.answer(respHeaders{"X-Actual-Cost": "20"})
			if cost.SettleInvalid(k.S) != 0 {
				t.Errorf("a valid value counted as invalid")
			}
			d = k.Get("/api/export", nil)
			if d.Verdict != rules.RefuseLimit {
				t.Fatalf("in debt: verdict %d, want refused", d.Verdict)
			}
			// Refused until the balance recovers: the wait the refusal
			// names is exactly enough, and less is not.
			wait := d.RetryAfter
			if wait <= 0 {
				t.Fatalf("retry after %v", wait)
			}
			k.Now = k.Now.Add(wait - time.Microsecond)
			if d := k.Get("/api/export", nil); d.Verdict != rules.RefuseLimit {
				t.Fatalf("just before the retry time: verdict %d", d.Verdict)
			}
			k.Now = k.Now.Add(time.Microsecond)
			if d := k.Get("/api/export", nil); d.Verdict != rules.Forward {
				t.Fatalf("at the retry time (%v): verdict %d", wait, d.Verdict)
			}
			// No header, or a header that is not an integer: the estimate
			// stands; the invalid one is counted.
			k.Now = k.Now.Add(10 * time.Minute)
			for _, h := range []respHeaders{{}, {"X-Actual-Cost": "lots"}} {
				k.Get("/api/export", nil)
				before := k.S.Res[0].Remaining
				if k.answer(h) {
					t.Errorf("%v: a store call with nothing to settle", h)
				}
				k.Get("/api/export", nil)
				if got := k.S.Res[0].Remaining; got != before-2 {
					t.Errorf("%v: remaining %d after %d, want the estimate of 2 to stand", h, got, before)
				}
				k.answer(respHeaders{"X-Actual-Cost": "2"})
			}
			k.Get("/api/export", nil)
			k.answer(respHeaders{"X-Actual-Cost": "-4"})
			if cost.SettleInvalid(k.S) != 1 {
				t.Errorf("-4: invalid %d, want 1", cost.SettleInvalid(k.S))
			}
		})
	}
}

// A settle_from debt: the balance goes below empty by the difference, so
// the key is refused for longer than a full counter would be.
func TestEngineSettleDebt(t *testing.T) {
	k := newCostEngine(t, `rule "export" {
  paths = ["/api/export"]
  key = ["ip"]
  limit = 10
  period = "10s"
  max_cost = 10
  settle_from = "X-Actual-Cost"
}`)
	for range 9 {
		k.Get("/api/export", nil)
	}
	if d := k.Get("/api/export", nil); d.Verdict != rules.Forward || k.S.Res[0].Remaining != 0 {
		t.Fatalf("tenth: verdict %d remaining %d", d.Verdict, k.S.Res[0].Remaining)
	}
	k.answer(respHeaders{"X-Actual-Cost": "10"}) // 9 more: 9 units of debt
	d := k.Get("/api/export", nil)
	// gcra at 1 a second: full plus 9 units of debt, a unit fits after 10 s.
	if d.Verdict != rules.RefuseLimit || d.RetryAfter != 10*time.Second {
		t.Errorf("in debt: verdict %d retry after %v, want refused for 10s", d.Verdict, d.RetryAfter)
	}
}

// A dry-run rule settles as it would: its counter follows the real cost.
func TestEngineSettleDryRun(t *testing.T) {
	k := newCostEngine(t, `rule "export" {
  paths = ["/api/export"]
  key = ["ip"]
  algorithm = "fixed_window"
  limit = 10
  period = "1m"
  max_cost = 10
  settle_from = "X-Actual-Cost"
  dry_run = true
}`)
	k.Now = time.Unix(1_800_000_040, 0)
	if d := k.Get("/api/export", nil); !d.Settle {
		t.Fatal("a dry-run rule does not settle")
	}
	k.answer(respHeaders{"X-Actual-Cost": "10"})
	d := k.Get("/api/export", nil)
	if d.Verdict != rules.Forward || k.S.Matches[0].Outcome != rules.OutcomeDryRunDeny {
		t.Errorf("after a settle of 10: verdict %d outcome %v, want forwarded, dry-run deny", d.Verdict, k.S.Matches[0].Outcome)
	}
}

// A visitor rule settles its IP ceiling too.
func TestEngineSettleCeiling(t *testing.T) {
	k := newCostEngine(t, `visitor {}
rule "export" {
  paths = ["/api/export"]
  key = ["visitor"]
  algorithm = "fixed_window"
  limit = 10
  ip_ceiling = 10
  period = "1m"
  max_cost = 10
  settle_from = "X-Actual-Cost"
}`)
	k.Now = time.Unix(1_800_000_040, 0)
	k.Get("/api/export", nil)
	if k.S.Matches[0].CeilingOp < 0 {
		t.Skip("no ceiling op: the rule keyed on an IP without a visitor ID")
	}
	k.answer(respHeaders{"X-Actual-Cost": "7"})
	k.Get("/api/export", nil)
	if r, c := k.S.Res[k.S.Matches[0].Op], k.S.Res[k.S.Matches[0].CeilingOp]; r.Remaining != 2 || c.Remaining != 2 {
		t.Errorf("after 7: remaining %d, ceiling %d, want 2 and 2", r.Remaining, c.Remaining)
	}
}

// Under decide_listen the edge never sees the origin's answer: settle_from
// is a warning, as reset_on_success is.
func TestCostSettleUnderDecideListenWarns(t *testing.T) {
	_, diags := rulestest.LoadDiags(`edge {
  decide_listen   = "127.0.0.1:9902"
  trusted_proxies = ["127.0.0.1/32"]
}
rule "r" {
  key         = ["ip"]
  limit       = 10
  period      = "1m"
  max_cost    = 10
  settle_from = "X-Actual-Cost"
}`)
	if diags.HasErrors() || !strings.Contains(diags.Error(), "settle_from, which needs the origin's answer") {
		t.Errorf("got %v, want the settle_from warning", diags)
	}
}
