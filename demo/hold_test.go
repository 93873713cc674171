package demo

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// hangGuard bounds every wait of these tests; nothing waits for time to
// pass, only for a condition, and this is how long a broken one may hang.
const hangGuard = 20 * time.Second

// sendLogin posts a good login to base in a goroutine and delivers its
// status (or -1 on a transport error) on the returned channel.
func sendLogin(t *testing.T, base string) <-chan int {
	t.Helper()
	out := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		body := url.Values{"username": {"a"}, "password": {password}}.Encode()
		req, err := http.NewRequestWithContext(ctx, "POST", base+"/login", strings.NewReader(body))
		if err != nil {
			out <- -1
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- -1
			return
		}
		resp.Body.Close()
		out <- resp.StatusCode
	}()
	return out
}

// recv waits for one status, failing the test after hangGuard.
func recv(t *testing.T, ch <-chan int, what string) int {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(hangGuard):
		t.Fatalf("%s: no answer within %v", what, hangGuard)
		return 0
	}
}

// waitHeld is WaitHeld with the hang guard.
func waitHeld(t *testing.T, o *Origin, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := o.WaitHeld(ctx, n); err != nil {
		t.Fatalf("waiting for %d held: %v (report %+v)", n, err, o.InFlight())
	}
}

func TestHoldReleasesInArrivalOrder(t *testing.T) {
	t.Parallel()
	o := New()
	base := startOrigin(t, o)
	o.Hold("/LOGIN/") // matched as the routes match: /login

	const n = 5
	answers := make([]<-chan int, n)
	for i := range n {
		answers[i] = sendLogin(t, base)
		waitHeld(t, o, i+1) // the next one arrives after this one is held
	}
	if r := o.InFlight(); r.InFlight != n || r.Held != n || r.Peak != n || r.ByPath["/login"] != n {
		t.Fatalf("with %d held: report %+v, want in_flight, held, peak and by_path[/login] all %d", n, r, n)
	}

	// A path that is not held is answered, and counts in flight only
	// while it is inside.
	if r := call(t, base, "POST", "/signup", nil, nil); r.status != 200 {
		t.Fatalf("POST /signup while /login is held: %d, want 200", r.status)
	}

	for i := range n {
		if got := o.Release(1); got != 1 {
			t.Fatalf("Release(1) with %d held: released %d", n-i, got)
		}
		// Only one request was released, so the one answered now is it: it
		// must be the oldest still held.
		done := make(chan int, 1)
		go func() {
			select {
			case s := <-answers[i]:
				done <- s
			case <-time.After(hangGuard):
				done <- 0
			}
		}()
		if s := <-done; s != 200 {
			t.Fatalf("request %d after Release(1): status %d, want 200 (released in arrival order)", i, s)
		}
		for j := i + 1; j < n; j++ {
			select {
			case s := <-answers[j]:
				t.Fatalf("request %d answered %d though only the %d oldest were released", j, s, i+1)
			default:
			}
		}
		if r := o.InFlight(); r.Held != n-i-1 {
			t.Fatalf("after %d released: held %d, want %d", i+1, r.Held, n-i-1)
		}
	}
	if got := o.Release(-1); got != 0 {
		t.Errorf("Release(-1) with nothing held: %d, want 0", got)
	}

	// Holding goes on after a release: the next request is held too.
	next := sendLogin(t, base)
	waitHeld(t, o, 1)
	if got := o.StopHolding(); got != 1 {
		t.Errorf("StopHolding with one held: released %d, want 1", got)
	}
	if s := recv(t, next, "held login after StopHolding"); s != 200 {
		t.Errorf("held login after StopHolding: %d, want 200", s)
	}
	if s := recv(t, sendLogin(t, base), "login after StopHolding"); s != 200 {
		t.Errorf("login after StopHolding: %d, want 200 (not held)", s)
	}
}

