// Package behaviour_test proves the Stage seam from outside rules/ and
// gateway/ (docs/architecture.md, "The decision pipeline"): a feature
// defined only in this file adds a rule behaviour with a Gate and a Judge
// phase, and the real server, on loopback, applies it. Neither rules/ nor
// gateway/ knows it.
package behaviour_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/internal/teststore"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// cooldown is the test behaviour: cooldown = "30s" on a rule refuses, for
// 30 seconds after the rule refused a key, every request of that key
// before anything is counted, whatever the rule's counter says by then.
// Its Judge writes the cooldown's marker when the rule refuses (in the
// after call), its Gate checks the marker (in the precheck). Its
// per-request state, the index of its check, lives in a memo slot.
type cooldown struct {
	us    int64
	ns    [8]byte // the markers' namespace: the rule's, apart
	slot  int
	rule  *rules.Rule
	gates atomic.Int64 // how often Gate ran
}

func (*cooldown) Behaviour() string { return "cooldown" }

func (c *cooldown) marker(kind rules.OpKind, key rules.Key) rules.Op {
	copy(key[0:8], c.ns[:])
	return rules.Op{Kind: kind, Algorithm: rules.SlidingLog, Key: key, Limit: 1, PeriodUS: c.us, Cost: 1,
		Enforce: true, OnError: rules.FailOpen, Sensitive: true, MaxKeys: int32(c.rule.MaxKeys), Marker: true}
}

func (c *cooldown) Gate(_ *rules.Request, s *rules.Scratch, m *rules.Match) {
	c.gates.Add(1)
	s.Memo(c.slot).Op = s.PreOp(c.marker(rules.OpPeek, s.Ops[m.Op].Key))
}

func (c *cooldown) Admit(s *rules.Scratch, m *rules.Match) (bool, time.Duration) {
	i := s.Memo(c.slot).Op
	if i < 0 {
		return false, 0
	}
	res := s.PreResult(i)
	return m.Enforce && !res.Allowed && !res.StoreError, res.RetryAfter
}

func (c *cooldown) Judge(s *rules.Scratch, m *rules.Match, _ rules.Result) rules.Judgement {
	if m.Outcome == rules.OutcomeDeny {
		s.AfterOp(c.marker(rules.OpAdd, s.Ops[m.Op].Key))
	}
	return rules.Judgement{}
}

// feature is the cooldown feature; stages collects the compiled stages.
type feature struct {
	mu     sync.Mutex
	stages []*cooldown
}

func (f *feature) feature() rules.Feature {
	return rules.Feature{Name: "cooldown", RuleAttrs: []rules.RuleAttrType{{Name: "cooldown", Compile: func(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) {
		var s string
		if !c.Append(gohcl.DecodeExpression(a.Expr, nil, &s)) {
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			c.Errorf(a.Expr.Range(), "Invalid cooldown", "cooldown must be a positive duration, such as \"30s\"")
			return
		}
		st := &cooldown{us: d.Microseconds(), slot: c.Slot("cooldown." + r.Name), rule: r}
		sum := sha256.Sum256([]byte("cooldown " + r.Name))
		copy(st.ns[:], sum[:8])
		r.AddStage(st)
		f.mu.Lock()
		f.stages = append(f.stages, st)
		f.mu.Unlock()
	}}}}
}

const cooldownPolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32"]
}
rule "api-per-ip" {
  paths    = ["/api/*"]
  key      = ["ip"]
  limit    = 3
  period   = "10s"
  cooldown = "1m"
}
`

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestABehaviourFromOutsideRules: the cooldown behaviour, compiled from a
// rule attribute no part of rules/ knows, refuses a client through the
// real server for its cooldown after the rule refused it, long after the
// rule's own counter has recovered, and never refuses another client. Its
// checks ride in the precheck and its marker in the after call: a request
// makes at most three store calls.
func TestABehaviourFromOutsideRules(t *testing.T) {
	f := &feature{}
	p, diags := rules.Load("cooldown.hcl", []byte(cooldownPolicy), append(builtin.Features(), f.feature())...)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if _, diags := builtin.Load("cooldown.hcl", []byte(cooldownPolicy)); !diags.HasErrors() || !strings.Contains(diags.Error(), `"cooldown"`) {
		t.Fatalf("without the feature the attribute should be refused, got %v", diags)
	}
	if len(f.stages) != 1 || len(p.Rules[0].Stages()) != 1 {
		t.Fatalf("compiled %d cooldown stages, rule has %d stages; want 1 and 1", len(f.stages), len(p.Rules[0].Stages()))
	}
	clk := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000, Clock: clk, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	store := &teststore.Counting{Store: ms}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(origin.Close)
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: store, Clock: clk, Upstream: origin.URL})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(ip string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/api/items", nil)
		req.Header.Set("X-Forwarded-For", ip)
		before := store.Calls.Load()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := store.Calls.Load() - before; n > 3 {
			t.Errorf("a request made %d store calls, want at most 3", n)
		}
		return resp.StatusCode
	}
	const attacker, other = "198.51.100.7", "203.0.113.9"
	for i := range 3 {
		if got := get(attacker); got != http.StatusOK {
			t.Fatalf("request %d: %d, want 200", i+1, got)
		}
	}
	if got := get(attacker); got != http.StatusTooManyRequests {
		t.Fatalf("the 4th request: %d, want 429 from the rule's counter (the cooldown starts)", got)
	}
	clk.Advance(30 * time.Second) // the counter is long full again
	if got := get(attacker); got != http.StatusTooManyRequests {
		t.Errorf("30s into the cooldown: %d, want 429 from the cooldown's gate", got)
	}
	if got := get(other); got != http.StatusOK {
		t.Errorf("another client during the cooldown: %d, want 200", got)
	}
	clk.Advance(31 * time.Second)
	if got := get(attacker); got != http.StatusOK {
		t.Errorf("after the cooldown: %d, want 200", got)
	}
	if g := f.stages[0].gates.Load(); g < 5 {
		t.Errorf("the cooldown's Gate ran %d times, want one per counted request (7)", g)
	}
}
