package shed_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/adaptive"
	"github.com/edge-gateway/edge/behaviour/shed"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/internal/teststore"
	"github.com/edge-gateway/edge/rules"
)

// apiReads is the low-priority rule of the shedding policies: API reads,
// per address, far from its limit.
const apiReads = `
rule "api-reads" {
  paths    = ["/api/*"]
  key      = ["ip"]
  limit    = 1000
  period   = "1m"
  priority = "low"
}
`

// shedPolicy: a node ceiling of 10 with the default shares (low 50%: 5,
// normal 75%: 7, high 90%: 9, critical 100%: 10). /search sets no priority
// (normal); /api/otp matches a low and a critical rule (critical).
const shedPolicy = `
edge {
  load_shedding {
    max_in_flight = 10
    retry_after   = "3s"
  }
}
` + apiReads + `rule "search" {
  paths  = ["/search"]
  key    = ["ip"]
  limit  = 1000
  period = "1m"
}
rule "login" {
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 1000
  period    = "1m"
  sensitive = true
  priority  = "high"
}
rule "otp-verify" {
  paths     = ["/otp/verify", "/api/otp"]
  key       = ["ip"]
  limit     = 1000
  period    = "1m"
  sensitive = true
  priority  = "critical"
}
`

// countingStore counts Take calls.
type countingStore = teststore.Counting

func newCountingEngine(t *testing.T, dry bool) (*rules.Engine, *countingStore) {
	t.Helper()
	cs := &countingStore{Store: rulestest.NewStore(t)}
	e := rulestest.NewEngine(t, cs)
	e.SetDryRun(dry)
	return e, cs
}

// check decides r at rulestest.T0 on s.
func check(e *rules.Engine, p *rules.Policy, r rulestest.Req, s *rules.Scratch) rules.Decision {
	r.Fields = rulestest.Fields{}
	return e.Check(context.Background(), rulestest.T0, p, r.Build(), s)
}

// held is a request admitted and still at the origin.
type held struct {
	s *rules.Scratch
	d rules.Decision
}

// forwardN admits n requests to path and keeps them in flight, failing
// unless each is forwarded holding a slot.
func forwardN(t *testing.T, e *rules.Engine, p *rules.Policy, path string, n int) []held {
	t.Helper()
	var out []held
	for i := range n {
		s := rules.NewScratch(4)
		d := check(e, p, rulestest.Req{Method: "GET", Path: path, Client: "192.0.2.1"}, s)
		if d.Verdict != rules.Forward || !d.Settle || !s.Holds() {
			t.Fatalf("%s #%d: verdict %d settle %v holds %v, want forwarded holding a slot (in flight %d)", path, i+1, d.Verdict, d.Settle, s.Holds(), shed.InFlight(e))
		}
		s.Forwarding(rulestest.T0)
		out = append(out, held{s, d})
	}
	return out
}

// wantShed checks that a request to path is shed with priority prio,
// holding nothing, and that the store was not called for it.
func wantShed(t *testing.T, e *rules.Engine, cs *countingStore, p *rules.Policy, path string, prio shed.Priority) rules.Decision {
	t.Helper()
	s := rules.NewScratch(4)
	before := cs.Calls.Load()
	d := check(e, p, rulestest.Req{Method: "GET", Path: path, Client: "192.0.2.1"}, s)
	if d.Verdict != rules.Shed || shed.RequestPriority(s) != prio || d.Settle || s.Holds() {
		t.Fatalf("%s: verdict %d priority %v settle %v holds %v, want shed at %v holding nothing (in flight %d)", path, d.Verdict, shed.RequestPriority(s), d.Settle, s.Holds(), prio, shed.InFlight(e))
	}
	if calls := cs.Calls.Load() - before; calls != 0 {
		t.Fatalf("%s: a shed request made %d store calls, want 0 (nothing is counted)", path, calls)
	}
	for _, m := range s.Matches {
		if m.Op >= 0 && m.Outcome != rules.OutcomeSkip {
			t.Fatalf("%s: rule %s decided %v on a shed request, want skip (never decided)", path, m.Rule.Name, m.Outcome)
		}
	}
	return d
}

func wantInFlight(t *testing.T, e *rules.Engine, n int64) {
	t.Helper()
	if got := shed.InFlight(e); got != n {
		t.Fatalf("in flight %d, want %d", got, n)
	}
}