func TestInFlightPeak(t *testing.T) {
	t.Parallel()
	o := New()
	base := startOrigin(t, o)
	o.Hold("")

	const n = 7
	answers := make([]<-chan int, n)
	for i := range n {
		answers[i] = sendLogin(t, base)
	}
	waitHeld(t, o, n)
	if got := o.Release(-1); got != n {
		t.Fatalf("Release(-1): %d, want %d", got, n)
	}
	for i := range n {
		if s := recv(t, answers[i], "released login"); s != 200 {
			t.Fatalf("released login %d: %d, want 200", i, s)
		}
	}
	// A request leaves before its answer is written: nothing to wait for.
	r := o.InFlight()
	if r.InFlight != 0 || r.Held != 0 || r.Peak != n || len(r.ByPath) != 0 {
		t.Fatalf("after all answered: %+v, want in_flight 0, held 0, peak %d, by_path empty", r, n)
	}
	o.ResetPeak()
	if r := o.InFlight(); r.Peak != 0 {
		t.Errorf("after ResetPeak: peak %d, want 0", r.Peak)
	}
}

func TestHoldIsBounded(t *testing.T) {
	t.Parallel()
	o := New()
	o.maxHeld = 2
	base := startOrigin(t, o)
	o.Hold("/login")
	a, b := sendLogin(t, base), sendLogin(t, base)
	waitHeld(t, o, 2)
	if s := recv(t, sendLogin(t, base), "third login"); s != 503 {
		t.Fatalf("a third login with 2 held at most: %d, want 503 at once", s)
	}
	if r := o.InFlight(); r.Held != 2 || r.InFlight != 2 {
		t.Errorf("after the 503: %+v, want held 2, in_flight 2", r)
	}
	o.StopHolding()
	for _, ch := range []<-chan int{a, b} {
		if s := recv(t, ch, "held login"); s != 200 {
			t.Errorf("held login after StopHolding: %d, want 200", s)
		}
	}
}

func TestShutdownReleasesHeld(t *testing.T) {
	t.Parallel()
	o := New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- o.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	o.Hold("")
	a, b := sendLogin(t, base), sendLogin(t, base)
	waitHeld(t, o, 2)
	cancel()
	for _, ch := range []<-chan int{a, b} {
		if s := recv(t, ch, "login held at shutdown"); s != 200 {
			t.Errorf("login held at shutdown: %d, want 200 (released and answered)", s)
		}
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v, want nil", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestWaitHeldContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := New().WaitHeld(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitHeld on a cancelled context with nothing held: %v, want context.Canceled", err)
	}
	if err := New().WaitHeld(ctx, 0); err != nil {
		t.Errorf("WaitHeld(0): %v, want nil", err)
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	o := New()
	// enter reports the latency to wait: a path's own wins over the one for
	// every path, 0 removes it, and it is clamped.
	latencyOf := func(path string) time.Duration {
		_, d, ok := o.enter(normalise(path))
		o.leave(normalise(path))
		if !ok {
			t.Fatalf("enter(%q) refused", path)
		}
		return d
	}
	o.SetLatency("/Login/", 200*time.Millisecond)
	o.SetLatency("", 30*time.Millisecond)
	if d := latencyOf("/login"); d != 200*time.Millisecond {
		t.Errorf("/login: %v, want 200ms", d)
	}
	if d := latencyOf("/signup"); d != 30*time.Millisecond {
		t.Errorf("/signup: %v, want 30ms (every path)", d)
	}
	o.SetLatency("/login", 0)
	o.SetLatency("", 0)
	if d := latencyOf("/login"); d != 0 {
		t.Errorf("/login after removal: %v, want 0", d)
	}
	o.SetLatency("/x", time.Hour)
	if d := latencyOf("/x"); d != maxLatency {
		t.Errorf("/x set to an hour: %v, want clamped to %v", d, maxLatency)
	}

	// Through the socket: the answer comes no earlier than the latency (a
	// lower bound, which a slow machine cannot break).
	base := startOrigin(t, o)
	if r := call(t, base, "POST", "/__origin/latency?path=/signup&ms=50", nil, nil); r.status != 200 {
		t.Fatalf("POST /__origin/latency: %d %s", r.status, r.body)
	}
	start := time.Now()
	if r := call(t, base, "POST", "/signup", nil, nil); r.status != 200 {
		t.Fatalf("POST /signup: %d", r.status)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("POST /signup with 50ms latency answered after %v", took)
	}
	for _, bad := range []string{"", "ms=-1", "ms=x", "ms=10001"} {
		if r := call(t, base, "POST", "/__origin/latency?"+bad, nil, nil); r.status != 400 {
			t.Errorf("POST /__origin/latency?%s: %d, want 400", bad, r.status)
		}
	}
}

