package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules/memstore"
)

// refusalPolicy: every rule is a fixed window of one request per 100 s
// (1000 s for "m-long"), keyed on the client, on a route of its own.
const refusalPolicy = `
edge {
  upstream         = "http://127.0.0.1:1"
  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}
rule "plain" {
  paths     = ["/plain"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 1
  period    = "100s"
}
rule "jit" {
  paths              = ["/jit"]
  key                = ["ip"]
  algorithm          = "fixed_window"
  limit              = 1
  period             = "100s"
  retry_after_jitter = "20%"
}
rule "busy" {
  paths                = ["/busy"]
  key                  = ["ip"]
  algorithm            = "fixed_window"
  limit                = 1
  period               = "100s"
  refusal_status       = 503
  refusal_body         = "<p>Busy, back soon</p>\n"
  refusal_content_type = "text/html; charset=utf-8"
}
rule "status-only" {
  paths          = ["/status-only"]
  key            = ["ip"]
  algorithm      = "fixed_window"
  limit          = 1
  period         = "100s"
  refusal_status = 503
}
rule "m-short" {
  paths          = ["/m"]
  key            = ["ip"]
  algorithm      = "fixed_window"
  limit          = 1
  period         = "100s"
  refusal_status = 503
}
rule "m-long" {
  paths              = ["/m"]
  key                = ["ip"]
  algorithm          = "fixed_window"
  limit              = 1
  period             = "1000s"
  refusal_body       = "long\n"
  retry_after_jitter = "10%"
}
rule "s-jit" {
  paths              = ["/s"]
  key                = ["ip"]
  algorithm          = "fixed_window"
  limit              = 1
  period             = "100s"
  retry_after_jitter = "50%"
  refusal_status     = 503
}
rule "s-sensitive" {
  paths     = ["/s"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 1
  period    = "100s"
  sensitive = true
}
`

// refusalBase is a multiple of 1000 s: every window starts with the test.
var refusalBase = time.Unix(1_800_000_000, 0)

// scriptedDraws is an injected jitter source: the i-th draw is the middle
// of the i-th of n equal slices of the 64-bit range, so a jitter window of
// n−1 whole seconds gets k = i mod n extra seconds exactly.
type scriptedDraws struct {
	n     uint64
	calls atomic.Uint64
}

func (d *scriptedDraws) draw() uint64 {
	i := (d.calls.Add(1) - 1) % d.n
	q := ^uint64(0) / d.n
	return i*q + q/2
}

func startRefusalNode(t *testing.T, draws func() uint64) (addr string, clk *fakeClock) {
	t.Helper()
	p, diags := builtin.Load("refusal.hcl", []byte(refusalPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	store, err := memstore.New(memstore.Options{MaxKeys: 10000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})}
	oln := listen(t)
	go func() { _ = origin.Serve(oln) }()
	t.Cleanup(func() { origin.Close() })
	clk = &fakeClock{t: refusalBase}
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: store, Upstream: "http://" + oln.Addr().String(), Clock: clk, RetryJitterRand: draws})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ln := listen(t)
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	return ln.Addr().String(), clk
}

// refusalClient is the i-th test client's address.
func refusalClient(i int) string { return "198.51.100." + strconv.Itoa(i+1) }

// refusedOnce sends path twice from client: the first is admitted, the
// second refused; it returns the refusal.
func refusedOnce(t *testing.T, addr, path, client string) reply {
	t.Helper()
	if r := do(t, "GET", "http://"+addr+path, "", "X-Forwarded-For", client); r.status != 200 {
		t.Fatalf("%s first request from %s: %d, want 200", path, client, r.status)
	}
	r := do(t, "GET", "http://"+addr+path, "", "X-Forwarded-For", client)
	if r.status == 200 {
		t.Fatalf("%s second request from %s admitted", path, client)
	}
	return r
}

