package gateway

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/rules"
)

// Issue 9, item 6: a request the policy refuses whatever the counters say
// (an enforcing action = "deny", a rejected identity) gets that refusal
// when the store fails, through the real server on loopback with the
// shipped policies.hcl and the demo origin: never a forward, never a 503.

// erroringStore fails every call, like a Redis that cannot be reached.
type erroringStore struct{}

var errUnreachable = errors.New("store unreachable: test")

func (erroringStore) Take(context.Context, time.Time, []rules.Op, []rules.Result) error {
	return errUnreachable
}
func (erroringStore) Close() error { return nil }

// startNodeOn is startNode with the given store in place of a memory store.
func startNodeOn(t *testing.T, p *rules.Policy, st rules.Store) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	n := &node{origin: demo.New(), reg: prometheus.NewRegistry()}
	oln := listen(t)
	n.oaddr = oln.Addr().String()
	wg.Add(1)
	go func() { defer wg.Done(); _ = n.origin.Serve(ctx, oln) }()
	var err error
	n.srv, err = New(Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://" + n.oaddr, Registry: n.reg})
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	n.addr = ln.Addr().String()
	wg.Add(1)
	go func() { defer wg.Done(); _ = n.srv.Serve(ctx, ln) }()
	return n
}

func TestStoreFailureKeepsCertainRefusals(t *testing.T) {
	// The shipped policy, plus a deny on part of /api/*, where the
	// ordinary (fail-open) api rules count too.
	p := loadPolicy(t, "policies.hcl", `rule "deny-internal" {`, `rule "deny-api-admin" {
  paths  = ["/api/admin/*"]
  action = "deny"
}

rule "deny-internal" {`)
	dead, err := failclosed.New(erroringStore{}, failclosed.Options{NoBackgroundProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		// Refused whatever the counters say.
		{"deny on a fail-open route", "GET", "/api/admin/users", "", 403},
		{"sensitive deny: a country the policy forbids", "POST", "/otp/send", `{"phone":"+7 916 123-45-67"}`, 429},
		{"missing sensitive identity", "POST", "/otp/send", `{}`, 400},
		{"invalid identity", "POST", "/otp/send", `{"phone":"call me maybe"}`, 400},
		// Decided by the counters: each rule's on_store_error.
		{"fail-open route", "GET", "/api/orders", "", 200},
		{"fail-closed route", "POST", "/otp/send", `{"phone":"+1 202 555 0100"}`, 503},
	}
	for _, store := range []struct {
		name  string
		store rules.Store
	}{{"store error", erroringStore{}}, {"failclosed over a dead store", dead}} {
		t.Run(store.name, func(t *testing.T) {
			n := startNodeOn(t, p, store.store)
			for _, tt := range tests {
				r := do(t, tt.method, "http://"+n.addr+tt.path, tt.body)
				if r.status != tt.want {
					t.Errorf("%s: %s %s: got %d, want %d", tt.name, tt.method, tt.path, r.status, tt.want)
				}
				if tt.want == 429 && r.body != "Too Many Requests\n" {
					t.Errorf("%s: got body %q, want the bare 429's", tt.name, r.body)
				}
			}
			hits := n.hits(t)
			if got := hits["/api/admin/users"]; got != 0 {
				t.Errorf("origin got %d requests to a denied path, want 0", got)
			}
			if got := hits["/otp/send"]; got != 0 {
				t.Errorf("origin got %d /otp/send, want 0 (every one is refused)", got)
			}
		})
	}
}