// TestShedLowerPrioritiesFirst: with the node filling up, low requests are
// shed from 5 in flight, normal ones from 7, high from 9 and critical only
// at the ceiling of 10; each shed request holds nothing and is counted by
// no rule; settling or releasing one frees exactly one slot.
func TestShedLowerPrioritiesFirst(t *testing.T) {
	p := rulestest.Load(t, shedPolicy)
	e, cs := newCountingEngine(t, false)

	var all []held
	all = append(all, forwardN(t, e, p, "/api/items", 5)...)
	d := wantShed(t, e, cs, p, "/api/items", shed.PriorityLow)
	if d.RetryAfter != 3*time.Second || d.Sensitive {
		t.Errorf("low shed: RetryAfter %v sensitive %v, want 3s (retry_after) on an ordinary route", d.RetryAfter, d.Sensitive)
	}
	all = append(all, forwardN(t, e, p, "/search", 2)...) // normal, unset
	wantShed(t, e, cs, p, "/search", shed.PriorityNormal)
	wantShed(t, e, cs, p, "/api/items", shed.PriorityLow)
	all = append(all, forwardN(t, e, p, "/login", 2)...)
	if d := wantShed(t, e, cs, p, "/login", shed.PriorityHigh); !d.Sensitive {
		t.Error("login shed: not sensitive")
	}
	// /api/otp matches api-reads (low) and otp-verify (critical): critical.
	all = append(all, forwardN(t, e, p, "/api/otp", 1)...)
	wantInFlight(t, e, 10)
	wantShed(t, e, cs, p, "/otp/verify", shed.PriorityCritical)

	// Settle the critical one: one slot back, for critical only.
	last := all[len(all)-1]
	if _, err := e.Settle(context.Background(), rulestest.T0, last.s, 200, nil); err != nil {
		t.Fatal(err)
	}
	if last.s.Holds() {
		t.Error("holds after Settle")
	}
	wantInFlight(t, e, 9)
	wantShed(t, e, cs, p, "/login", shed.PriorityHigh)
	all[len(all)-1] = forwardN(t, e, p, "/otp/verify", 1)[0]

	// Release (an upstream error) gives back as Settle does, and a second
	// Release or Settle gives back nothing more.
	for _, h := range all {
		if err := e.Release(context.Background(), rulestest.T0, h.s); err != nil {
			t.Fatal(err)
		}
		if err := e.Release(context.Background(), rulestest.T0, h.s); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Settle(context.Background(), rulestest.T0, h.s, 200, nil); err != nil {
			t.Fatal(err)
		}
	}
	wantInFlight(t, e, 0)
	all = forwardN(t, e, p, "/api/items", 5)
	wantShed(t, e, cs, p, "/api/items", shed.PriorityLow)

	sheds, dry := shed.Stats(e)
	if sheds[shed.PriorityLow] != 3 || sheds[shed.PriorityNormal] != 1 || sheds[shed.PriorityHigh] != 2 || sheds[shed.PriorityCritical] != 1 {
		t.Errorf("Stats shed %v, want low 3 normal 1 high 2 critical 1", sheds)
	}
	if dry != [shed.NumPriorities]uint64{} {
		t.Errorf("Stats dry run %v, want none", dry)
	}
}

// TestShedCountsNothing: a shed request is decided before the store call,
// so its rule's counter is not charged: with a limit of 2 a minute, two
// shed requests leave both units for the two admitted after them.
func TestShedCountsNothing(t *testing.T) {
	p := rulestest.Load(t, `
edge {
  load_shedding { max_in_flight = 1 }
}
rule "tight" {
  paths  = ["/x"]
  key    = ["ip"]
  limit  = 2
  period = "1m"
}
`)
	e, cs := newCountingEngine(t, false)
	h := forwardN(t, e, p, "/x", 1) // one unit of two
	wantShed(t, e, cs, p, "/x", shed.PriorityNormal)
	wantShed(t, e, cs, p, "/x", shed.PriorityNormal)
	if err := e.Release(context.Background(), rulestest.T0, h[0].s); err != nil {
		t.Fatal(err)
	}
	h = forwardN(t, e, p, "/x", 1) // the second unit
	if err := e.Release(context.Background(), rulestest.T0, h[0].s); err != nil {
		t.Fatal(err)
	}
	// Now the rule refuses (429), and its refused request holds no slot.
	s := rules.NewScratch(4)
	if d := check(e, p, rulestest.Req{Method: "GET", Path: "/x", Client: "192.0.2.1"}, s); d.Verdict != rules.RefuseLimit || s.Holds() || d.Settle {
		t.Fatalf("third: verdict %d holds %v settle %v, want 429 holding nothing", d.Verdict, s.Holds(), d.Settle)
	}
	wantInFlight(t, e, 0)
}

