package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// adaptiveE2EPolicy: an adaptive rule on /login (aimd: starts at 3 in
// flight, a cut keeps ⌊limit × 0.9⌋, an answer slower than 50ms cuts).
const adaptiveE2EPolicy = `
edge {
  upstream_timeout = "10s"
}
rule "login-adaptive" {
  methods   = ["POST"]
  paths     = ["/login"]
  algorithm = "concurrency"
  adaptive {
    method            = "aimd"
    min               = 1
    max               = 3
    initial           = 3
    latency_threshold = "50ms"
  }
}
`

// TestAdaptiveThroughTheServer: the real server in front of the demo
// origin. The limit is exported from the start; an answer the origin slows
// to 200ms (never faster: the lower bound is what the test rests on) cuts
// it from 3 to 2; with the origin holding requests, exactly 2 reach it and
// the next is shed (503 with Retry-After, never 429); once released, no
// slot is left in flight.
func TestAdaptiveThroughTheServer(t *testing.T) {
	n := startShedNodeWith(t, adaptiveE2EPolicy, func(o *Options) { o.AdminToken = dryToken })
	aln := listen(t)
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan struct{})
	go func() { defer close(adone); _ = n.srv.ServeAdmin(actx, aln) }()
	t.Cleanup(func() { acancel(); <-adone })
	base := "http://" + n.addr
	limit := func() float64 { return gathered(t, n.reg, "edge_adaptive_limit", "rule", "login-adaptive") }
	inFlight := func() float64 { return gathered(t, n.reg, "edge_adaptive_in_flight", "rule", "login-adaptive") }
	if l, f := limit(), inFlight(); l != 3 || f != 0 {
		t.Fatalf("before any request: edge_adaptive_limit %v, edge_adaptive_in_flight %v; want 3 and 0", l, f)
	}

	n.origin.SetLatency("/login", 200*time.Millisecond)
	if r := do(t, "POST", base+"/login", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("slow login: %d, want the origin's 401 (no credentials)", r.status)
	}
	if l := limit(); l != 2 {
		t.Fatalf("after an answer slower than latency_threshold: limit %v, want ⌊3 × 0.9⌋ = 2", l)
	}
	n.origin.SetLatency("/login", 0)

	n.origin.Hold("/login")
	held := n.fill(t, "POST", "/login", 2, 2)
	if f := inFlight(); f != 2 {
		t.Errorf("edge_adaptive_in_flight %v with 2 held, want 2", f)
	}
	wantShed503(t, "3rd login over the adaptive limit of 2", do(t, "POST", base+"/login", ""), "1")
	if got := gathered(t, n.reg, "edge_shed_total", "priority", "normal"); got != 1 {
		t.Errorf("edge_shed_total{priority=normal} %v, want 1", got)
	}
	if r := n.origin.InFlight(); r.Peak != 2 {
		t.Errorf("the origin's in-flight peak %d, want 2 (the adaptive limit)", r.Peak)
	}
	n.origin.StopHolding()
	for i, ch := range held {
		if r := <-ch; r.status != http.StatusUnauthorized {
			t.Errorf("held login %d: %d, want the origin's 401 once released", i, r.status)
		}
	}
	waitUntil(t, "edge_adaptive_in_flight back to 0", func() bool { return inFlight() == 0 })
	l := limit()
	if l < 1 || l > 3 {
		t.Errorf("limit %v outside min 1 and max 3", l)
	}
	// The admin API shows the limiter's limit now and the method.
	if _, ar := adminRulesOf(t, aln.Addr().String(), "login-adaptive"); ar.Adaptive != "aimd, min 1, max 3" || float64(ar.Limit) != l || ar.Algorithm != "concurrency" || ar.Period != "" {
		t.Errorf("GET /admin/rules: %+v, want adaptive \"aimd, min 1, max 3\", limit %v, algorithm concurrency, no period", ar, l)
	}
}
