package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// The attacks policy, relative to this package's directory: the shipped
// policy with hosts on its login rules.
const attacksPolicyPath = "testdata/attacks-hosts.hcl"

// attacksShortMaxKeys is the CI node's memory store bound: the key flood
// is 1.1 × this, 22,000 requests instead of 110,000. Each rule's share of
// it (about 1,400 keys each, with the shipped policy's 14 budgets) holds
// the keys the other classes make, about 500 at most on one rule: a
// sensitive rule's budget full of live state would answer 503.
const attacksShortMaxKeys = "20000"

// writeAttacksPolicy writes the attacks policy, after the textual
// replacements (old, new pairs), into a temporary directory and returns
// its path: the node serves it and the tool reads its bounds from it.
func writeAttacksPolicy(t *testing.T, replace ...string) string {
	t.Helper()
	src, err := os.ReadFile(attacksPolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s does not contain %q", attacksPolicyPath, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	path := filepath.Join(t.TempDir(), "attacks.hcl")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// shortStore is the CI form's store: a small max_keys.
var shortStore = []string{"max_keys = 100000", "max_keys = " + attacksShortMaxKeys}

// attackLine matches a case's verdict line.
var attackLine = regexp.MustCompile(`(?m)^attack: (\S+) gain=(\d+) bound=(\d+) collateral=(\d+) bound=(\d+) (ok|BREACH)$`)

// runAttacksTool runs the attacks scenario against a node serving
// policy (a file) and returns the exit status, the report and stderr.
func runAttacksTool(t *testing.T, edge, origin, policy string, args ...string) (int, string, string) {
	t.Helper()
	return runTool(t, append([]string{"-scenario", "attacks", "-target", edge, "-origin", origin, "-policy", policy,
		"-phones", otpPhonesPath, "-timeout", otpTestTimeout}, args...)...)
}

// shortBudget is the CI form's key budget of the per-phone send rule:
// key-budget-fill sends 1.1 × it new phones (1,100, not the shipped
// 55,000); the other classes' sends, a few hundred phones, fit in it.
var shortBudget = []string{"rather than any phone's log being forgotten.\n  max_keys = 50000", "rather than any phone's log being forgotten.\n  max_keys = 1000"}

// shortVerifyBudget is the CI form's key budget of the two verify rules
// with count = "attempts" keyed on the phone and the challenge:
// refused-attempts-fill sends as many refused verifies as a network's
// share of it holds keys (100 at the shipped 5% of 2,000, not 2,500 of
// 50,000), beside the per-client rule's 60 allowed; the other classes'
// verifies, a few hundred, fit in it.
var shortVerifyBudget = []string{
	"  sensitive = true\n  max_keys  = 50000\n  # Shed last", "  sensitive = true\n  max_keys  = 2000\n  # Shed last",
	"  sensitive      = true\n  max_keys       = 50000\n}", "  sensitive      = true\n  max_keys       = 2000\n}",
}

// shortShareBan is the CI form's network share of login-accounts-per-ip,
// the shipped policy's one rule with a ban and a key budget: 0.25% of its
// 20,000 keys, 50 a /48, so that network-full-ban fills it within
// login-per-network's 100 logins an hour per /48 (the shipped 5%, 1,000
// keys, is beyond them: the class skips there). On a node of its own:
// the shared node's other classes send more logins than that from one /48
// or /24 (ipv6-rotation's 99).
var shortShareBan = []string{"  ban_by         = [\"visitor\"]\n", "  ban_by         = [\"visitor\"]\n  network_share  = \"0.25%\"\n"}

// attacksBansPolicy is ban-eviction's policy: an ordinary rule with a ban
// on a small key budget, which the shipped policy has not.
const attacksBansPolicy = "testdata/attacks-bans.hcl"

// TestAttacksShortSuite is the CI form of the attacks scenario: a real
// edge node and the demo origin in-process, on the attacks policy (the
// shipped one with hosts on its login rules) with a small memory store,
// in-flight's short upstream_timeout and lease (inflightPolicy) and a
// small per-phone key budget (shortBudget), every attack class, and no
// breach of a gain or a collateral bound. Two classes run on nodes of
// their own: ban-eviction on attacks-bans.hcl, and slowloris on a node in
// a process of its own, since its 10,050 connections and the node's
// 10,000 would not fit in one process's file descriptors.
func TestAttacksShortSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	policy := writeAttacksPolicy(t, slices.Concat(shortStore, inflightPolicy, shortBudget, shortVerifyBudget)...)
	own := []string{"ban-eviction", "slowloris", "network-full-ban"}
	var rest []string
	for _, c := range attackClasses() {
		if !slices.Contains(own, c.name) {
			rest = append(rest, c.name)
		}
	}
	t.Run("classes", func(t *testing.T) {
		edge, origin, _ := startEdgeOrigin(t, policy)
		out := checkAttacksRun(t, edge, origin, policy, rest)
		// The measurement is live: on a fresh node the canonical requests
		// get exactly what the shipped policy's numbers allow, and the
		// bystanders what it promises them.
		reportHas(t, out, []string{
			"attack: ipv6-rotation/within-a-64 gain=5 bound=5 collateral=0 bound=0 ok\n",
			// The known browser's login before the attack took one of the
			// /48's 100; the fresh browser behind the attacker and the one
			// elsewhere in its /48 are held with it (login-per-network),
			// the known one is not.
			"attack: ipv6-rotation/across-a-56 gain=99 bound=99 collateral=2 bound=2 ok\n",
			"attack: ipv6-rotation/signup-across-a-48 gain=10 bound=10 collateral=2 bound=2 ok\n",
			"attack: path-spelling:/login gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: host-confusion/plain gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: account-spelling/login gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: account-spelling/signup gain=3 bound=3 collateral=0 bound=1 ok\n",
			"attack: identity-conflict/login-one-ip gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: identity-conflict/login-many-ips gain=50 bound=50 collateral=0 bound=0 ok\n",
			"attack: identity-conflict/signup-one-inbox gain=3 bound=3 collateral=0 bound=1 ok\n",
			"attack: accent-folding/login gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: collation-folding/login gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: method-override/X-HTTP-Method-Override gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: spoofing/chain-left gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: phone-format gain=3 bound=3 collateral=0 bound=0 ok\n",
			// Each of the 11 visitor budgets (cookieless, 10 IDs) on an account
			// of its own: 5 failures per account on at most 10 accounts
			// (login-accounts-per-ip bans the client at the 11th) is 50, under
			// the visitor budgets' 55, the least bound of one rule alone.
			// The fresh browser's login to an account new to the address's
			// failing set may be refused by login-accounts-per-ip's own
			// count (not its ban); the known one's is not.
			"attack: cookie-cycling/logins gain=50 bound=55 collateral=1 bound=1 ok\n",
			"attack: cookie-cycling/visitor-ids gain=10 bound=10 collateral=0 bound=0 ok\n",
			"attack: minting/nat-address gain=5 bound=5 collateral=0 bound=0 ok\n",
			"attack: minting/visitor-ids gain=10 bound=10 collateral=0 bound=0 ok\n",
			// 10 distinct failing accounts, the 11th refused and banned; the
			// model does not bound distinct counts, so its bound is the 12.
			"attack: ban/failed-logins gain=10 bound=12 collateral=1 bound=1 ok\n",
			// The /24's 100 less the known browser's login before.
			"attack: network-lockout/one-24 gain=99 bound=99 collateral=2 bound=2 ok\n",
			"attack: otp-guessing/codes-sent gain=3 bound=3 collateral=0 bound=0 ok\n",
			// One /64's 60 verifies of otp-verify-per-client, then 100
			// refused (a network's share of otp-verify-per-phone's 2,000):
			// they make no keys, and the neighbour in its /48 and the user
			// elsewhere verify their own phones.
			"attack: refused-attempts-fill/one-64 gain=60 bound=60 collateral=0 bound=0 ok\n",
			// The range's 5 less the phone owner's send before.
			"attack: sms-pumping/one-block gain=4 bound=4 collateral=0 bound=0 ok\n",
			"attack: range-lockout/one-block gain=4 bound=4 collateral=1 bound=1 ok\n",
			"attack: embedded-ipv4/native gain=10 bound=10 collateral=2 bound=2 ok\n",
			// One client's logins at the origin at once: the concurrency
			// limit, whatever it tries, and every slot back.
			"attack: in-flight/parallel gain=10 bound=10 collateral=0 bound=0 ok\n",
			"attack: in-flight/parallel-leaked gain=0 bound=0 collateral=0 bound=0 ok\n",
			"attack: in-flight/spellings gain=10 bound=10 collateral=0 bound=0 ok\n",
			"attack: in-flight/timeouts gain=10 bound=10 collateral=0 bound=0 ok\n",
			"attack: in-flight/timeouts-leaked gain=0 bound=0 collateral=0 bound=0 ok\n",
			"attack: in-flight/hang-ups gain=10 bound=10 collateral=0 bound=0 ok\n",
			"attack: in-flight/hang-ups-leaked gain=0 bound=0 collateral=0 bound=0 ok\n",
			"attack: key-flood gain=3 bound=3 collateral=0 bound=0 ok\n",
		}...)
	})
	// network-full-ban on a node of its own: shortShareBan's share of 50
	// logins a /48 or /24 would refuse other classes' logins (ipv6-rotation's
	// 99 from one /48). One /48's 50 failing logins, one a /64, fill it; the
	// neighbour's login is refused by the share (its bound of 1), its OTP
	// send and verify are served: the share's refusal banned it of nothing.
	t.Run("network-full-ban", func(t *testing.T) {
		policy := writeAttacksPolicy(t, slices.Concat(shortStore, shortShareBan)...)
		edge, origin, _ := startEdgeOrigin(t, policy)
		out := checkAttacksRun(t, edge, origin, policy, []string{"network-full-ban"})
		reportHas(t, out, "attack: network-full-ban/one-48 gain=50 bound=50 collateral=1 bound=1 ok\n")
	})
	t.Run("ban-eviction", func(t *testing.T) {
		edge, origin, _ := startEdgeOrigin(t, attacksBansPolicy)
		out := checkAttacksRun(t, edge, origin, attacksBansPolicy, []string{"ban-eviction"})
		reportHas(t, out, "attack: ban-eviction/flood gain=0 bound=0 collateral=0 bound=0 ok\n")
	})
	t.Run("slowloris", func(t *testing.T) {
		edge, origin := startNodeProcess(t, policy)
		out := checkAttacksRun(t, edge, origin, policy, []string{"slowloris"})
		reportHas(t, out,
			"attack: slowloris/half-sent gain=0 bound=0 collateral=0 bound=0 ok\n",
			"attack: slowloris/library-text gain=0 bound=0 collateral=0 bound=0 ok\n",
			"attack: slowloris/one-network gain=0 bound=0 collateral=0 bound=0 ok\n",
			"attack: slowloris/timeout-answers gain=0 bound=0 collateral=0 bound=0 ok\n")
	})
}

// reportHas fails t for each of want the report out lacks.
func reportHas(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q", w)
		}
	}
}

