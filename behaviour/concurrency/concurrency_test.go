package concurrency_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/concurrency"
	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/golden"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// inflight drives a concurrency policy on the injected clock: each request
// gets a Scratch of its own, as each request in flight through the
// gateway holds one.
type inflight struct {
	t     *testing.T
	e     *rules.Engine
	p     *rules.Policy
	store *rulestest.Recorder
	now   time.Time
}

func newInflight(t *testing.T, src string) *inflight {
	t.Helper()
	tc := &rulestest.Recorder{Store: rulestest.NewStore(t)}
	return &inflight{t: t, e: rulestest.NewEngine(t, tc), p: rulestest.Load(t, src), store: tc, now: rulestest.T0}
}

// send checks a request to path from client with headers h, on a new
// Scratch, and returns the decision and the Scratch.
func (k *inflight) send(path, client string, h map[string]string) (rules.Decision, *rules.Scratch) {
	s := rules.NewScratch(len(k.p.Rules))
	r := rulestest.Req{Method: "POST", Path: path, Client: client, Fields: rulestest.Fields{HeaderValues: h}}.Build()
	return k.e.Check(context.Background(), k.now, k.p, r, s), s
}

// answered settles s as the origin answering 200.
func (k *inflight) answered(s *rules.Scratch) {
	k.t.Helper()
	if _, err := k.e.Settle(context.Background(), k.now, s, 200, nil); err != nil {
		k.t.Fatal(err)
	}
}

func (k *inflight) released(s *rules.Scratch) {
	k.t.Helper()
	if err := k.e.Release(context.Background(), k.now, s); err != nil {
		k.t.Fatal(err)
	}
}

// admit sends a request that must be forwarded holding its lease.
func (k *inflight) admit(what, path, client string, h map[string]string) *rules.Scratch {
	k.t.Helper()
	d, s := k.send(path, client, h)
	if d.Verdict != rules.Forward || !d.Settle || !s.Holds() {
		k.t.Fatalf("%s: verdict %v settle %v holds %v, want forwarded holding a lease", what, d.Verdict, d.Settle, s.Holds())
	}
	return s
}

// refuse sends a request that must be refused by a concurrency rule,
// holding nothing, with Retry-After concurrency.RetryAfter.
func (k *inflight) refuse(what, path, client string, h map[string]string) {
	k.t.Helper()
	d, s := k.send(path, client, h)
	if d.Verdict != rules.RefuseLimit || d.Settle || s.Holds() {
		k.t.Fatalf("%s: verdict %v settle %v holds %v, want refused holding nothing", what, d.Verdict, d.Settle, s.Holds())
	}
	if d.RetryAfter != concurrency.RetryAfter {
		k.t.Fatalf("%s: RetryAfter %v, want %v (not the time until the oldest lease ends)", what, d.RetryAfter, concurrency.RetryAfter)
	}
	if d.Refusing == nil || concurrency.Of(d.Refusing) == nil {
		k.t.Fatalf("%s: refused by %v, want the concurrency rule", what, d.Refusing)
	}
}

const loginInFlight = `rule "login-in-flight" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 3
  sensitive = true
}`