func TestHoldControlRoutes(t *testing.T) {
	t.Parallel()
	o := New()
	base := startOrigin(t, o)
	report := func() InFlightReport {
		t.Helper()
		r := call(t, base, "GET", "/__origin/inflight", nil, nil)
		if r.status != 200 {
			t.Fatalf("GET /__origin/inflight: %d", r.status)
		}
		var rep InFlightReport
		if err := json.Unmarshal([]byte(r.body), &rep); err != nil {
			t.Fatalf("GET /__origin/inflight: %v in %s", err, r.body)
		}
		return rep
	}
	post := func(path string, wantStatus int, wantBody string) {
		t.Helper()
		r := call(t, base, "POST", path, nil, nil)
		if r.status != wantStatus || (wantBody != "" && r.body != wantBody) {
			t.Fatalf("POST %s: %d %s, want %d %s", path, r.status, r.body, wantStatus, wantBody)
		}
	}

	post("/__origin/hold?path=/login", 200, `{"ok":true}`)
	a := sendLogin(t, base)
	waitHeld(t, o, 1) // a arrives first
	b, c := sendLogin(t, base), sendLogin(t, base)
	waitHeld(t, o, 3)
	if r := report(); r.InFlight != 3 || r.Held != 3 || r.Peak != 3 || r.ByPath["/login"] != 3 {
		t.Fatalf("report with 3 held: %+v", r)
	}
	post("/__origin/release?n=1", 200, `{"released":1}`)
	first := make(chan int, 1)
	go func() {
		select {
		case s := <-a:
			first <- s
		case s := <-b:
			first <- s + 1000 // the wrong one
		case s := <-c:
			first <- s + 1000
		case <-time.After(hangGuard):
			first <- 0
		}
	}()
	if s := <-first; s != 200 {
		t.Fatalf("after release?n=1: got %d, want the oldest (200)", s)
	}
	post("/__origin/release?n=-1", 400, "")
	post("/__origin/release?n=two", 400, "")
	post("/__origin/release", 200, `{"released":2}`)
	for _, ch := range []<-chan int{b, c} {
		if s := recv(t, ch, "released login"); s != 200 {
			t.Errorf("released login: %d, want 200", s)
		}
	}

	d := sendLogin(t, base)
	waitHeld(t, o, 1)
	if r := call(t, base, "DELETE", "/__origin/hold", nil, nil); r.status != 200 || r.body != `{"released":1}` {
		t.Fatalf("DELETE /__origin/hold: %d %s, want 200 {\"released\":1}", r.status, r.body)
	}
	if s := recv(t, d, "login held until DELETE"); s != 200 {
		t.Errorf("login held until DELETE: %d", s)
	}
	if s := recv(t, sendLogin(t, base), "login after DELETE"); s != 200 {
		t.Errorf("login after DELETE /__origin/hold: %d, want 200", s)
	}
	post("/__origin/inflight/reset", 200, `{"ok":true}`)
	if r := report(); r.Peak != 0 || r.InFlight != 0 {
		t.Errorf("after reset: %+v, want peak and in_flight 0", r)
	}

	// Through a proxy (X-Forwarded-For), the controls are not there.
	xff := http.Header{"X-Forwarded-For": {"192.0.2.1"}}
	for _, c := range []struct{ method, path string }{
		{"POST", "/__origin/hold"}, {"DELETE", "/__origin/hold"}, {"POST", "/__origin/release"},
		{"GET", "/__origin/inflight"}, {"POST", "/__origin/inflight/reset"}, {"POST", "/__origin/latency?ms=1"},
	} {
		if r := call(t, base, c.method, c.path, xff, nil); r.status != 404 {
			t.Errorf("%s %s through a proxy: %d, want 404", c.method, c.path, r.status)
		}
	}
	if r := call(t, base, "GET", "/__origin/hold", nil, nil); r.status != 404 {
		t.Errorf("GET /__origin/hold: %d, want 404", r.status)
	}
}