// TestRetryAfterJitterThroughTheServer: a rule with retry_after_jitter =
// "20%" and a true wait of 100 s answers Retry-After 100 + k, k the draw's
// share of 0 … 20, never below 100, every value of the window reached, and
// its RateLimit t the same; a rule without jitter answers exactly 100
// whatever the draw. A client that retries at its Retry-After is admitted.
func TestRetryAfterJitterThroughTheServer(t *testing.T) {
	draws := &scriptedDraws{n: 21}
	addr, clk := startRefusalNode(t, draws.draw)
	seen := map[int64]bool{}
	wait := make([]int64, 21)
	for i := range 21 {
		r := refusedOnce(t, addr, "/jit", refusalClient(i))
		if r.status != 429 {
			t.Fatalf("status %d, want 429", r.status)
		}
		ra, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
		if err != nil {
			t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
		}
		if want := int64(100 + i); ra != want {
			t.Errorf("client %d: Retry-After %d, want %d (draw %d of 21)", i, ra, want, i)
		}
		if ra < 100 || ra > 120 {
			t.Errorf("client %d: Retry-After %d outside the true wait 100 … 100 + 20%%", i, ra)
		}
		if tt := limits(t, r.header.Get("RateLimit"))["jit"]["t"]; tt != ra {
			t.Errorf("client %d: RateLimit t=%d, Retry-After %d: they must agree", i, tt, ra)
		}
		seen[ra], wait[i] = true, ra
	}
	if len(seen) != 21 {
		t.Errorf("Retry-After took %d distinct values, want all 21 of 100 … 120", len(seen))
	}
	for i := range 3 {
		r := refusedOnce(t, addr, "/plain", refusalClient(100+i))
		if ra := r.header.Get("Retry-After"); ra != "100" {
			t.Errorf("no jitter: Retry-After %q, want 100", ra)
		}
		if tt := limits(t, r.header.Get("RateLimit"))["plain"]["t"]; tt != 100 {
			t.Errorf("no jitter: RateLimit t=%d, want 100", tt)
		}
	}
	// The true wait is 100 s: a second before it still refused, and each
	// client admitted at its own Retry-After.
	clk.Set(refusalBase.Add(99 * time.Second))
	if r := do(t, "GET", "http://"+addr+"/jit", "", "X-Forwarded-For", refusalClient(0)); r.status != 429 {
		t.Fatalf("at 99 s: %d, want 429 (the true wait is 100 s)", r.status)
	}
	for i := range 21 {
		clk.Set(refusalBase.Add(time.Duration(wait[i]) * time.Second))
		if r := do(t, "GET", "http://"+addr+"/jit", "", "X-Forwarded-For", refusalClient(i)); r.status != 200 {
			t.Errorf("client %d retrying at its Retry-After %d: %d, want 200", i, wait[i], r.status)
		}
	}
}

// TestRefusalStatusAndBodyThroughTheServer: refusal_status and
// refusal_body are served with their content type and the RateLimit
// headers; refusal_status alone keeps the problem body with its status;
// when two rules refuse, the one with the longer wait answers; a sensitive
// rule on the route makes the refusal the bare 429, whatever the other
// rule's jitter and status.
func TestRefusalStatusAndBodyThroughTheServer(t *testing.T) {
	addr, _ := startRefusalNode(t, (&scriptedDraws{n: 2}).draw)

	r := refusedOnce(t, addr, "/busy", refusalClient(0))
	if r.status != 503 || r.body != "<p>Busy, back soon</p>\n" || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("/busy: %d %q %q, want 503 with the rule's body and content type", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r.header.Get("Retry-After") != "100" || limits(t, r.header.Get("RateLimit"))["busy"]["t"] != 100 || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("/busy: Retry-After %q, RateLimit %q, Cache-Control %q", r.header.Get("Retry-After"), r.header.Get("RateLimit"), r.header.Get("Cache-Control"))
	}

	r = refusedOnce(t, addr, "/status-only", refusalClient(1))
	var pb struct {
		Title    string   `json:"title"`
		Status   int      `json:"status"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal([]byte(r.body), &pb); err != nil {
		t.Fatalf("/status-only body %q: %v", r.body, err)
	}
	if r.status != 503 || r.header.Get("Content-Type") != "application/problem+json" || pb.Status != 503 || pb.Title != "Service Unavailable" || len(pb.Violated) != 1 || pb.Violated[0] != "status-only" {
		t.Errorf("/status-only: %d %q %+v", r.status, r.header.Get("Content-Type"), pb)
	}

	// Both refuse; m-long (1000 s) outwaits m-short (100 s): its body, and
	// not m-short's 503, answers; Retry-After is m-long's jittered wait.
	r = refusedOnce(t, addr, "/m", refusalClient(2))
	ra, _ := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
	if r.status != 429 || r.body != "long\n" || ra < 1000 || ra > 1100 {
		t.Errorf("/m: %d %q Retry-After %d, want m-long's 429 and body, 1000 … 1100", r.status, r.body, ra)
	}
	if rl := limits(t, r.header.Get("RateLimit")); rl["m-long"]["t"] != ra || rl["m-short"]["t"] != 100 {
		t.Errorf("/m: RateLimit %q, Retry-After %d", r.header.Get("RateLimit"), ra)
	}

	r = refusedOnce(t, addr, "/s", refusalClient(3))
	if r.status != 429 || r.body != bareBody || r.header.Get("Retry-After") != "" || r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
		t.Errorf("/s: %d %q Retry-After %q RateLimit %q, want the bare 429", r.status, r.body, r.header.Get("Retry-After"), r.header.Get("RateLimit"))
	}
}
