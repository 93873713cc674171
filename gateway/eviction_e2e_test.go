package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules/memstore"
)

// Issue 9, bypass 3 and the memory store's per-rule key budgets
// (docs/memory-store.md), through the real server on loopback with the
// shipped policies.hcl in front of the demo origin. The clock is fake and
// never moves: every counter stays live, so whatever a victim gets back
// can only come from eviction.

// startShippedNode serves the shipped policy, its store block's max_keys
// replaced by maxKeys and the other replacements applied, on a memory store
// made the way cmd/edge makes it (memstore.Options.MaxKeys from the policy).
func startShippedNode(t *testing.T, maxKeys int, replace ...string) (*node, *memstore.Store) {
	t.Helper()
	replace = append([]string{"max_keys = 100000", fmt.Sprintf("max_keys = %d", maxKeys)}, replace...)
	p := loadPolicy(t, "policies.hcl", replace...)
	st, err := memstore.New(memstore.Options{MaxKeys: p.Store.MaxKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	return startNode(t, p, nodeOptions{clock: clk, store: st}), st
}

// sendOTP posts one OTP send for phone from client and returns the status.
func sendOTP(t *testing.T, n *node, client, phone string) int {
	t.Helper()
	return do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"`+phone+`"}`, "X-Forwarded-For", client).status
}

// floodOrders sends count GET /api/orders, each from an IPv6 /64 of its
// own (2001:db8:0:N::1), as bypass 3's attacker did from one /47: each
// creates new keys on the API rules and the visitor mint budget.
func floodOrders(t *testing.T, n *node, count int) {
	t.Helper()
	for i := range count {
		ip := fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff)
		if st := do(t, "GET", "http://"+n.addr+"/api/orders", "", "X-Forwarded-For", ip).status; st != 200 {
			t.Fatalf("flood request %d from %s: got %d, want 200", i, ip, st)
		}
	}
}

// TestKeyFloodKeepsAVictimsCounter is bypass 3: a phone's OTP sends spent
// (200 200 200 429), a flood of new keys on another route must not give it
// a fresh log. The store's max_keys is 600 so that the flood, three times
// that many requests, is quick.
func TestKeyFloodKeepsAVictimsCounter(t *testing.T) {
	const maxKeys = 600
	n, _ := startShippedNode(t, maxKeys)
	const victim, from = "+12025550100", "198.51.100.7"
	var got []int
	for range 4 {
		got = append(got, sendOTP(t, n, from, victim))
	}
	if fmt.Sprint(got) != "[200 200 200 429]" {
		t.Fatalf("victim's sends: got %v, want [200 200 200 429]", got)
	}
	floodOrders(t, n, 3*maxKeys)
	for i := range 3 {
		if st := sendOTP(t, n, from, victim); st != 429 {
			t.Fatalf("victim's send %d after the flood: got %d, want 429 (its sliding log evicted by another rule's keys)", i+1, st)
		}
	}
	if got := n.hits(t)["/otp/send"]; got != 3 {
		t.Errorf("origin got %d /otp/send, want the 3 before the limit", got)
	}
}
