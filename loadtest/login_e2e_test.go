package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// The login policy, relative to this package's directory.
const loginPolicyPath = "../testdata/fixtures/policies/login.hcl"

// loginFastClient shortens login-per-client's period from 1m to 1s, so the
// crowd's default spread (the least the rule needs for 50 logins from one
// address: 30 past its burst of 20, one per 1s/30) is about a second.
var loginFastClient = []string{`period    = "1m"`, `period    = "1s"`}

// loginNode is a real edge on login.hcl, after the replacements (old,
// new pairs), and the demo origin behind it; the policy it serves is
// written to a file of its own for the scenarios' -policy.
type loginNode struct {
	edge, originURL, policy string
	origin                  *demo.Origin
}

func startLoginEdge(t *testing.T, replace ...string) *loginNode {
	t.Helper()
	src, err := os.ReadFile(loginPolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s does not contain %q", loginPolicyPath, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	path := filepath.Join(t.TempDir(), "login.hcl")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &loginNode{policy: path}
	n.edge, n.originURL, n.origin = startEdgeOrigin(t, path)
	return n
}

func (n *loginNode) run(t *testing.T, scenario string, args ...string) (int, string, string) {
	t.Helper()
	return runTool(t, append([]string{"-scenario", scenario, "-target", n.edge, "-origin", n.originURL, "-policy", n.policy, "-timeout", otpTestTimeout}, args...)...)
}

// TestCredentialStuffingAgainstARealEdge: on login.hcl, 300 accounts
// failing from one address get 10 through (login-accounts-per-ip), and
// all 50 users of a NAT crowd log in.
func TestCredentialStuffingAgainstARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	n := startLoginEdge(t, loginFastClient...)
	code, out, stderr := n.run(t, "credential-stuffing", "-accounts", "300")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, out)
	}
	wantInReport(t, out,
		"; 300 accounts, once each, a wrong password\n  attempted        300\n  answers          401 ×10, 429 ×290\n  reached origin   10    bound 10 (login-accounts-per-ip: distinct 10 per 1h0m0s): ok\n",
		"(login-per-client: gcra 30 per 1s, burst 20)\n  answers          200 ×50\n  succeeded        50 of 50 (100.0%): ok\n",
		"credential-stuffing: ok: 10 of 300 failing accounts reached the origin, within the bound (10); 50 of 50 crowd logins succeeded\n",
	)
	if got := n.origin.Hits()[loginPath]; got != 60 {
		t.Errorf("the origin counted %d logins, want 60 (10 failing, 50 crowd)", got)
	}
}

// TestCredentialStuffingDetectsAWeakPolicy: on a node that serves
// login-accounts-per-ip in dry run, login-per-client's burst lets 20
// failing accounts through, over login.hcl's bound of 10, and the run
// exits 1; with the crowd sent at once,
// login-per-client refuses 30 of the 50 users, and the run says so.
func TestCredentialStuffingDetectsAWeakPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	t.Run("distinct rule in dry run", func(t *testing.T) {
		n := startLoginEdge(t, dryRun("login-accounts-per-ip")...)
		n.policy = loginPolicyPath // the bound the node should hold: login.hcl's
		code, out, _ := n.run(t, "credential-stuffing", "-accounts", "300", "-crowd", "0")
		if code != exitMismatch {
			t.Fatalf("exit %d, want %d\n%s", code, exitMismatch, out)
		}
		wantInReport(t, out, "credential-stuffing: FAIL: ",
			"reached the origin, over the bound of 10 (login-accounts-per-ip: distinct 10 per 1h0m0s)")
	})
	t.Run("crowd at once", func(t *testing.T) {
		n := startLoginEdge(t)
		code, out, _ := n.run(t, "credential-stuffing", "-accounts", "30", "-crowd-spread", "1ns")
		if code != exitMismatch {
			t.Fatalf("exit %d, want %d\n%s", code, exitMismatch, out)
		}
		wantInReport(t, out, "  reached origin   10    bound 10 ", "FAILED, ", "crowd logins succeeded (")
	})
}

// TestBruteForceAgainstARealEdge: on login.hcl, 200 addresses × 10 wrong
// guesses on one account get 5 per address through
// (login-failures-account-client), 1000 in all, and every one of the real
// user's 10 logins succeeds.
func TestBruteForceAgainstARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	n := startLoginEdge(t)
	code, out, stderr := n.run(t, "brute-force")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, out)
	}
	wantInReport(t, out,
		"attacker: 200 client addresses (",
		"  attempted        2000\n  answers          401 ×1000, 429 ×1000\n  reached origin   1000  bound 1000 (login-failures-account-client: sliding_window 5 per 15m0s, 200 addresses): ok\n",
		"  per address      at most 5 through (bound ",
		"  account-wide     none: the policy has no rule keyed on the account alone\n",
		"  answers          200 ×10\n  succeeded        10 of 10 (100.0%): ok\n",
		"brute-force: ok: 1000 of 2000 guesses reached the origin, within the bound (1000); 10 of 10 of the real user's logins succeeded\n",
	)
	if got := n.origin.Hits()[loginPath]; got != 1010 {
		t.Errorf("the origin counted %d logins, want 1010", got)
	}
}

