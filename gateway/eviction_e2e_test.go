package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/nat"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// Issue 9, bypass 3 and the memory store's per-rule key budgets
// (docs/memory-store.md), through the real server on loopback with the
// shipped policies.hcl in front of the demo origin. The clock is fake and
// never moves: every counter stays live, so whatever a victim gets back
// can only come from eviction.

// shippedPolicy is the shipped policy, the store block's max_keys set to
// storeKeys and each named rule's max_keys to its value.
func shippedPolicy(t *testing.T, storeKeys int, ruleKeys map[string]int) *rules.Policy {
	t.Helper()
	path := filepath.Join(repoRoot(t), "policies.hcl")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := replaceOnce(t, string(src), regexp.MustCompile(`(?s)(store "memory" \{\s*max_keys\s*=\s*)\d+`), fmt.Sprint(storeKeys))
	for name, keys := range ruleKeys {
		s = replaceOnce(t, s, regexp.MustCompile(`(?s)(rule "`+regexp.QuoteMeta(name)+`" \{[^}]*?max_keys\s*=\s*)\d+`), fmt.Sprint(keys))
	}
	p, diags := builtin.Load(path, []byte(s))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// startShippedNode serves shippedPolicy(storeKeys, ruleKeys) on a memory
// store made the way cmd/edge makes it (memstore.Options.MaxKeys from the
// policy), with a clock that never moves.
func startShippedNode(t *testing.T, storeKeys int, ruleKeys map[string]int) *node {
	t.Helper()
	p := shippedPolicy(t, storeKeys, ruleKeys)
	st, err := memstore.New(memstore.Options{MaxKeys: nodecfg.Of(p).Store.MaxKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	return startNode(t, p, nodeOptions{clock: clk, store: st})
}

// replaceOnce replaces the number after re's first group, which must match
// exactly once.
func replaceOnce(t *testing.T, s string, re *regexp.Regexp, value string) string {
	t.Helper()
	if n := len(re.FindAllStringIndex(s, -1)); n != 1 {
		t.Fatalf("policies.hcl: %d matches of %s, want 1", n, re)
	}
	return re.ReplaceAllString(s, "${1}"+value)
}

// metric returns the value of the metric name with label rule=rule in
// reg, or -1 when there is none.
func metric(t *testing.T, reg *prometheus.Registry, name, rule string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule" && l.GetValue() == rule {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// sendOTP posts one OTP send for phone from client and returns the status.
func sendOTP(t *testing.T, n *node, client, phone string) int {
	t.Helper()
	return do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"`+phone+`"}`, "X-Forwarded-For", client).status
}

// floodOrders sends count GET /api/orders, each from an IPv6 /64 of its
// own, as bypass 3's attacker did, and in a /48 of its own (2001:db8:N::1),
// which it did not: from one network, the flood would have been refused
// once the network held its share of each budget (network_share), and
// these tests are of what a budget does when it is full. Each creates new
// keys on the API rules and the visitor mint budget.
func floodOrders(t *testing.T, n *node, count int) {
	t.Helper()
	for i := range count {
		ip := fmt.Sprintf("2001:db8:%x::1", i)
		if st := do(t, "GET", "http://"+n.addr+"/api/orders", "", "X-Forwarded-For", ip).status; st != 200 {
			t.Fatalf("flood request %d from %s: got %d, want 200", i, ip, st)
		}
	}
}

// TestKeyFloodKeepsAVictimsCounter is bypass 3: a phone's OTP sends spent
// (200 200 200 429), a flood of new keys on another route must not give it
// a fresh log. The store's max_keys is 600 (150 keys for each of the API
// rules and the visitor mint budget, which share it) so that the flood,
// three times that many requests, is quick; the flooded rules evict their
// own least recently used keys, and count it.
func TestKeyFloodKeepsAVictimsCounter(t *testing.T) {
	const maxKeys, flood = 600, 1800
	n := startShippedNode(t, maxKeys, nil)
	const victim, from = "+12025550100", "198.51.100.7"
	var got []int
	for range 4 {
		got = append(got, sendOTP(t, n, from, victim))
	}
	if fmt.Sprint(got) != "[200 200 200 429]" {
		t.Fatalf("victim's sends: got %v, want [200 200 200 429]", got)
	}
	floodOrders(t, n, flood)
	for i := range 3 {
		if st := sendOTP(t, n, from, victim); st != 429 {
			t.Fatalf("victim's send %d after the flood: got %d, want 429 (its sliding log evicted by another rule's keys)", i+1, st)
		}
	}
	if got := n.hits(t)["/otp/send"]; got != 3 {
		t.Errorf("origin got %d /otp/send, want the 3 before the limit", got)
	}
	share := maxKeys / 4
	for rule, keys := range map[string]int{"api-per-ip": flood, "api-per-ip-shadow": flood, nat.MintBudgetName: flood + 1} { // the victim's IP minted too
		if got, want := metric(t, n.reg, "edge_store_evictions_total", rule), float64(keys-share); got != want {
			t.Errorf("edge_store_evictions_total{rule=%q}: got %v, want %v (the rule's keys beyond its %d)", rule, got, want, share)
		}
		if got := metric(t, n.reg, "edge_store_keys", rule); got != float64(share) {
			t.Errorf("edge_store_keys{rule=%q}: got %v, want %d", rule, got, share)
		}
	}
	for _, rule := range []string{"otp-send-per-phone", "otp-send-per-client", "otp-send-per-range"} {
		if got := metric(t, n.reg, "edge_store_evictions_total", rule); got != 0 {
			t.Errorf("edge_store_evictions_total{rule=%q}: got %v, want 0", rule, got)
		}
		if got := metric(t, n.reg, "edge_store_max_keys", rule); got != 50000 {
			t.Errorf("edge_store_max_keys{rule=%q}: got %v, want the shipped 50000", rule, got)
		}
	}
}

// TestKeyFloodOnASensitiveRuleFailsClosed floods otp-send-per-phone itself
// with new phones, its budget cut to 20 keys: the rule never evicts a live
// log to make room, so once its budget is full of them a new phone gets
// the rule's on_store_error answer (deny: 503), counted, while the victim
// stays refused and the phones it holds keep counting.
func TestKeyFloodOnASensitiveRuleFailsClosed(t *testing.T) {
	const budget, flood = 20, 30
	p := shippedPolicy(t, 100000, map[string]int{"otp-send-per-phone": budget})
	// No share per network: at 5% of 20 keys each network may make one,
	// and two of the flood's 31 networks share a count (their keyed hashes
	// folded into 65,535 slots, docs/memory-store.md) about one run in
	// 150, which would refuse the second 429 for its share, not 503 for
	// the budget. This test is about the budget.
	for _, r := range p.Rules {
		if r.Name == "otp-send-per-phone" {
			r.NetworkKeys = 0
		}
	}
	st, err := memstore.New(memstore.Options{MaxKeys: nodecfg.Of(p).Store.MaxKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := startNode(t, p, nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}, store: st})
	const victim = "+12025550100"
	for i, want := range []int{200, 200, 200, 429} {
		if st := sendOTP(t, n, "198.51.100.7", victim); st != want {
			t.Fatalf("victim's send %d: got %d, want %d", i+1, st, want)
		}
	}
	// New phones, each in a numbering block of its own and from a network
	// (an IPv6 /48) of its own, so that only the per-phone budget is in
	// their way, not its share per network (network_share).
	phone := func(i int) string { return fmt.Sprintf("+1212%03d0123", 200+i) } // exchanges 200…: US numbers

	ip := func(i int) string { return fmt.Sprintf("2001:db8:%x:77::1", 0x7700+i) }
	var statuses []int
	for i := range flood {
		statuses = append(statuses, sendOTP(t, n, ip(i), phone(i)))
	}
	for i, st := range statuses {
		want := 200
		if i >= budget-1 { // the victim holds one key
			want = 503
		}
		if st != want {
			t.Fatalf("new phone %d: got %d, want %d (all: %v)", i, st, want, statuses)
		}
	}
	if st := sendOTP(t, n, "198.51.100.8", victim); st != 429 {
		t.Errorf("victim after the flood: got %d, want 429", st)
	}
	for i, want := range []int{200, 200, 429} { // a phone the budget holds: two more, then refused
		if st := sendOTP(t, n, ip(0), phone(0)); st != want {
			t.Errorf("phone 0's send %d after the flood: got %d, want %d", i+2, st, want)
		}
	}
	refused := float64(flood - (budget - 1))
	if got := metric(t, n.reg, "edge_store_budget_full_total", "otp-send-per-phone"); got != refused {
		t.Errorf("edge_store_budget_full_total: got %v, want %v", got, refused)
	}
	if got := n.decisions("otp-send-per-phone", "store_error_deny"); got != int(refused) {
		t.Errorf("edge_decisions_total{store_error_deny}: got %d, want %v", got, refused)
	}
	if got := metric(t, n.reg, "edge_store_evictions_total", "otp-send-per-phone"); got != 0 {
		t.Errorf("edge_store_evictions_total: got %v, want 0 (a sensitive rule never evicts)", got)
	}
	if got, want := n.hits(t)["/otp/send"], int64(3+budget-1+2); got != want {
		t.Errorf("origin got %d /otp/send, want %d", got, want)
	}
}

// TestKeyBudgetsFollowRuleNamesAcrossAReload: a reload keeps a rule's
// counters and its budget's keys (both follow its name), and a new
// max_keys applies from the rule's next new key.
func TestKeyBudgetsFollowRuleNamesAcrossAReload(t *testing.T) {
	n := startShippedNode(t, 100000, map[string]int{"otp-send-per-phone": 20})
	const victim = "+12025550100"
	for i, want := range []int{200, 200, 200, 429} {
		if st := sendOTP(t, n, "198.51.100.7", victim); st != want {
			t.Fatalf("victim's send %d: got %d, want %d", i+1, st, want)
		}
	}
	phone := func(i int) string { return fmt.Sprintf("+1212%03d0123", 200+i) }
	ip := func(i int) string { return fmt.Sprintf("2001:db8:%x:77::1", 0x7700+i) } // a network each, as above
	for i := range 9 {
		if st := sendOTP(t, n, ip(i), phone(i)); st != 200 {
			t.Fatalf("phone %d: got %d, want 200", i, st)
		}
	}
	// The same rules, otp-send-per-phone's budget cut to 12.
	if err := n.srv.Reload(shippedPolicy(t, 100000, map[string]int{"otp-send-per-phone": 12})); err != nil {
		t.Fatal(err)
	}
	if st := sendOTP(t, n, "198.51.100.8", victim); st != 429 {
		t.Errorf("victim after the reload: got %d, want 429 (its log follows the rule's name)", st)
	}
	if got := metric(t, n.reg, "edge_store_keys", "otp-send-per-phone"); got != 10 {
		t.Errorf("edge_store_keys after the reload: got %v, want 10 (the victim and 9 phones)", got)
	}
	for i, want := range []int{200, 200, 503} { // room for 2 more under the new 12
		if st := sendOTP(t, n, ip(100+i), phone(100+i)); st != want {
			t.Errorf("new phone %d after the reload: got %d, want %d", i, st, want)
		}
	}
	if got := metric(t, n.reg, "edge_store_max_keys", "otp-send-per-phone"); got != 12 {
		t.Errorf("edge_store_max_keys: got %v, want 12", got)
	}
}