// TestShedDryRun: under node-wide dry-run the ceiling is decided but never
// sheds; a would-be shed is counted in Stats and holds no slot (as a
// shed request would not have been in flight).
func TestShedDryRun(t *testing.T) {
	p := rulestest.Load(t, shedPolicy)
	e, _ := newCountingEngine(t, true)
	forwardN(t, e, p, "/api/items", 5)
	s := rules.NewScratch(4)
	if d := check(e, p, rulestest.Req{Method: "GET", Path: "/api/items", Client: "192.0.2.1"}, s); d.Verdict != rules.Forward || s.Holds() {
		t.Fatalf("dry run: verdict %d holds %v, want forwarded holding no slot", d.Verdict, s.Holds())
	}
	wantInFlight(t, e, 5)
	if sheds, dry := shed.Stats(e); sheds[shed.PriorityLow] != 0 || dry[shed.PriorityLow] != 1 {
		t.Errorf("Stats shed %v dry %v, want one low would-be shed", sheds, dry)
	}
}

// TestShedWithoutCeiling: a policy without max_in_flight or an adaptive
// rule never sheds and holds nothing per request.
func TestShedWithoutCeiling(t *testing.T) {
	p := rulestest.Load(t, strings.Replace(shedPolicy, "max_in_flight = 10", "", 1))
	e, _ := newCountingEngine(t, false)
	for range 50 {
		s := rules.NewScratch(4)
		if d := check(e, p, rulestest.Req{Method: "GET", Path: "/api/items", Client: "192.0.2.1"}, s); d.Verdict != rules.Forward || s.Holds() || d.Settle {
			t.Fatalf("verdict %d holds %v settle %v, want forwarded holding nothing", d.Verdict, s.Holds(), d.Settle)
		}
	}
	wantInFlight(t, e, 0)
}

// TestShedShares: shed_at moves each priority's share; a share's ceiling
// is rounded down but at least 1.
func TestShedShares(t *testing.T) {
	p := rulestest.Load(t, `
edge {
  load_shedding {
    max_in_flight = 4
    shed_at = { low = "10%", normal = "50%", "high" = "100%" }
  }
}
`+apiReads+`rule "login" {
  paths    = ["/login"]
  key      = ["ip"]
  limit    = 1000
  period   = "1m"
  priority = "high"
}
`)
	if got := shed.AdmissionOf(p).Share; got[shed.PriorityLow] != 100 || got[shed.PriorityNormal] != 500 || got[shed.PriorityHigh] != 1000 || got[shed.PriorityCritical] != 1000 {
		t.Fatalf("shares %v", got)
	}
	e, cs := newCountingEngine(t, false)
	forwardN(t, e, p, "/api/items", 1) // 4 × 10% = 0.4: at least 1
	wantShed(t, e, cs, p, "/api/items", shed.PriorityLow)
	forwardN(t, e, p, "/other", 1) // normal: 2
	wantShed(t, e, cs, p, "/other", shed.PriorityNormal)
	forwardN(t, e, p, "/login", 2) // high: all 4
	wantShed(t, e, cs, p, "/login", shed.PriorityHigh)
}

