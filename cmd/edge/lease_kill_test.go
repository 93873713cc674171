package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/internal/testredis"
)

// A concurrency rule's leases on Redis outlive a node that dies holding
// them, and no longer than their lease (docs/policy.md, "Concurrency
// limits"): two `edge serve` processes share one redis-server, node A fills
// the global limit with requests the demo origin holds, A is killed with
// SIGKILL (it never refunds), and node B is refused while A's leases live
// and admitted once they expire.

const (
	// killLimit and killLease are the rule's limit and lease; the lease is
	// longer than killUpstreamTimeout, as compile demands, and the upstream
	// timeout is long enough that A is killed well before it would time
	// its held requests out (and refund their leases) even on a slow
	// machine.
	killLimit           = 10
	killLease           = 6 * time.Second
	killUpstreamTimeout = "5s"
)

// leaseKillPolicy is the policy both nodes run: one global concurrency rule
// on POST /login, on the Redis at url, in front of the origin at upstream.
func leaseKillPolicy(listen, admin, upstream, url string) string {
	return fmt.Sprintf(`edge {
  listen           = %q
  admin_listen     = %q
  upstream         = "http://%s"
  upstream_timeout = %q
  key_secret_env   = "EDGE_LEASE_KILL_SECRET"
}

store "redis" {
  url     = %q
  timeout = "1s"
}

rule "login-in-flight" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["global"]
  algorithm = "concurrency"
  limit     = %d
  lease     = %q
  sensitive = true
}
`, listen, admin, upstream, killUpstreamTimeout, url, killLimit, killLease.String())
}

// leaseNode is one `edge serve` process of the test.
type leaseNode struct {
	*edgeProcess
	listen string
}

// startLeaseNode writes the policy and starts a node on it, and waits
// until it is ready with its store (/readyz?strict=1).
func startLeaseNode(t *testing.T, origin, url string) *leaseNode {
	t.Helper()
	return startReadyNode(t, func(listen, admin string) string { return leaseKillPolicy(listen, admin, origin, url) })
}

// startReadyNode starts `edge serve` on the policy policy(listen, admin)
// makes for its listen and admin_listen addresses, and waits until it is
// ready with its store (/readyz?strict=1).
func startReadyNode(t *testing.T, policy func(listen, admin string) string) *leaseNode {
	t.Helper()
	listen, admin := freeAddr(t), freeAddr(t)
	path := filepath.Join(t.TempDir(), "policies.hcl")
	if err := os.WriteFile(path, []byte(policy(listen, admin)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startEdge(t, "-config", path)
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := http.Get("http://" + admin + "/readyz?strict=1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return &leaseNode{edgeProcess: p, listen: listen}
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("edge serve exited: %v\n%s", p.err, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node on %s was not ready within %v\n%s", listen, hangGuard, p.logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling for readiness, not for time
	}
}

// startDemoOrigin serves the demo origin on a loopback port until the
// test ends (its shutdown releases what it still holds) and returns it
// and its HOST:PORT.
func startDemoOrigin(t *testing.T) (*demo.Origin, string) {
	t.Helper()
	origin := demo.New()
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- origin.Serve(octx, oln) }()
	t.Cleanup(func() { ocancel(); <-served })
	return origin, oln.Addr().String()
}

// loginResult is one login's outcome: its status (0 on a transport
// error, such as a node killed under it) and when the answer arrived.
type loginResult struct {
	status int
	err    error
	at     time.Time
}

// postLogin sends one good POST /login to addr in a goroutine; its own
// connection, so that a held request holds nothing else.
func postLogin(addr string, timeout time.Duration) <-chan loginResult {
	out := make(chan loginResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/login",
			strings.NewReader("username=kill-test&password=letmein-demo"))
		if err != nil {
			out <- loginResult{err: err, at: time.Now()}
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		if err != nil {
			out <- loginResult{err: err, at: time.Now()}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out <- loginResult{status: resp.StatusCode, at: time.Now()}
	}()
	return out
}

// awaitLogin waits for one login's result, bounded by the hang guard.
func awaitLogin(t *testing.T, ch <-chan loginResult, what string) loginResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hangGuard):
		t.Fatalf("%s: no answer within %v", what, hangGuard)
		return loginResult{}
	}
}