// checkAttacksRun runs the classes against a node serving policy and
// fails on a breach, a skipped case, a warning or an exit status other
// than 0; it returns the report.
func checkAttacksRun(t *testing.T, edge, origin, policy string, classes []string) string {
	t.Helper()
	code, out, stderr := runAttacksTool(t, edge, origin, policy, "-classes", strings.Join(classes, ","))
	t.Logf("report:\n%s", out)
	if stderr != "" {
		t.Logf("stderr:\n%s", stderr)
	}
	var breaches []string
	for _, m := range attackLine.FindAllStringSubmatch(out, -1) {
		if m[6] == "BREACH" {
			breaches = append(breaches, fmt.Sprintf("%s (gain %s, bound %s; collateral %s, bound %s)", m[1], m[2], m[3], m[4], m[5]))
		}
	}
	if len(breaches) > 0 {
		t.Errorf("%d attack cases breached their bounds:\n  %s", len(breaches), strings.Join(breaches, "\n  "))
	}
	if code != exitOK {
		t.Errorf("exit %d, want %d", code, exitOK)
	}
	if strings.Contains(out, " skipped: ") {
		t.Errorf("cases were skipped: the CI form must run every class")
	}
	if strings.Contains(stderr, "loadtest: warning: ") {
		t.Errorf("warnings: a case the edge could not decide, or a baseline under its bound:\n%s", stderr)
	}
	return out
}