// TestShedCheckAllocs: admission and its release add no allocation to
// the decision path.
func TestShedCheckAllocs(t *testing.T) {
	for name, src := range map[string]string{"max_in_flight": shedPolicy, "adaptive": adaptiveShedPolicy} {
		p := rulestest.Load(t, src)
		e := rulestest.NewEngine(t, nil)
		s := rules.NewScratch(8)
		r := rulestest.Req{Method: "POST", Path: "/login", Client: "192.0.2.1", Fields: rulestest.Fields{}}.Build()
		ctx := context.Background()
		e.Check(ctx, rulestest.T0, p, r, s) // the adaptive limiter is made on first use
		_, _ = e.Settle(ctx, rulestest.T0, s, 200, nil)
		allocs := testing.AllocsPerRun(200, func() {
			d := e.Check(ctx, rulestest.T0, p, r, s)
			if d.Verdict != rules.Forward || !s.Holds() {
				t.Fatalf("%s: verdict %d holds %v", name, d.Verdict, s.Holds())
			}
			s.Forwarding(rulestest.T0)
			if _, err := e.Settle(ctx, rulestest.T0, s, 200, nil); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: Check + Settle with load shedding: %v allocs, want 0", name, allocs)
		}
		wantInFlight(t, e, 0)
	}
}

// BenchmarkCheckShed is Check and Settle of an admitted login, side by
// side with the same policy without its load_shedding block: what the node
// in-flight ceiling adds (its slot taken in Check, given back in Settle).
// The clock moves 100ms a request, past the rule's interval, so every
// request is admitted and forwarded.
func BenchmarkCheckShed(b *testing.B) {
	without := strings.Replace(shedPolicy, "max_in_flight = 10", "", 1)
	without = strings.Replace(without, "load_shedding {", "", 1)
	without = strings.Replace(without, `retry_after   = "3s"
  }`, "", 1)
	for _, bc := range []struct{ name, src string }{{"no-shedding", without}, {"max_in_flight", shedPolicy}} {
		b.Run(bc.name, func(b *testing.B) {
			p := rulestest.Load(b, bc.src)
			if sh := shed.AdmissionOf(p); (sh.MaxInFlight > 0) != (bc.name == "max_in_flight") {
				b.Fatalf("%s: load_shedding %+v", bc.name, sh)
			}
			e := rulestest.NewEngine(b, nil)
			s := rules.NewScratch(8)
			r := rulestest.Req{Method: "POST", Path: "/login", Client: "192.0.2.1", Fields: rulestest.Fields{}}.Build()
			ctx := context.Background()
			now := rulestest.T0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(100 * time.Millisecond)
				if d := e.Check(ctx, now, p, r, s); d.Verdict != rules.Forward {
					b.Fatalf("verdict %d, want forward", d.Verdict)
				}
				s.Forwarding(now)
				_, _ = e.Settle(ctx, now, s, 200, nil)
			}
		})
	}
}

// adaptiveShedPolicy: one adaptive rule over every path, its limit held at
// 10 (min = max), and priorities by route; a node ceiling of 20 that the
// adaptive limit reaches first.
const adaptiveShedPolicy = `
edge {
  load_shedding {
    max_in_flight = 20
  }
}
rule "origin-adaptive" {
  paths     = ["/*"]
  algorithm = "concurrency"
  adaptive {
    method  = "aimd"
    min     = 10
    max     = 10
    initial = 10
  }
}
` + apiReads + `rule "login" {
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 1000
  period    = "1m"
  sensitive = true
  priority  = "high"
}
rule "otp-verify" {
  paths     = ["/otp/verify"]
  key       = ["ip"]
  limit     = 1000
  period    = "1m"
  sensitive = true
  priority  = "critical"
}
`

// TestShedAtTheAdaptiveLimitByPriority: a matching adaptive rule's limit
// is shared as the node's ceiling is: low requests are shed from 5 of its
// 10 in flight, normal from 7, high from 9, critical at 10; the adaptive
// rule is the refusing rule and records deny; a request the adaptive rule
// sheds gives back the node slot it took.
func TestShedAtTheAdaptiveLimitByPriority(t *testing.T) {
	p := rulestest.Load(t, adaptiveShedPolicy)
	e, cs := newCountingEngine(t, false)
	var all []held
	all = append(all, forwardN(t, e, p, "/api/items", 5)...)
	d := wantShed(t, e, cs, p, "/api/items", shed.PriorityLow)
	if d.Refusing == nil || d.Refusing.Name != "origin-adaptive" || d.RetryAfter != shed.DefaultRetryAfter {
		t.Errorf("shed by %v, RetryAfter %v; want origin-adaptive, the default 1s", d.Refusing, d.RetryAfter)
	}
	wantInFlight(t, e, 5) // the node slot the shed request took is back
	all = append(all, forwardN(t, e, p, "/search", 2)...)
	wantShed(t, e, cs, p, "/search", shed.PriorityNormal)
	all = append(all, forwardN(t, e, p, "/login", 2)...)
	wantShed(t, e, cs, p, "/login", shed.PriorityHigh)
	all = append(all, forwardN(t, e, p, "/otp/verify", 1)...)
	s := rules.NewScratch(4)
	if d := check(e, p, rulestest.Req{Method: "POST", Path: "/otp/verify", Client: "192.0.2.1"}, s); d.Verdict != rules.Shed {
		t.Fatalf("11th, critical: verdict %d, want shed at the adaptive limit", d.Verdict)
	}
	for _, m := range s.Matches {
		if m.Rule.Name == "origin-adaptive" && m.Outcome != rules.OutcomeDeny {
			t.Errorf("the adaptive rule's outcome %v on the request it shed, want deny", m.Outcome)
		}
	}
	if l := adaptive.LimiterOf(e, p.Rules[0]); l.InFlight() != 10 || l.Limit() != 10 {
		t.Errorf("limiter: %d in flight, limit %d; want 10 and 10", l.InFlight(), l.Limit())
	}
	wantInFlight(t, e, 10)
	for _, h := range all {
		h.s.Forwarding(rulestest.T0)
		if _, err := e.Settle(context.Background(), rulestest.T0.Add(10*time.Millisecond), h.s, 200, nil); err != nil {
			t.Fatal(err)
		}
	}
	if l := adaptive.LimiterOf(e, p.Rules[0]); l.InFlight() != 0 {
		t.Errorf("limiter: %d in flight after every Settle, want 0", l.InFlight())
	}
	wantInFlight(t, e, 0)
	forwardN(t, e, p, "/api/items", 5)
	wantShed(t, e, cs, p, "/api/items", shed.PriorityLow)
}