func TestConcurrencyLeasesOutliveAKilledNode(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lease (6s)")
	}
	redis := testredis.Start(t) // skips without redis-server, fails under EDGE_REQUIRE_STACKS=1
	// Both nodes key alike, as a fleet must (startEdge clears
	// EDGE_KEY_SECRET, so the policy names its own variable).
	t.Setenv("EDGE_LEASE_KILL_SECRET", strings.Repeat("k", minRedisKeySecret))

	origin, oaddr := startDemoOrigin(t)

	a := startLeaseNode(t, oaddr, redis.URL())
	b := startLeaseNode(t, oaddr, redis.URL())
	origin.Hold("/login")

	// T0 is taken before A's first request is sent: every lease A takes
	// was taken at T0 or later, so none expires before T0 + lease.
	t0 := time.Now()
	held := make([]<-chan loginResult, killLimit)
	for i := range held {
		held[i] = postLogin(a.listen, hangGuard)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), hangGuard)
	defer wcancel()
	if err := origin.WaitHeld(wctx, killLimit); err != nil {
		t.Fatalf("waiting for %d logins held at the origin through A: %v (origin %+v)\n%s", killLimit, err, origin.InFlight(), a.logs.String())
	}
	// A is full: one more is refused there, at once, and never reaches the
	// origin.
	if r := awaitLogin(t, postLogin(a.listen, hangGuard), "login #11 through A"); r.status != 429 {
		t.Fatalf("login #%d through A with %d held: status %d (%v), want 429", killLimit+1, killLimit, r.status, r.err)
	}
	if r := origin.InFlight(); r.Peak != killLimit {
		t.Fatalf("origin in flight with A full: %+v, want a peak of exactly %d", r, killLimit)
	}

	// kill -9: A gives nothing back.
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	killedAt := time.Now()
	for i, ch := range held {
		if r := awaitLogin(t, ch, "a login held through the killed A"); r.status != 0 {
			// A answered before it was killed: its upstream timeout ran out
			// and it refunded its leases, so the rest proves nothing.
			t.Fatalf("login %d through A was answered %d before the kill (%v after T0): the kill came too late", i, r.status, killedAt.Sub(t0))
		}
	}
	// The origin's held requests of A answer into closed connections; B's
	// admitted logins must not be held.
	origin.StopHolding()
	origin.ResetPeak()

	// B right after the kill: refused while A's leases live. Only asserted
	// when the answer came before T0 + lease, when they certainly live.
	probe := awaitLogin(t, postLogin(b.listen, hangGuard), "B's first login")
	if probe.at.Before(t0.Add(killLease)) {
		if probe.status != 429 {
			t.Fatalf("B's login %v after T0, while A's %d leases live: status %d (%v), want 429\n%s", probe.at.Sub(t0), killLimit, probe.status, probe.err, b.logs.String())
		}
	} else {
		t.Logf("B's first login answered %v after T0, after the lease (%v): the refusal is not asserted", probe.at.Sub(t0), killLease)
	}

	// B is admitted once the leases expire, and not before.
	deadline := t0.Add(killLease + hangGuard)
	refused := 0
	for {
		r := awaitLogin(t, postLogin(b.listen, hangGuard), "B's login")
		if r.status == 200 {
			if r.at.Before(t0.Add(killLease)) {
				t.Fatalf("B admitted %v after T0, before A's leases (%v) could have expired", r.at.Sub(t0), killLease)
			}
			t.Logf("B refused %d times, admitted %v after T0 (%v after the kill; lease %v)", refused, r.at.Sub(t0), r.at.Sub(killedAt), killLease)
			break
		}
		if r.status != 429 {
			t.Fatalf("B's login: status %d (%v), want 429 or 200\n%s", r.status, r.err, b.logs.String())
		}
		refused++
		if time.Now().After(deadline) {
			t.Fatalf("B still refused %v after T0, lease %v: A's leases did not expire", time.Since(t0), killLease)
		}
		time.Sleep(50 * time.Millisecond) // polling for the expiry, not for time
	}

	// Every one of A's leases goes: B can fill the limit itself (its
	// requests held again at the origin; a refused one is tried again
	// until A's last lease has expired), and then refuses one more.
	origin.Hold("/login")
	var bHeld []<-chan loginResult
	for len(bHeld) < killLimit {
		ch := postLogin(b.listen, hangGuard)
		hctx, hcancel := context.WithTimeout(t.Context(), hangGuard)
		heldc := make(chan error, 1)
		go func(n int) { heldc <- origin.WaitHeld(hctx, n) }(len(bHeld) + 1)
		select {
		case err := <-heldc:
			hcancel()
			if err != nil {
				t.Fatalf("B filling the limit: neither held nor answered within %v (%d held)", hangGuard, len(bHeld))
			}
			bHeld = append(bHeld, ch)
		case r := <-ch:
			hcancel()
			<-heldc
			if r.status != 429 {
				t.Fatalf("B filling the limit: a login answered %d (%v) with %d held, want it held or refused\n%s", r.status, r.err, len(bHeld), b.logs.String())
			}
			if time.Now().After(deadline) {
				t.Fatalf("B refused with %d of its own held, %v after T0: A's leases did not all expire", len(bHeld), time.Since(t0))
			}
			time.Sleep(50 * time.Millisecond) // polling for the expiry, not for time
		}
	}
	if r := awaitLogin(t, postLogin(b.listen, hangGuard), "B's login over the limit"); r.status != 429 {
		t.Fatalf("B's login #%d with %d of its own held: status %d (%v), want 429", killLimit+1, killLimit, r.status, r.err)
	}
	if r := origin.InFlight(); r.Peak > killLimit || r.Held != killLimit {
		t.Fatalf("origin with B full: %+v, want %d held and a peak of at most %d", r, killLimit, killLimit)
	}
	origin.StopHolding()
	for _, ch := range bHeld {
		if r := awaitLogin(t, ch, "B's held login"); r.status != 200 {
			t.Errorf("B's held login after release: %d (%v), want 200", r.status, r.err)
		}
	}
}