// nodePolicyEnv names the policy TestAttacksNodeHelperProcess serves.
const nodePolicyEnv = "EDGE_ATTACKS_NODE_POLICY"

// TestAttacksNodeHelperProcess is no test of its own: started by
// startNodeProcess with nodePolicyEnv set, it serves a real edge node and
// the demo origin on that policy, prints "node EDGE ORIGIN" and serves
// until its standard input closes.
func TestAttacksNodeHelperProcess(t *testing.T) {
	path := os.Getenv(nodePolicyEnv)
	if path == "" {
		t.Skip("a helper process of TestAttacksShortSuite")
	}
	edge, origin, _ := startEdgeOrigin(t, path)
	fmt.Printf("node %s %s\n", edge, origin)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startNodeProcess starts a real edge node and the demo origin on the
// policy file at path in a process of their own (this test binary, as
// TestAttacksNodeHelperProcess), and returns their URLs; the process ends
// with the test.
func startNodeProcess(t *testing.T, path string) (edgeURL, originURL string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttacksNodeHelperProcess$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), nodePolicyEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the node's process: %v", err)
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "node" {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return f[1], f[2]
		}
	}
	_ = cmd.Process.Kill()
	t.Fatalf("the node's process printed no addresses: %v", sc.Err())
	return "", ""
}

