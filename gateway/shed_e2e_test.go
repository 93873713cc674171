package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/rules/memstore"
)

// shedE2EPolicy: a node ceiling of 10 in flight, the default shares: API
// reads (low) are shed from 5 in flight, logins (high) from 9, OTP verifies
// (critical) only at 10. Logins and OTP verifies are sensitive.
const shedE2EPolicy = `
edge {
  upstream_timeout = "%s"
  load_shedding {
    max_in_flight = 10
    retry_after   = "2s"
  }
}
` + shedPriorityRules

// shedPriorityRules are the shedding tests' rules by priority: API reads
// low, logins high, OTP verifies critical; logins and OTP verifies are
// sensitive. Each counts per address, far from its limit.
const shedPriorityRules = `rule "api-reads" {
  paths    = ["/api/*"]
  key      = ["ip"]
  limit    = 1000
  period   = "1m"
  priority = "low"
}
rule "login" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 1000
  period    = "1m"
  sensitive = true
  priority  = "high"
}
rule "otp-verify" {
  methods   = ["POST"]
  paths     = ["/otp/verify"]
  key       = ["ip"]
  limit     = 1000
  period    = "1m"
  sensitive = true
  priority  = "critical"
}
`

type shedNode struct {
	addr   string
	decide string // the decision-only listener, when the policy sets decide_listen
	srv    *Server
	reg    *prometheus.Registry
	origin *demo.Origin // holds requests as the test says (demo/hold.go)
}

// startShedNode starts shedE2EPolicy with upstream_timeout timeout on a
// memory store, in front of a holding origin.
func startShedNode(t *testing.T, timeout string) *shedNode {
	t.Helper()
	return startShedNodeWith(t, fmt.Sprintf(shedE2EPolicy, timeout), nil)
}

// startShedNodeWith starts src with opts (when set) applied to the
// server's Options, and its decision-only listener when src sets
// decide_listen.
func startShedNodeWith(t *testing.T, src string, opts func(*Options)) *shedNode {
	t.Helper()
	p, diags := builtin.Load("shed.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	n := &shedNode{origin: demo.New(), reg: prometheus.NewRegistry()}
	octx, ocancel := context.WithCancel(context.Background())
	oln := listen(t)
	odone := make(chan struct{})
	go func() { defer close(odone); _ = n.origin.Serve(octx, oln) }()
	t.Cleanup(func() { ocancel(); <-odone }) // shutdown releases every held request
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	o := Options{Extensions: builtin.Extensions(), Policy: p, Store: ms, Upstream: "http://" + oln.Addr().String(), Registry: n.reg}
	if opts != nil {
		opts(&o)
	}
	n.srv, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ln := listen(t)
	n.addr = ln.Addr().String()
	wg.Add(1)
	go func() { defer wg.Done(); _ = n.srv.Serve(ctx, ln) }()
	if p.DecideListen != "" {
		dln := listen(t)
		n.decide = dln.Addr().String()
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.srv.ServeDecide(ctx, dln) }()
	}
	t.Cleanup(func() { n.origin.StopHolding(); cancel(); wg.Wait() })
	return n
}

// send starts a request in the background; its reply arrives on the
// channel.
func (n *shedNode) send(t *testing.T, method, path string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest(method, "http://"+n.addr+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			ch <- reply{}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- reply{resp.StatusCode, resp.Header, string(b)}
	}()
	return ch
}

// fill sends k requests that the origin holds, and waits until it holds
// want in all.
func (n *shedNode) fill(t *testing.T, method, path string, k, want int) []<-chan reply {
	t.Helper()
	var out []<-chan reply
	for range k {
		out = append(out, n.send(t, method, path))
	}
	n.waitHeld(t, want)
	return out
}

// waitHeld waits until the origin holds want requests (waitOriginHeld).
func (n *shedNode) waitHeld(t *testing.T, want int) {
	t.Helper()
	waitOriginHeld(t, n.origin, want)
}