// TestShedAdaptiveDryRun: a dry-run adaptive rule never sheds: its
// would-be shed is dry_run_deny and counted, and takes no slot.
func TestShedAdaptiveDryRun(t *testing.T) {
	p := rulestest.Load(t, strings.Replace(adaptiveShedPolicy, `algorithm = "concurrency"`, `algorithm = "concurrency"
  dry_run   = true`, 1))
	e, _ := newCountingEngine(t, false)
	forwardN(t, e, p, "/api/items", 5)
	s := rules.NewScratch(4)
	d := check(e, p, rulestest.Req{Method: "GET", Path: "/api/items", Client: "192.0.2.1"}, s)
	if d.Verdict != rules.Forward {
		t.Fatalf("verdict %d, want forwarded (the adaptive rule is in dry-run)", d.Verdict)
	}
	for _, m := range s.Matches {
		if m.Rule.Name == "origin-adaptive" && m.Outcome != rules.OutcomeDryRunDeny {
			t.Errorf("the dry-run adaptive rule's outcome %v, want dry_run_deny", m.Outcome)
		}
	}
	if l := adaptive.LimiterOf(e, p.Rules[0]); l.InFlight() != 5 {
		t.Errorf("limiter: %d in flight, want 5 (a would-be shed takes no slot)", l.InFlight())
	}
	if _, dry := shed.Stats(e); dry[shed.PriorityLow] != 1 {
		t.Errorf("Stats dry run %v, want one low", dry)
	}
}

// TestShedAdaptiveWithoutTheBlock: without load_shedding { } every
// priority has the whole adaptive limit: ten low requests go through and
// the eleventh is shed.
func TestShedAdaptiveWithoutTheBlock(t *testing.T) {
	src := strings.Replace(adaptiveShedPolicy, "edge {\n  load_shedding {\n    max_in_flight = 20\n  }\n}\n", "", 1)
	p, diags := rulestest.LoadDiags(src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if len(diags) == 0 {
		t.Error("priority without load_shedding: no warning")
	}
	e, cs := newCountingEngine(t, false)
	forwardN(t, e, p, "/api/items", 10)
	wantShed(t, e, cs, p, "/api/items", shed.PriorityLow)
	wantInFlight(t, e, 0) // no node ceiling: nothing counted there
}

// TestShedCountSurvivesAReload: the node's count is the Engine's, not the
// policy's: requests admitted under one policy still count under the next,
// and give their slots back there.
func TestShedCountSurvivesAReload(t *testing.T) {
	p1 := rulestest.Load(t, shedPolicy)
	p2 := rulestest.Load(t, strings.Replace(shedPolicy, "max_in_flight = 10", "max_in_flight = 4", 1))
	e, cs := newCountingEngine(t, false)
	h := forwardN(t, e, p1, "/search", 3)                  // normal under p1: 7
	wantShed(t, e, cs, p2, "/search", shed.PriorityNormal) // normal under p2: 3, all taken
	forwardN(t, e, p2, "/otp/verify", 1)                   // critical under p2: 4
	wantShed(t, e, cs, p2, "/otp/verify", shed.PriorityCritical)
	if _, err := e.Settle(context.Background(), rulestest.T0, h[0].s, 200, nil); err != nil {
		t.Fatal(err)
	}
	wantInFlight(t, e, 3)
	forwardN(t, e, p2, "/otp/verify", 1)
	wantInFlight(t, e, 4)
}
