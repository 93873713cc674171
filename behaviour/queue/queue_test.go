package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/queue"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

func TestQueueCompile(t *testing.T) {
	base := `rule "r" {
  paths = ["/api/*"]
  key = ["ip"]
  %s
}`
	leaky := "algorithm = \"leaky_bucket\"\n  limit = 5\n  period = \"1s\"\n  burst = 20\n  "
	for _, tt := range []struct {
		attrs, err string
		maxDelay   time.Duration
	}{
		{leaky + `queue = true`, "", 4 * time.Second}, // default burst ÷ rate
		{leaky + "queue = true\n  max_delay = \"1500ms\"", "", 1500 * time.Millisecond},
		{leaky + "queue = true\n  max_delay = \"4s\"", "", 4 * time.Second},
		{leaky + "queue = true\n  sensitive = true", "", 4 * time.Second}, // allowed: it only holds what the bucket admits (docs/policy.md)
		{leaky + `queue = false`, "", 0},
		{leaky + "queue = true\n  max_delay = \"4001ms\"", "Invalid max_delay", 0},
		{leaky + "queue = true\n  max_delay = \"0s\"", "Invalid max_delay", 0},
		{leaky + "queue = true\n  max_delay = 3", "Invalid max_delay", 0},
		{leaky + `max_delay = "1s"`, "max_delay without queue", 0},
		{leaky + `queue = "yes"`, "Invalid queue", 0},
		{"limit = 5\n  period = \"1s\"\n  queue = true", "needs algorithm = \"leaky_bucket\"", 0},
		{"algorithm = \"token_bucket\"\n  limit = 5\n  period = \"1s\"\n  burst = 20\n  queue = true", "needs algorithm", 0},
		{"action = \"deny\"\n  queue = true", "Invalid queue", 0},
	} {
		p, diags := rulestest.LoadDiags(fmt.Sprintf(base, tt.attrs))
		if !rulestest.WantError(t, tt.attrs, diags, tt.err) {
			continue
		}
		if q := queue.Of(p.Rules[0]); (q != nil) != (tt.maxDelay > 0) || q != nil && q.MaxDelay != tt.maxDelay {
			t.Errorf("%s: queue %+v, want max_delay %v", tt.attrs, q, tt.maxDelay)
		}
	}
}

// A burst of 20 at 5 a second, all at one instant of the injected clock:
// the engine admits 20 with delays 0, 200ms, … 3.8s (arrival order: each
// later one is released 200ms after the one before) and refuses the 21st.
func TestEngineQueueDelays(t *testing.T) {
	k := rulestest.NewRun(t, `rule "q" {
  paths = ["/api/*"]
  key = ["ip"]
  algorithm = "leaky_bucket"
  limit = 5
  period = "1s"
  burst = 20
  queue = true
}`)
	for i := range 20 {
		d := k.Get("/api/x", nil)
		if want := time.Duration(i) * 200 * time.Millisecond; d.Verdict != rules.Forward || d.Delay != want {
			t.Fatalf("request %d: verdict %v delay %v, want forwarded after %v", i+1, d.Verdict, d.Delay, want)
		}
	}
	if d := k.Get("/api/x", nil); d.Verdict != rules.RefuseLimit || d.Delay != 0 {
		t.Fatalf("21st: verdict %v delay %v, want refused, no delay", d.Verdict, d.Delay)
	}
	// 300ms later one unit and a half has drained: the next waits for the
	// 20th's slot (3.8s from the start) plus its own 200ms, i.e. 3.7s from now.
	k.Now = k.Now.Add(300 * time.Millisecond)
	if d := k.Get("/api/x", nil); d.Verdict != rules.Forward || d.Delay != 3700*time.Millisecond {
		t.Fatalf("after 300ms: verdict %v delay %v, want forwarded after 3.7s", d.Verdict, d.Delay)
	}
}

// max_delay refuses at arrival a request whose delay would pass it, and
// gives its unit back: the queue never fills with requests nobody holds.
func TestEngineQueueMaxDelay(t *testing.T) {
	k := rulestest.NewRun(t, `rule "q" {
  paths = ["/api/*"]
  key = ["ip"]
  algorithm = "leaky_bucket"
  limit = 5
  period = "1s"
  burst = 20
  queue = true
  max_delay = "1s"
}`)
	for i := range 6 { // delays 0 … 1s
		if d := k.Get("/api/x", nil); d.Verdict != rules.Forward || d.Delay != time.Duration(i)*200*time.Millisecond {
			t.Fatalf("request %d: verdict %v delay %v", i+1, d.Verdict, d.Delay)
		}
	}
	for i := range 30 { // each would wait 1.2s: refused, and refunded
		d := k.Get("/api/x", nil)
		if d.Verdict != rules.RefuseLimit || d.Delay != 0 || d.RetryAfter != 200*time.Millisecond {
			t.Fatalf("over max_delay %d: verdict %v delay %v retry %v, want refused, retry 200ms", i+1, d.Verdict, d.Delay, d.RetryAfter)
		}
	}
	// Refunded: 200ms later the next waits 1s (six units ahead, one drained),
	// as if the 30 refused had never come.
	k.Now = k.Now.Add(200 * time.Millisecond)
	if d := k.Get("/api/x", nil); d.Verdict != rules.Forward || d.Delay != time.Second {
		t.Fatalf("after 200ms: verdict %v delay %v, want forwarded after 1s", d.Verdict, d.Delay)
	}
}

// Delay's derivation from a Result is exact to the µs bounds it
// documents, for costs and levels that do not divide evenly.
func TestQueueDelayDerivation(t *testing.T) {
	for _, tc := range []struct{ limit, burst, periodUS, cost int64 }{
		{5, 20, 1e6, 1}, {3, 7, 1e6, 2}, {7, 13, 999_983, 3}, {1, 1, 1e6, 1}, {10, 50, 60e6, 4},
	} {
		op := rules.Op{Kind: rules.OpTake, Algorithm: rules.LeakyBucket, Limit: tc.limit, Burst: tc.burst, PeriodUS: tc.periodUS, Cost: tc.cost}
		var st rules.State
		now := int64(1_000_000)
		for step := range 200 {
			now += int64(step*7919) % (tc.periodUS / tc.limit * 2)
			before := st
			r := rules.Check(&st, now, &op)
			rules.Settle(&st, now, &op, !r.Allowed, &r)
			if !r.Allowed {
				continue
			}
			// The exact delay: the level ahead, drained at now.
			ahead := before
			exact := exactAhead(&ahead, now, &op)
			got := queue.Delay(&op, &r).Microseconds()
			if got < exact || got > exact+2 {
				t.Fatalf("%+v step %d: queue.Delay %dµs, exact %dµs", tc, step, got, exact)
			}
		}
	}
}

// exactAhead is the µs the level of st at now takes to drain: a take of
// cost burst would fit then (the bucket empty).
func exactAhead(st *rules.State, now int64, op *rules.Op) int64 {
	full := *op
	full.Cost = op.Burst
	r := rules.Check(st, now, &full)
	return r.RetryAfter.Microseconds()
}