func TestConcurrencyCompile(t *testing.T) {
	base := `%s
rule "r" {
  paths = ["/login"]
  key   = ["ip"]
  %s
}`
	conc := "algorithm = \"concurrency\"\n  limit = 10\n  "
	for _, tt := range []struct {
		edge, attrs, err string
		warn             string
		lease            time.Duration
	}{
		{"", conc, "", "", concurrency.DefaultLease},
		{"", conc + `lease = "45s"`, "", "", 45 * time.Second},
		{`edge { upstream_timeout = "2s" }`, conc + `lease = "3s"`, "", "", 3 * time.Second},
		{"", conc + `lease = "10s"`, "Lease too short", "", 0}, // upstream_timeout's default, 10s
		{`edge { upstream_timeout = "40s" }`, conc, "Lease too short", "", 0},
		{"", conc + `lease = "soon"`, "Invalid lease", "", 0},
		{"", conc + `lease = "0s"`, "Invalid lease", "", 0},
		{"", conc + `period = "1m"`, "period not used", "", 0},
		{"", conc + `burst = 5`, "burst not used", "", 0},
		{"", conc + `cost = 2`, "cost not used", "", 0},
		{"", conc + `max_cost = 2`, "max_cost not used", "", 0},
		{"", conc + `settle_from = "X-Cost"`, "settle_from not used", "", 0},
		{"", conc + `count = "failures"`, "count not used", "", 0},
		{"", conc + `count = "requests"`, "count not used", "", 0},
		{"", conc + `count_distinct = "header:X-User"`, "count_distinct not used", "", 0},
		{"", conc + `reset_on_success = true`, "reset_on_success not used", "", 0},
		{"", conc + `known_visitors = "30d"`, "known_visitors not used", "", 0},
		{"", conc + `queue = true`, `not "concurrency"`, "", 0},
		{"", `algorithm = "concurrency"`, "Missing limit", "", 0},
		{"", "algorithm = \"concurrency\"\n  limit = 0", "Invalid limit", "", 0},
		{"", "algorithm = \"concurrency\"\n  limit = 10001", "Limit out of range", "", 0},
		{"", "algorithm = \"concurrency\"\n  action = \"deny\"", "Invalid algorithm", "", 0},
		{"", "limit = 10\n  period = \"1m\"\n  lease = \"30s\"", "lease not used", "", 0},
		{"", "algorithm = \"concurent\"\n  limit = 10", `concurrency.`, "", 0}, // the suggestion
		{`edge {
  decide_listen   = "127.0.0.1:9902"
  trusted_proxies = ["127.0.0.1/32"]
}`, conc, "Concurrency rule under decide_listen", "", 0},
		{`edge {
  decide_listen   = "127.0.0.1:9902"
  trusted_proxies = ["127.0.0.1/32"]
}`, conc + "dry_run = true", "", "Concurrency rule under decide_listen", concurrency.DefaultLease},
	} {
		p, diags := rulestest.LoadDiags(fmt.Sprintf(base, tt.edge, tt.attrs))
		switch {
		case tt.err == "" && diags.HasErrors():
			t.Errorf("%s: %v", tt.attrs, diags.Error())
		case tt.err != "" && !strings.Contains(golden.Lines(diags), tt.err):
			t.Errorf("%s: got %q, want an error %q", tt.attrs, golden.Lines(diags), tt.err)
		case tt.err == "":
			r := p.Rules[0]
			if concurrency.Of(r) == nil || r.Algorithm != rules.Distinct || r.AlgorithmName() != "concurrency" || r.Limit != 10 || r.Period != tt.lease || concurrency.Lease(r) != tt.lease {
				t.Errorf("%s: rule %+v, want a concurrency rule of 10 with lease %v", tt.attrs, r, tt.lease)
			}
			if tt.warn != "" && !strings.Contains(golden.Lines(diags), tt.warn) {
				t.Errorf("%s: diagnostics %q, want a warning %q", tt.attrs, golden.Lines(diags), tt.warn)
			}
		}
	}
}

// A refused attribute is reported where it is written.
func TestConcurrencyCompileRanges(t *testing.T) {
	_, diags := rulestest.LoadDiags(`rule "r" {
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 10
  period    = "1m"
}`)
	if len(diags) != 1 || diags[0].Subject == nil || diags[0].Subject.Start.Line != 6 {
		t.Fatalf("diagnostics %v, want one at line 6 (period)", diags)
	}
	_, diags = rulestest.LoadDiags(`edge { upstream_timeout = "20s" }
rule "r" {
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 10
  lease     = "15s"
}`)
	if len(diags) != 1 || diags[0].Subject == nil || diags[0].Subject.Start.Line != 7 || !strings.Contains(diags[0].Detail, "15s") || !strings.Contains(diags[0].Detail, "20s") {
		t.Fatalf("diagnostics %v, want one at line 7 (lease) naming 15s and 20s", diags)
	}
}