// gathered returns the value of name's series with every label=value
// pair of labels (none: the first series), or -1.
func gathered(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
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
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			ok := true
			for i := 0; i+1 < len(labels); i += 2 {
				ok = ok && have[labels[i]] == labels[i+1]
			}
			if !ok {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// wantShed503 checks a shed answer: 503, the bare body, Retry-After only
// on an ordinary route, never a RateLimit field.
func wantShed503(t *testing.T, what string, r reply, retryAfter string) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable || r.body != "Service Unavailable\n" {
		t.Errorf("%s: %d %q, want the bare 503", what, r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got != retryAfter {
		t.Errorf("%s: Retry-After %q, want %q", what, got, retryAfter)
	}
	if r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
		t.Errorf("%s: RateLimit fields on a shed answer: %v", what, r.header)
	}
}

// TestShedByPriorityThroughTheServer: the origin holds every request; as
// the node fills, API reads get 503 (with Retry-After) before logins do
// (bare, sensitive), and OTP verifies are the last, at the ceiling itself;
// the counts are exact. Releasing the held requests answers them all, and
// every slot is back: the node fills to exactly 10 again.
func TestShedByPriorityThroughTheServer(t *testing.T) {
	n := startShedNode(t, "10s")
	base := "http://" + n.addr
	n.origin.Hold("")

	var held []<-chan reply
	held = append(held, n.fill(t, "GET", "/api/items", 5, 5)...)
	wantShed503(t, "6th API read", do(t, "GET", base+"/api/items", ""), "2")
	// Logins still go to the origin, up to 9 in flight.
	held = append(held, n.fill(t, "POST", "/login", 4, 9)...)
	wantShed503(t, "API read at 9 in flight", do(t, "GET", base+"/api/items", ""), "2")
	wantShed503(t, "10th login", do(t, "POST", base+"/login", ""), "")
	held = append(held, n.fill(t, "POST", "/otp/verify", 1, 10)...)
	wantShed503(t, "11th request, an OTP verify", do(t, "POST", base+"/otp/verify", ""), "")
	wantShed503(t, "login at the ceiling", do(t, "POST", base+"/login", ""), "")

	if got := gathered(t, n.reg, "edge_in_flight"); got != 10 {
		t.Errorf("edge_in_flight %v, want 10", got)
	}
	for prio, want := range map[string]float64{"low": 2, "normal": 0, "high": 2, "critical": 1} {
		if got := gathered(t, n.reg, "edge_shed_total", "priority", prio); got != want {
			t.Errorf("edge_shed_total{priority=%q} %v, want %v", prio, got, want)
		}
	}
	if got := gathered(t, n.reg, "edge_decisions_total", "rule", "api-reads", "decision", "allow"); got != 5 {
		t.Errorf("api-reads decided %v requests, want the 5 forwarded (a shed request is counted by no rule)", got)
	}

	if r := n.origin.InFlight(); r.Peak != 10 || r.InFlight != 10 {
		t.Errorf("the origin has %d in flight, peak %d; want 10 and 10 (max_in_flight)", r.InFlight, r.Peak)
	}
	n.origin.StopHolding()
	for i, ch := range held {
		if r := <-ch; r.status == 0 || r.status >= 500 {
			t.Errorf("held request %d: %d, want the origin's answer once released", i, r.status)
		}
	}
	waitUntil(t, "edge_in_flight back to 0", func() bool { return gathered(t, n.reg, "edge_in_flight") == 0 })
	if r := do(t, "GET", base+"/api/items", ""); r.status != http.StatusOK {
		t.Errorf("API read after the release: %d, want 200", r.status)
	}

	// No slot leaked: the node holds exactly 10 OTP verifies again.
	n.origin.Hold("")
	held = n.fill(t, "POST", "/otp/verify", 10, 10)
	wantShed503(t, "11th OTP verify", do(t, "POST", base+"/otp/verify", ""), "")
	n.origin.StopHolding()
	for _, ch := range held {
		<-ch
	}
}

// TestShedSlotsBackWhenTheOriginFails: requests that time out at the
// origin (504), that it drops (502) or whose client hangs up while they
// are held give their slots back: afterwards the node admits its full
// share again.
func TestShedSlotsBackWhenTheOriginFails(t *testing.T) {
	n := startShedNode(t, "200ms")
	n.origin.Hold("")

	// Upstream timeouts: held until the edge gives up.
	var replies []<-chan reply
	for range 5 {
		replies = append(replies, n.send(t, "GET", "/api/items"))
	}
	for i, ch := range replies {
		if r := <-ch; r.status != http.StatusGatewayTimeout {
			t.Errorf("timed-out request %d: %d, want 504", i, r.status)
		}
	}
	waitUntil(t, "edge_in_flight back to 0 after timeouts", func() bool { return gathered(t, n.reg, "edge_in_flight") == 0 })

	// The 5 slots are back: 5 more reach the origin (and time out) rather
	// than being shed.
	replies = replies[:0]
	for range 5 {
		replies = append(replies, n.send(t, "GET", "/api/items"))
	}
	for i, ch := range replies {
		if r := <-ch; r.status != http.StatusGatewayTimeout {
			t.Errorf("request %d after the timeouts: %d, want 504 (at the origin, not shed)", i, r.status)
		}
	}
	waitUntil(t, "edge_in_flight back to 0 after the second timeouts", func() bool { return gathered(t, n.reg, "edge_in_flight") == 0 })
	n.origin.StopHolding()

	// Origin errors: nothing listens at the upstream. Ten in a row are each
	// 502, none 503: each gave its slot back before its answer.
	dead := listen(t)
	deadAddr := dead.Addr().String()
	dead.Close()
	n3 := startShedNodeWith(t, fmt.Sprintf(shedE2EPolicy, "10s"), func(o *Options) { o.Upstream = "http://" + deadAddr })
	for i := range 10 {
		if r := do(t, "GET", "http://"+n3.addr+"/api/items", ""); r.status != http.StatusBadGateway {
			t.Errorf("request %d to a dead origin: %d, want 502", i, r.status)
		}
	}
	if got := gathered(t, n3.reg, "edge_in_flight"); got != 0 {
		t.Errorf("edge_in_flight %v after origin errors, want 0", got)
	}

	// Clients gone while their requests are held: the slots come back once
	// the origin answers, and the node admits 5 API reads again.
	n2 := startShedNode(t, "10s")
	n2.origin.Hold("")
	var conns []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", n2.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "GET /api/items HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	n2.waitHeld(t, 5)
	wantShed503(t, "6th API read", do(t, "GET", "http://"+n2.addr+"/api/items", ""), "2")
	for _, c := range conns {
		c.Close()
	}
	n2.origin.StopHolding()
	waitUntil(t, "edge_in_flight back to 0 after hang-ups", func() bool { return gathered(t, n2.reg, "edge_in_flight") == 0 })
	n2.origin.Hold("")
	held := n2.fill(t, "GET", "/api/items", 5, 5)
	wantShed503(t, "6th API read again", do(t, "GET", "http://"+n2.addr+"/api/items", ""), "2")
	n2.origin.StopHolding()
	for _, ch := range held {
		<-ch
	}
}

// TestShedRetryAfterJitter: load_shedding's retry_after_jitter spreads a
// shed answer's Retry-After over retry_after … retry_after × (1 + jitter),
// never earlier: with "100%" of 2s, the lowest draw answers 2 and the
// highest 4.
func TestShedRetryAfterJitter(t *testing.T) {
	var draw atomic.Uint64
	src := strings.Replace(fmt.Sprintf(shedE2EPolicy, "10s"), `retry_after   = "2s"`, `retry_after   = "2s"
    retry_after_jitter = "100%"`, 1)
	n := startShedNodeWith(t, src, func(o *Options) { o.RetryJitterRand = draw.Load })
	base := "http://" + n.addr
	n.origin.Hold("")
	held := n.fill(t, "GET", "/api/items", 5, 5)
	wantShed503(t, "lowest draw", do(t, "GET", base+"/api/items", ""), "2")
	draw.Store(math.MaxUint64)
	wantShed503(t, "highest draw", do(t, "GET", base+"/api/items", ""), "4")
	wantShed503(t, "sensitive, highest draw", func() reply {
		held = append(held, n.fill(t, "POST", "/login", 4, 9)...)
		return do(t, "POST", base+"/login", "")
	}(), "")
	n.origin.StopHolding()
	for _, ch := range held {
		<-ch
	}
}

// TestShedOnTheDecideListener: a described request is shed when the
// node's own proxied requests fill its priority's share, and, admitted,
// holds no slot once answered (the origin's answer never comes back to
// the decision-only listener): 20 described API reads in a row are all
// let through with the node at 4 of 10, and the count stays 4.
func TestShedOnTheDecideListener(t *testing.T) {
	src := strings.Replace(fmt.Sprintf(shedE2EPolicy, "10s"), "edge {", `edge {
  decide_listen = "127.0.0.1:18081"`, 1)
	n := startShedNodeWith(t, src, nil)
	n.origin.Hold("")
	held := n.fill(t, "GET", "/api/items", 4, 4)
	describe := func() reply {
		return do(t, "GET", "http://"+n.decide+"/auth", "", "X-Original-Method", "GET", "X-Original-URI", "/api/items")
	}
	for i := range 20 {
		if r := describe(); r.status != http.StatusOK {
			t.Fatalf("described API read %d at 4 in flight: %d, want 200", i, r.status)
		}
	}
	if got := gathered(t, n.reg, "edge_in_flight"); got != 4 {
		t.Errorf("edge_in_flight %v after 20 described requests, want 4 (a described request holds no slot)", got)
	}
	held = append(held, n.fill(t, "GET", "/api/items", 1, 5)...)
	wantShed503(t, "described API read at 5 in flight", describe(), "2")
	n.origin.StopHolding()
	for _, ch := range held {
		<-ch
	}
}

// shedAdaptivePolicy: no node ceiling; an adaptive rule over every path
// whose limit is held at 10 (min = max) is what saturates, and the
// priorities share it as they share max_in_flight.
const shedAdaptivePolicy = `
edge {
  load_shedding {
    retry_after = "3s"
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
` + shedPriorityRules

// TestShedByPriorityAtTheAdaptiveLimit: with an adaptive limit of 10 as
// the only capacity, API reads are shed from 5 in flight, logins from 9,
// OTP verifies at 10, through the real server; the origin never has more
// than 10.
func TestShedByPriorityAtTheAdaptiveLimit(t *testing.T) {
	n := startShedNodeWith(t, shedAdaptivePolicy, nil)
	base := "http://" + n.addr
	n.origin.Hold("")
	var held []<-chan reply
	held = append(held, n.fill(t, "GET", "/api/items", 5, 5)...)
	wantShed503(t, "6th API read", do(t, "GET", base+"/api/items", ""), "3")
	held = append(held, n.fill(t, "POST", "/login", 4, 9)...)
	wantShed503(t, "10th login", do(t, "POST", base+"/login", ""), "")
	held = append(held, n.fill(t, "POST", "/otp/verify", 1, 10)...)
	wantShed503(t, "11th, an OTP verify", do(t, "POST", base+"/otp/verify", ""), "")
	if got := gathered(t, n.reg, "edge_adaptive_in_flight", "rule", "origin-adaptive"); got != 10 {
		t.Errorf("edge_adaptive_in_flight %v, want 10", got)
	}
	if got := gathered(t, n.reg, "edge_decisions_total", "rule", "origin-adaptive", "decision", "deny"); got != 3 {
		t.Errorf("origin-adaptive denied %v, want the 3 it shed", got)
	}
	if r := n.origin.InFlight(); r.Peak != 10 {
		t.Errorf("the origin's in-flight peak %d, want 10 (the adaptive limit)", r.Peak)
	}
	n.origin.StopHolding()
	for _, ch := range held {
		if r := <-ch; r.status == 0 || r.status >= 500 {
			t.Errorf("held request: %d, want the origin's answer", r.status)
		}
	}
	waitUntil(t, "edge_adaptive_in_flight back to 0", func() bool {
		return gathered(t, n.reg, "edge_adaptive_in_flight", "rule", "origin-adaptive") == 0
	})
}

// TestShedLogsAtMostOneLineASecond: shedding comes in floods when the node
// is saturated, so the "shed" decision log is one line a second (on the
// nodes' clock), the next one naming how many went unlogged meanwhile, and
// the adaptive or ceiling rule writes no "refused" line of its own.
func TestShedLogsAtMostOneLineASecond(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var logs syncBuffer
	n := startShedNodeWith(t, fmt.Sprintf(shedE2EPolicy, "30s"), func(o *Options) {
		o.Clock = clk
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	n.origin.Hold("")
	held := n.fill(t, "GET", "/api/a", 5, 5) // low: shed from 5 in flight
	shedLines := func() []map[string]any {
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "shed" {
				out = append(out, m)
			}
		}
		return out
	}
	for i := range 6 {
		if r := <-n.send(t, "GET", "/api/b"); r.status != http.StatusServiceUnavailable {
			t.Fatalf("read %d over the low share: %d, want 503", i+1, r.status)
		}
	}
	if got := shedLines(); len(got) != 1 || got[0]["shed_unlogged"] != float64(0) || got[0]["priority"] != "low" || got[0]["saturated"] != "max_in_flight" {
		t.Fatalf("after 6 sheds in one second: %v, want one line (priority low, max_in_flight, shed_unlogged 0)", got)
	}
	clk.Advance(time.Second)
	if r := <-n.send(t, "GET", "/api/c"); r.status != http.StatusServiceUnavailable {
		t.Fatalf("a read a second later: %d, want 503", r.status)
	}
	got := shedLines()
	if len(got) != 2 || got[1]["shed_unlogged"] != float64(5) {
		t.Fatalf("a second later: %v, want a second line with shed_unlogged 5", got)
	}
	if strings.Contains(logs.String(), `"msg":"refused"`) {
		t.Errorf("a shed request also logged a refusal:\n%s", logs.String())
	}
	n.origin.StopHolding()
	for _, ch := range held {
		<-ch
	}
}