// TestAttacksDetectBreaches: a node whose policy is weaker than the one
// the tool reads (rules in dry_run: they decide, never refuse) lets
// through more than the bounds, and the suite says BREACH for exactly
// the cases those rules hold, exit 1; a class they do not touch stays ok.
func TestAttacksDetectBreaches(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	strict := writeAttacksPolicy(t, shortStore...)
	var weak []string
	weak = append(weak, shortStore...)
	for _, r := range []string{"login-per-visitor", "signup-per-network", "deny-internal"} {
		weak = append(weak, dryRun(r)...)
	}
	edge, origin, _ := startEdgeOrigin(t, writeAttacksPolicy(t, weak...))
	code, out, stderr := runAttacksTool(t, edge, origin, strict, "-classes", "path-spelling,embedded-ipv4,phone-format,sms-pumping")
	if code != exitMismatch {
		t.Fatalf("exit %d, want %d; stderr %q\n%s", code, exitMismatch, stderr, out)
	}
	got := map[string][]string{}
	for _, m := range attackLine.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2:]
	}
	for _, tt := range []struct {
		name              string
		gain, bound, word string
	}{
		{"path-spelling:/login", "8", "5", "BREACH"},       // per-visitor off: the per-/48 100 does not bind
		{"path-spelling:/%6Cogin", "8", "5", "BREACH"},     // every spelling alike
		{"path-spelling:/.git/config", "3", "0", "BREACH"}, // the deny rule off
		{"embedded-ipv4/native", "24", "10", "BREACH"},     // the per-/24 signup rule off
		{"phone-format", "3", "3", "ok"},                   // untouched
		{"sms-pumping/foreign-countries", "0", "0", "ok"},
	} {
		if g := got[tt.name]; g == nil || g[0] != tt.gain || g[1] != tt.bound || g[4] != tt.word {
			t.Errorf("%s: got %q, want gain %s bound %s %s", tt.name, g, tt.gain, tt.bound, tt.word)
		}
	}
	if !strings.Contains(out, "attacks: BREACH in ") || !strings.Contains(stderr, "attack cases breached the policy's bounds") {
		t.Errorf("no summary of the breaches:\n%s\nstderr %q", out, stderr)
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

// TestAttacksDetectCollateral: a node whose per-visitor login rule counts
// the address rather than the visitor (key = ["ip"]: the cookie no longer
// tells a new browser from the attacker behind its address), while the
// tool reads the shipped rule, refuses the fresh browser behind an
// attacker that spent the address's budget, and within-a-64 says BREACH
// on its collateral, its gain within its bound (4 or 5: the known
// browser's login before the attack may take one of the address's 5 on
// that node). The known browser is refused too unless the node exempts
// known callers from the rule; the neighbour in another /64 never is.
func TestAttacksDetectCollateral(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	strict := writeAttacksPolicy(t, shortStore...)
	weak := writeAttacksPolicy(t, append(slices.Clone(shortStore),
		"  key          = [\"visitor\"]\n", "  key          = [\"ip\"]\n",
		"  ip_ceiling   = 100\n", "")...)
	edge, origin, _ := startEdgeOrigin(t, weak)
	code, out, stderr := runAttacksTool(t, edge, origin, strict, "-classes", "ipv6-rotation")
	if code != exitMismatch {
		t.Fatalf("exit %d, want %d; stderr %q\n%s", code, exitMismatch, stderr, out)
	}
	if !regexp.MustCompile(`(?m)^attack: ipv6-rotation/within-a-64 gain=[45] bound=5 collateral=[12] bound=0 BREACH$`).MatchString(out) {
		t.Errorf("within-a-64: want gain 4 or 5 of 5, collateral 1 or 2 of bound 0, BREACH")
	}
	reportHas(t, out,
		"    collateral: fresh: 1 of 2 refused, bound 0; refused beyond its bound: POST /login: 429\n",
		"    collateral: neighbour: 0 of 2 refused, bound 0\n")
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

// forgetfulStore is a memory store that forgets every counter once, at
// its forget-th call: what an LRU evicting live state does to the keys
// it evicts.
type forgetfulStore struct {
	forget int64
	calls  atomic.Int64
	inner  atomic.Pointer[memstore.Store]
}

func (f *forgetfulStore) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	if f.calls.Add(1) == f.forget {
		fresh, err := memstore.New(memstore.Options{})
		if err != nil {
			return err
		}
		f.inner.Swap(fresh).Close()
	}
	return f.inner.Load().Take(ctx, now, ops, res)
}

func (f *forgetfulStore) Close() error { return f.inner.Load().Close() }

// startAttacksNode is startEdgeOrigin over the given store, for the
// policy file at path.
func startAttacksNode(t *testing.T, path string, st rules.Store) (edgeURL, originURL string) {
	t.Helper()
	p, diags := builtin.LoadFile(path)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", path, diags)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); st.Close() })
	oln, ln := listenLoopback(t), listenLoopback(t)
	wg.Go(func() { _ = demo.New().Serve(ctx, oln) })
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://" + oln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	return "http://" + ln.Addr().String(), "http://" + oln.Addr().String()
}

// TestAttacksKeyFloodDetectsForgetting: a node whose store forgets the
// victim's counter during the flood (as the memory store's shared LRU did
// before per-rule budgets: bypass 3) lets the victim's sends through
// again, and key-flood says BREACH.
func TestAttacksKeyFloodDetectsForgetting(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	policy := writeAttacksPolicy(t)
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Call 1 is the upstream check, 2-5 the victim's sends (3 passed, the
	// fourth refused), then 200 flood requests: forget in the middle.
	st := &forgetfulStore{forget: 100}
	st.inner.Store(ms)
	edge, origin := startAttacksNode(t, policy, st)
	code, out, stderr := runAttacksTool(t, edge, origin, policy, "-classes", "key-flood", "-flood", "200")
	if code != exitMismatch {
		t.Fatalf("exit %d, want %d; stderr %q\n%s", code, exitMismatch, stderr, out)
	}
	if !strings.Contains(out, "attack: key-flood gain=6 bound=3 collateral=0 bound=0 BREACH\n") {
		t.Errorf("report:\n%s", out)
	}
	// And the same node without forgetting holds.
	ms2, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	edge, origin = startAttacksNode(t, policy, ms2)
	code, out, stderr = runAttacksTool(t, edge, origin, policy, "-classes", "key-flood", "-flood", "200")
	if code != exitOK || !strings.Contains(out, "attack: key-flood gain=3 bound=3 collateral=0 bound=0 ok\n") {
		t.Errorf("exit %d, stderr %q, report:\n%s", code, stderr, out)
	}
}

// TestAttacksWrongOrigin: an -origin that is not the edge's upstream is a
// run error (exit 2), before any case: what reaches it says nothing.
func TestAttacksWrongOrigin(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	policy := writeAttacksPolicy(t)
	edge, _, _ := startEdgeOrigin(t, policy)
	_, other, _ := startEdgeOrigin(t, policy)
	code, out, stderr := runAttacksTool(t, edge, other, policy)
	if code != exitError || !strings.Contains(stderr, "is it the edge's upstream (-origin)?") {
		t.Errorf("exit %d, stderr %q; want exit %d and the origin mismatch", code, stderr, exitError)
	}
	if strings.Contains(out, "attack: ") {
		t.Errorf("cases ran:\n%s", out)
	}
}

// TestAttacksAccountSpellingDetectsRawKeys: a node whose account rules
// key on the identifier's bytes as sent (json:username, json:email: no
// case folding, no NFKC, no aliases) gives every spelling a budget of its
// own, and account-spelling says BREACH for both cases, against the
// bounds of the policy the tool reads.
func TestAttacksAccountSpellingDetectsRawKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	strict := writeAttacksPolicy(t)
	weak := writeAttacksPolicy(t,
		`key              = ["account", "ip"]`, `key              = ["json:username", "ip"]`,
		"key             = [\"email\"]\n  account_aliases = true", `key             = ["json:email"]`)
	edge, origin, _ := startEdgeOrigin(t, weak)
	code, out, stderr := runAttacksTool(t, edge, origin, strict, "-classes", "account-spelling")
	if code != exitMismatch {
		t.Fatalf("exit %d, want %d; stderr %q\n%s", code, exitMismatch, stderr, out)
	}
	got := map[string][]string{}
	for _, m := range attackLine.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2:]
	}
	for _, tt := range []struct{ name, gain, bound string }{
		// Every one of the 20 spellings is a new key of
		// login-failures-account-client; the normalised account rules
		// (login-failures-account's 50, login-accounts-per-ip's one
		// distinct account) and 10 visitor IDs do not hold 20.
		{"account-spelling/login", "20", "5"},
		// 13 inboxes to signup-per-email; signup-per-network's 10 holds.
		{"account-spelling/signup", "10", "3"},
	} {
		if g := got[tt.name]; g == nil || g[0] != tt.gain || g[1] != tt.bound || g[4] != "BREACH" {
			t.Errorf("%s: got %q, want gain %s bound %s BREACH", tt.name, g, tt.gain, tt.bound)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

// TestAttacksRefusedAttemptsFill plays refused-attempts-fill alone on the
// CI form's policy (shortVerifyBudget): one /64's allowed verifies and as
// many refused ones as its /48's share of otp-verify-per-phone holds keys,
// and a neighbour in the /48 and a user elsewhere verify their phones.
// On a store whose refused attempts made keys (a tester's finding F1 on
// issue 24) the neighbour's verify was refused by its network's share:
// collateral 1, bound 0, BREACH.
func TestAttacksRefusedAttemptsFill(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	policy := writeAttacksPolicy(t, slices.Concat(shortStore, shortVerifyBudget)...)
	edge, origin, _ := startEdgeOrigin(t, policy)
	out := checkAttacksRun(t, edge, origin, policy, []string{"refused-attempts-fill"})
	reportHas(t, out, "attack: refused-attempts-fill/one-64 gain=60 bound=60 collateral=0 bound=0 ok\n",
		"    collateral: neighbour: 0 of 3 refused, bound 0\n")
}

// TestAttacksNetworkFullBan plays network-full-ban alone on the CI form's
// share (shortShareBan): one /48 fills its share of login-accounts-per-ip,
// and a cookieless neighbour in it logs in (refused by the share: 429)
// and then has a code sent to its own phone and verifies it. On the tree
// before a tester's finding F2 on issue 24 was fixed the share's refusal
// banned the neighbour from every sensitive route, and its send got 429:
// collateral 2, bound 1, BREACH.
func TestAttacksNetworkFullBan(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	policy := writeAttacksPolicy(t, slices.Concat(shortStore, shortShareBan)...)
	edge, origin, _ := startEdgeOrigin(t, policy)
	out := checkAttacksRun(t, edge, origin, policy, []string{"network-full-ban"})
	reportHas(t, out, "attack: network-full-ban/one-48 gain=50 bound=50 collateral=1 bound=1 ok\n",
		"    collateral: neighbour: 1 of 3 refused, bound 1 (its network holds its share of login-accounts-per-ip (50 keys))\n")
}