// Up to limit requests of a key are in flight at once; the next is
// refused with Retry-After 1s until one is answered (Settle) or given back
// (Release); another key has its own slots.
func TestConcurrencyAcquireRelease(t *testing.T) {
	k := newInflight(t, loginInFlight)
	var held []*rules.Scratch
	for i := range 3 {
		n := k.store.N()
		held = append(held, k.admit(fmt.Sprintf("request %d", i+1), "/login", "192.0.2.1", nil))
		if calls := k.store.Since(n); len(calls) != 1 {
			t.Fatalf("request %d made %d store calls, want 1", i+1, len(calls))
		}
	}
	k.refuse("4th in flight", "/login", "192.0.2.1", nil)
	k.admit("another IP", "/login", "192.0.2.2", nil)
	if d, s := k.send("/other", "192.0.2.1", nil); d.Verdict != rules.Forward || s.Holds() || d.Settle {
		t.Fatalf("a route the rule does not match: verdict %v holds %v", d.Verdict, s.Holds())
	}

	// The origin answers the first: its slot is free, in one store call
	// that refunds exactly its lease.
	n := k.store.N()
	k.answered(held[0])
	calls := k.store.Since(n)
	if len(calls) != 1 || len(calls[0]) != 1 || calls[0][0].Kind != rules.OpRefund || calls[0][0].Member != held[0].Ops[0].Member {
		t.Fatalf("Settle's store calls %+v, want one refund of the request's lease", calls)
	}
	if held[0].Holds() {
		t.Fatal("a settled request still holds")
	}
	// Settle and Release after it do nothing: the lease is given back once.
	n = k.store.N()
	k.answered(held[0])
	k.released(held[0])
	if calls := k.store.Since(n); len(calls) != 0 {
		t.Fatalf("a second Settle or Release called the store: %+v", calls)
	}
	held[0] = k.admit("after an answer", "/login", "192.0.2.1", nil)
	k.refuse("full again", "/login", "192.0.2.1", nil)

	// An upstream error or timeout: Release frees the slot.
	k.released(held[1])
	if held[1].Holds() {
		t.Fatal("a released request still holds")
	}
	held[1] = k.admit("after a release", "/login", "192.0.2.1", nil)
	k.refuse("full again", "/login", "192.0.2.1", nil)

	// Leases are unique: no two requests in flight share one.
	seen := map[uint64]bool{}
	for _, s := range held {
		m := s.Ops[0].Member
		if seen[m] {
			t.Fatalf("lease %x given to two requests", m)
		}
		seen[m] = true
	}
}

// A lease nobody gives back (its node died) stops counting at its end,
// and not before.
func TestConcurrencyLeaseExpires(t *testing.T) {
	k := newInflight(t, `edge { upstream_timeout = "2s" }
rule "login-in-flight" {
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 2
  lease     = "5s"
}`)
	k.admit("1", "/login", "192.0.2.1", nil)
	k.now = k.now.Add(time.Second)
	k.admit("2", "/login", "192.0.2.1", nil)
	k.now = rulestest.T0.Add(5*time.Second - time.Microsecond)
	k.refuse("just before the first lease ends", "/login", "192.0.2.1", nil)
	k.now = rulestest.T0.Add(5 * time.Second)
	k.admit("the first lease ended", "/login", "192.0.2.1", nil)
	k.refuse("the third holds the first's slot", "/login", "192.0.2.1", nil)
	k.now = rulestest.T0.Add(6 * time.Second)
	k.admit("the second lease ended", "/login", "192.0.2.1", nil)
}

// A dry-run concurrency rule refuses nothing, but holds and gives back its
// leases exactly as it would enforcing, so its would-have refusals are the
// enforcing rule's.
func TestConcurrencyDryRun(t *testing.T) {
	k := newInflight(t, strings.Replace(loginInFlight, "sensitive = true", "dry_run = true", 1))
	var held []*rules.Scratch
	for i := range 3 {
		held = append(held, k.admit(fmt.Sprint(i+1), "/login", "192.0.2.1", nil))
	}
	d, s := k.send("/login", "192.0.2.1", nil)
	if d.Verdict != rules.Forward || s.Matches[0].Outcome != rules.OutcomeDryRunDeny || s.Holds() || d.Settle {
		t.Fatalf("4th: verdict %v outcome %v holds %v, want forwarded, dry-run deny, holding nothing", d.Verdict, s.Matches[0].Outcome, s.Holds())
	}
	k.answered(held[0])
	k.admit("after an answer", "/login", "192.0.2.1", nil)
	d, s = k.send("/login", "192.0.2.1", nil)
	if s.Matches[0].Outcome != rules.OutcomeDryRunDeny {
		t.Fatalf("full again: outcome %v, want dry-run deny", s.Matches[0].Outcome)
	}
	_ = d
}