// TestBruteForceDetectsAWeakPolicy: on a node without failure counting
// per account and client (the rule in dry run), every guess reaches the
// origin, over login.hcl's bound, and the run exits 1; an account-wide failure rule holds the guesses to its
// limit, and locks the real user out, which the run reports too.
func TestBruteForceDetectsAWeakPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	t.Run("per-address rule in dry run", func(t *testing.T) {
		n := startLoginEdge(t, dryRun("login-failures-account-client")...)
		n.policy = loginPolicyPath
		code, out, _ := n.run(t, "brute-force", "-guessers", "20")
		if code != exitMismatch {
			t.Fatalf("exit %d, want %d\n%s", code, exitMismatch, out)
		}
		wantInReport(t, out, "  answers          401 ×200\n", "EXCEEDED by 100",
			"20 of 20 addresses had more than 5 guesses through (the most: 10), over login-failures-account-client")
	})
	t.Run("account-wide lockout", func(t *testing.T) {
		lockout := `
rule "login-failures-account" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["account"]
  count     = "failures"
  algorithm = "sliding_window"
  limit     = 50
  period    = "15m"
  sensitive = true
}

rule "signup-per-network" {`
		n := startLoginEdge(t, `rule "signup-per-network" {`, lockout)
		code, out, _ := n.run(t, "brute-force", "-guessers", "20")
		if code != exitMismatch {
			t.Fatalf("exit %d, want %d\n%s", code, exitMismatch, out)
		}
		wantInReport(t, out, "  reached origin   50    bound 50 (login-failures-account: sliding_window 50 per 15m0s): ok\n",
			"  account-wide     login-failures-account: sliding_window 50 per 15m0s\n", "FAILED, ", "of the real user's logins succeeded (")
	})
}

// TestSimultaneousGuessesHeldToTheLimit: 50 wrong guesses on one account
// from one client, sent at once, get at most login-failures-account-client's
// 5 through to the origin: each is charged before it is proxied, so none
// slips past the count while another is at the origin. On the memory store
// and on a real Redis.
func TestSimultaneousGuessesHeldToTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	stores := map[string]func(t *testing.T) rules.Store{
		"memory": func(t *testing.T) rules.Store {
			st, err := memstore.New(memstore.Options{MaxKeys: 100_000})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"redis": func(t *testing.T) rules.Store {
			srv := testredis.Start(t)
			st, err := redisstore.New(redisstore.Options{URL: srv.URL(), Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			edge, origin := startLoginNode(t, open(t))
			const n = 50
			var wg sync.WaitGroup
			statuses := make([]int, n)
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					req := fasthttp.AcquireRequest()
					resp := fasthttp.AcquireResponse()
					defer fasthttp.ReleaseRequest(req)
					defer fasthttp.ReleaseResponse(resp)
					req.SetRequestURI(edge + loginPath)
					req.Header.SetMethod(fasthttp.MethodPost)
					req.Header.Set("X-Forwarded-For", "203.0.113.50")
					req.Header.SetContentType("application/json")
					req.SetBodyString(fmt.Sprintf(`{"username":"target@example.com","password":"wrong-%d"}`, i))
					c := &fasthttp.Client{MaxIdemponentCallAttempts: 1}
					if err := c.DoTimeout(req, resp, 10e9); err != nil {
						t.Error(err)
						return
					}
					statuses[i] = resp.StatusCode()
				})
			}
			close(start)
			wg.Wait()
			counts := map[int]int{}
			for _, s := range statuses {
				counts[s]++
			}
			if got := origin.Hits()[loginPath]; got > 5 || counts[401] > 5 {
				t.Errorf("the origin counted %d guesses (answers %v), want at most 5", got, counts)
			}
			if counts[401]+counts[429] != n {
				t.Errorf("answers %v, want only 401 and 429", counts)
			}
			// At least one got through: the test is not passing on an edge
			// that refuses everything.
			if counts[401] == 0 {
				t.Errorf("answers %v: no guess reached the origin", counts)
			}
		})
	}
}

// startLoginNode starts an edge on login.hcl over st in front of the demo
// origin and returns the edge's base URL and the origin.
func startLoginNode(t *testing.T, st rules.Store) (string, *demo.Origin) {
	t.Helper()
	src, err := os.ReadFile(loginPolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	p, diags := builtin.Load(loginPolicyPath, src)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", loginPolicyPath, diags)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); st.Close() })
	oln, ln := listenLoopback(t), listenLoopback(t)
	origin := demo.New()
	wg.Go(func() { _ = origin.Serve(ctx, oln) })
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://" + oln.Addr().String(),
		KeySecret: []byte("login-e2e-key-secret, 32 bytes or more")})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	return "http://" + ln.Addr().String(), origin
}
