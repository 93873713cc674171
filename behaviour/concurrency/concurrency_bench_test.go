//go:build !race

package concurrency_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/internal/teststore"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// The cost of concurrency accounting on the decision path (issue 15,
// "Speed"): no allocation, and no store round trip beyond the one a
// request already makes, plus one release once the origin answered.
// (Allocation counts mean nothing under the race detector: !race.)

// takeCount counts a store's Take calls without allocating.
type takeCount = teststore.Counting

// concBenchPolicy is a login route with an ordinary rate limit, alone
// ("rate") or with a concurrency rule on the same route ("concurrency").
const concBenchRate = `
rule "login-per-ip" {
  methods = ["POST"]
  paths   = ["/login"]
  key     = ["ip"]
  limit   = 1000000
  period  = "1s"
}
`

const concBenchConcurrency = concBenchRate + `
rule "login-in-flight" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 10
}
`

type concBench struct {
	e     *rules.Engine
	p     *rules.Policy
	store *takeCount
	s     *rules.Scratch
	req   *rules.Request
	now   time.Time
}

func newConcBench(tb testing.TB, src string) *concBench {
	tb.Helper()
	p := rulestest.Load(tb, src)
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ms.Close() })
	tc := &takeCount{Store: ms}
	e, err := rules.NewEngine(rules.EngineOptions{Store: tc, Secret: []byte("bench secret")})
	if err != nil {
		tb.Fatal(err)
	}
	return &concBench{
		e: e, p: p, store: tc, s: rules.NewScratch(len(p.Rules)), now: rulestest.T0,
		req: &rules.Request{
			Method: []byte("POST"), Path: []byte("/login"), Host: []byte("example.com"),
			Client: netip.MustParseAddr("192.0.2.1"), Fields: rulestest.Fields{},
		},
	}
}

// holdOne sends one more request that stays in flight (never settled),
// as on a busy route: the key's set of leases never empties.
func (k *concBench) holdOne(tb testing.TB) {
	tb.Helper()
	s := rules.NewScratch(len(k.p.Rules))
	if d := k.e.Check(context.Background(), k.now, k.p, k.req, s); d.Verdict != rules.Forward || !s.Holds() {
		tb.Fatalf("the request kept in flight: %+v", d)
	}
}

// one decides a request and, when it holds a lease, settles it as the
// origin's answer would; it returns the store calls of each step.
func (k *concBench) one(tb testing.TB) (check, settle int64) {
	k.now = k.now.Add(time.Microsecond) // the rate limit's interval: never refused
	n0 := k.store.Calls.Load()
	d := k.e.Check(context.Background(), k.now, k.p, k.req, k.s)
	n1 := k.store.Calls.Load()
	if d.Verdict != rules.Forward {
		tb.Fatalf("refused: %+v", d)
	}
	if d.Settle {
		k.s.Forwarding(k.now)
		if _, err := k.e.Settle(context.Background(), k.now, k.s, 200, nil); err != nil {
			tb.Fatal(err)
		}
	}
	return n1 - n0, k.store.Calls.Load() - n1
}

// BenchmarkConcurrencyDecision: "rate" is a login's decision under an
// ordinary rate limit; "concurrency" adds a concurrency rule on the same
// route, its lease taken in the same store call and given back by Settle,
// with another request of the key in flight meanwhile (a busy route);
// "concurrency-idle-key" without: each request finds its key's set of
// leases empty (the memory store drops an empty key and keeps its entry as
// a spare, so the key coming back allocates nothing either). check-takes/op and
// settle-takes/op are the store calls of each step.
func BenchmarkConcurrencyDecision(b *testing.B) {
	for _, bc := range []struct {
		name, src string
		busy      bool
	}{{"rate", concBenchRate, false}, {"concurrency", concBenchConcurrency, true}, {"concurrency-idle-key", concBenchConcurrency, false}} {
		b.Run(bc.name, func(b *testing.B) {
			k := newConcBench(b, bc.src)
			if bc.busy {
				k.holdOne(b)
			}
			k.one(b) // size the Scratch and the store's state
			var check, settle int64
			b.ReportAllocs()
			for b.Loop() {
				c, s := k.one(b)
				check, settle = check+c, settle+s
			}
			b.ReportMetric(float64(check)/float64(b.N), "check-takes/op")
			b.ReportMetric(float64(settle)/float64(b.N), "settle-takes/op")
		})
	}
}

// TestConcurrencyAllocatesNothing: on a busy route (another request of
// the key in flight), a decision with a concurrency rule and its Settle
// allocate nothing, make one store call each, and give the lease back
// (100 in a row are admitted: the limit is 10).
func TestConcurrencyAllocatesNothing(t *testing.T) {
	k := newConcBench(t, concBenchConcurrency)
	k.holdOne(t)
	k.one(t)
	allocs := testing.AllocsPerRun(100, func() {
		if c, s := k.one(t); c != 1 || s != 1 {
			t.Fatalf("store calls: %d to check, %d to settle; want 1 and 1", c, s)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per decision and settle, want 0", allocs)
	}
}