// A request another rule refuses takes no lease, whether the store
// refused it (all or nothing) or Check did after the store call (a queue
// rule's max_delay); and a refused request's leases are given back inside
// Check, so that it holds nothing.
func TestConcurrencyRefusedByAnotherRuleHoldsNothing(t *testing.T) {
	k := newInflight(t, `rule "in-flight" {
  paths     = ["/a/*"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 3
}
rule "per-user" {
  paths     = ["/a/*"]
  key       = ["header:X-User"]
  limit     = 1
  period    = "1m"
}
rule "queue" {
  paths     = ["/a/q"]
  key       = ["ip"]
  algorithm = "leaky_bucket"
  limit     = 1
  period    = "1s"
  burst     = 5
  queue     = true
  max_delay = "1s"
}`)
	user := map[string]string{"X-User": "u1"}
	a := k.admit("no user", "/a/x", "192.0.2.1", nil)
	b := k.admit("user's first", "/a/x", "192.0.2.1", user)
	d, s := k.send("/a/x", "192.0.2.1", user)
	if d.Verdict != rules.RefuseLimit || d.Refusing.Name != "per-user" || s.Holds() || d.Settle {
		t.Fatalf("user's second: verdict %v by %v holds %v, want refused by per-user holding nothing", d.Verdict, d.Refusing, s.Holds())
	}
	// Two in flight: the refused request took no slot.
	last := k.admit("third slot", "/a/x", "192.0.2.1", nil)
	k.refuse("fourth", "/a/x", "192.0.2.1", nil)
	for _, s := range []*rules.Scratch{a, b, last} {
		k.answered(s)
	}

	// The queue: the first waits 0, the second 1s and holds its slot
	// while it waits. The third would wait 2s, past max_delay: refused
	// after the store call took its lease, which Check gives back.
	k.answered(k.admit("queue 1", "/a/q", "192.0.2.1", nil))
	k.now = k.now.Add(time.Millisecond)
	k.admit("queue 2", "/a/q", "192.0.2.1", nil)
	n := k.store.N()
	d, s = k.send("/a/q", "192.0.2.1", nil)
	if d.Verdict != rules.RefuseLimit || d.Refusing.Name != "queue" || s.Holds() || d.Settle {
		t.Fatalf("queue 3: verdict %v by %v holds %v, want refused by the queue's max_delay holding nothing", d.Verdict, d.Refusing, s.Holds())
	}
	calls := k.store.Since(n)
	if len(calls) != 2 {
		t.Fatalf("queue 3 made %d store calls, want 2 (the check, then its refunds)", len(calls))
	}
	refunded := false
	for _, op := range calls[1] {
		if op.Kind == rules.OpRefund && op.Member == s.Ops[s.Matches[0].Op].Member {
			refunded = true
		}
	}
	if !refunded {
		t.Fatalf("queue 3's refund call %+v does not give back its lease", calls[1])
	}
	// queue 2 alone is in flight: two more fit, and a fourth does not.
	k.admit("after the queue", "/a/x", "192.0.2.1", nil)
	k.admit("after the queue", "/a/x", "192.0.2.1", nil)
	k.refuse("full", "/a/x", "192.0.2.1", nil)
}

// A concurrency rule keyed on visitor holds every visitor of one IP to
// its ip_ceiling in flight; both leases go back in one call.
func TestConcurrencyCeiling(t *testing.T) {
	k := newInflight(t, `visitor {}
rule "in-flight" {
  paths      = ["/login"]
  key        = ["visitor"]
  algorithm  = "concurrency"
  limit      = 2
  ip_ceiling = 3
}`)
	v := nat.ConfigOf(k.p)
	send := func(id byte) (rules.Decision, *rules.Scratch) {
		s := rules.NewScratch(1)
		s.Begin(k.p)
		v.SetVisitor(s, nat.ID{id}, true)
		r := rulestest.Req{Method: "POST", Path: "/login", Client: "192.0.2.1", Fields: rulestest.Fields{}}.Build()
		return k.e.Check(context.Background(), k.now, k.p, r, s), s
	}
	admit := func(what string, id byte) *rules.Scratch {
		t.Helper()
		d, s := send(id)
		if d.Verdict != rules.Forward || !s.Holds() || s.Matches[0].CeilingOp < 0 {
			t.Fatalf("%s: verdict %v holds %v ceiling op %d, want forwarded holding visitor and ceiling leases", what, d.Verdict, s.Holds(), s.Matches[0].CeilingOp)
		}
		return s
	}
	refuse := func(what string, id byte) {
		t.Helper()
		if d, s := send(id); d.Verdict != rules.RefuseLimit || s.Holds() || d.RetryAfter != concurrency.RetryAfter {
			t.Fatalf("%s: verdict %v holds %v retry %v, want refused holding nothing, Retry-After 1s", what, d.Verdict, s.Holds(), d.RetryAfter)
		}
	}
	a1 := admit("A 1", 'A')
	admit("A 2", 'A')
	refuse("A 3 (its own limit)", 'A')
	admit("B 1", 'B')
	refuse("C 1 (the IP's ceiling)", 'C')
	n := k.store.N()
	k.answered(a1)
	calls := k.store.Since(n)
	if len(calls) != 1 || len(calls[0]) != 2 || calls[0][0].Kind != rules.OpRefund || calls[0][1].Kind != rules.OpRefund || calls[0][0].Member != calls[0][1].Member {
		t.Fatalf("Settle's calls %+v, want one call refunding the visitor's and the ceiling's lease", calls)
	}
	admit("C 1 after A 1 answered", 'C')
	refuse("D 1", 'D')
}

// Explain judges a concurrency rule without taking a lease.
func TestConcurrencyExplainTakesNothing(t *testing.T) {
	k := newInflight(t, loginInFlight)
	for range 5 {
		s := rules.NewScratch(1)
		r := rulestest.Req{Method: "POST", Path: "/login", Client: "192.0.2.1", Fields: rulestest.Fields{}}.Build()
		if d := k.e.Explain(context.Background(), k.now, k.p, r, s); d.Verdict != rules.Forward || s.Holds() {
			t.Fatalf("explain: verdict %v holds %v", d.Verdict, s.Holds())
		}
	}
	for i := range 3 {
		k.admit(fmt.Sprint(i+1), "/login", "192.0.2.1", nil)
	}
	k.refuse("4th", "/login", "192.0.2.1", nil)
}

// lateStore runs every call on its store, then, while late is set, answers
// as a store call that timed out after Redis ran its script does: an
// error (whole), or each op's on_store_error refusal (fallback), as a
// failure-handling store answers. What was taken stays taken.
type lateStore struct {
	rules.Store
	late, fallback bool
}

func (l *lateStore) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	err := l.Store.Take(ctx, now, ops, res)
	if err != nil || !l.late {
		return err
	}
	l.late = false // the refund the engine sends next goes through
	if !l.fallback {
		return context.DeadlineExceeded
	}
	for i := range res {
		res[i] = rules.Result{StoreError: true} // fail closed
	}
	return nil
}

// TestConcurrencyLateStoreAnswerLeavesNoLease: a store call that failed
// (or was answered by on_store_error) after the store took the lease
// gives it back at once, in a call of its own: otherwise every store
// timeout would cost a slot for the whole lease, and a burst of them lock
// a global rule's route out (review finding).
func TestConcurrencyLateStoreAnswerLeavesNoLease(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			ms, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ms.Close() })
			ls := &lateStore{Store: ms, fallback: fallback}
			tc := &rulestest.Recorder{Store: ls}
			k := &inflight{t: t, e: rulestest.NewEngine(t, tc), p: rulestest.Load(t, loginInFlight), store: tc, now: rulestest.T0}
			ls.late = true
			n := tc.N()
			d, s := k.send("/login", "192.0.2.1", nil)
			if d.Verdict != rules.Unavailable || s.Holds() {
				t.Fatalf("verdict %v holds %v, want 503 (fail closed) holding nothing", d.Verdict, s.Holds())
			}
			calls := tc.Since(n)
			if len(calls) != 2 || len(calls[1]) != 1 || calls[1][0].Kind != rules.OpRefund || calls[1][0].Member != calls[0][0].Member {
				t.Fatalf("store calls %+v, want the take, then the refund of its lease", calls)
			}
			if ms.Len() != 0 {
				t.Fatalf("the store keeps %d keys, want none: the late lease was given back", ms.Len())
			}
			// All three slots are free.
			for i := range 3 {
				k.admit(fmt.Sprintf("login %d", i+1), "/login", "192.0.2.1", nil)
			}
			k.refuse("the 4th", "/login", "192.0.2.1", nil)
		})
	}
}

// TestConcurrencyJitterUnderASecondWarns: a concurrency refusal's
// Retry-After is one second, so a retry_after_jitter under 100% can never
// add a whole second: validate says so, rather than let a policy believe
// its refusals are spread.
func TestConcurrencyJitterUnderASecondWarns(t *testing.T) {
	src := func(jitter string) string {
		return "rule \"api-in-flight\" {\n  paths = [\"/api/*\"]\n  key = [\"ip\"]\n  algorithm = \"concurrency\"\n  limit = 5\n  retry_after_jitter = \"" + jitter + "\"\n}\n"
	}
	_, diags := builtin.Load("test.hcl", []byte(src("50%")))
	if diags.HasErrors() || len(diags) != 1 || diags[0].Summary != "retry_after_jitter spreads nothing" || diags[0].Subject.Start.Line != 1 {
		t.Fatalf("50%%: %v, want one warning at the rule, retry_after_jitter spreads nothing", diags)
	}
	if _, diags := builtin.Load("test.hcl", []byte(src("100%"))); len(diags) != 0 {
		t.Fatalf("100%%: %v, want no diagnostic", diags)
	}
}
