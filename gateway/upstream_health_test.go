package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestUpstreamHealthStateMachine walks the passive health through a spell:
// healthy through four failures, unhealthy at the fifth (once), healthy
// again at the first success, which clears the count but not the last
// failure. Times are given, never read.
func TestUpstreamHealthStateMachine(t *testing.T) {
	var h upstreamHealth
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	if st := h.status(); !st.Healthy || st.ConsecutiveFailures != 0 || st.LastFailure != "" || st.LastFailureReason != "" || st.UnhealthyAfter != 5 {
		t.Fatalf("fresh: %+v", st)
	}
	if rec, n := h.answered(); rec || n != 0 {
		t.Errorf("a success on a healthy origin: recovered %v after %d", rec, n)
	}
	for i := 1; i < unhealthyAfter; i++ {
		if h.failed(t0.Add(time.Duration(i)*time.Second), failStatus503) {
			t.Fatalf("failure %d turned the origin unhealthy", i)
		}
		if !h.healthy() {
			t.Fatalf("unhealthy after %d failures", i)
		}
	}
	st := h.status()
	if !st.Healthy || st.ConsecutiveFailures != 4 || st.LastFailure != "2026-12-02T01:00:04Z" || st.LastFailureReason != "status_503" || st.UnhealthySince != "" {
		t.Errorf("after 4 failures: %+v", st)
	}
	if !h.failed(t0.Add(5*time.Second), failTimeout) {
		t.Fatal("the fifth failure in a row did not turn the origin unhealthy")
	}
	if h.failed(t0.Add(6*time.Second), failConnect) {
		t.Error("the sixth failure turned it unhealthy again: one warning per spell")
	}
	st = h.status()
	want := upstreamStatus{Healthy: false, ConsecutiveFailures: 6, UnhealthyAfter: 5,
		LastFailure: "2026-12-02T01:00:06Z", LastFailureReason: "connect", UnhealthySince: "2026-12-02T01:00:05Z"}
	if st != want {
		t.Errorf("unhealthy:\n got %+v\nwant %+v", st, want)
	}
	if rec, n := h.answered(); !rec || n != 6 {
		t.Errorf("the first success: recovered %v after %d, want true after 6", rec, n)
	}
	st = h.status()
	want = upstreamStatus{Healthy: true, ConsecutiveFailures: 0, UnhealthyAfter: 5, LastFailure: "2026-12-02T01:00:06Z", LastFailureReason: "connect"}
	if st != want {
		t.Errorf("recovered:\n got %+v\nwant %+v", st, want)
	}
	if rec, _ := h.answered(); rec {
		t.Error("a second success recovered again")
	}
	// A success between failures resets the run: 4, a success, 4 more is
	// never unhealthy.
	for i := range 2 * (unhealthyAfter - 1) {
		if i == unhealthyAfter-1 {
			h.answered()
		}
		if h.failed(t0.Add(time.Minute), failStatus502) {
			t.Fatalf("failure %d after a success in between turned it unhealthy", i)
		}
	}
	if !h.healthy() {
		t.Error("unhealthy with a success in every run of 4")
	}
}

// TestUpstreamHealthConcurrentTurnsOnce: many requests failing at once
// turn the origin unhealthy exactly once (one warning), and count every
// failure.
func TestUpstreamHealthConcurrentTurnsOnce(t *testing.T) {
	var h upstreamHealth
	var turned atomic.Int32
	var wg sync.WaitGroup
	now := time.Unix(1, 0)
	for range 64 {
		wg.Go(func() {
			for range 10 {
				if h.failed(now, failStatus504) {
					turned.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if turned.Load() != 1 || h.consecutive.Load() != 640 {
		t.Errorf("turned %d times, %d failures; want 1 and 640", turned.Load(), h.consecutive.Load())
	}
}

func TestStatusFailure(t *testing.T) {
	for status, want := range map[int]string{502: "status_502", 503: "status_503", 504: "status_504"} {
		if r, ok := statusFailure(status); !ok || failReasonNames[r] != want {
			t.Errorf("%d: %v %v", status, failReasonNames[r], ok)
		}
	}
	for _, status := range []int{200, 204, 301, 404, 429, 500, 501, 505} {
		if _, ok := statusFailure(status); ok {
			t.Errorf("%d counted as the origin's failure", status)
		}
	}
}

// TestUpstreamFailureReasons classifies the errors fasthttp's client
// returns (the end-to-end tests make the real ones).
func TestUpstreamFailureReasons(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fasthttp.ErrTimeout, "timeout"},
		{fasthttp.ErrTLSHandshakeTimeout, "timeout"},
		{fasthttp.ErrDialTimeout, "connect"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, "connect"},
		{fmt.Errorf("wrapped: %w", &net.OpError{Op: "dial", Err: syscall.EHOSTUNREACH}), "connect"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "tls"},
		{x509.HostnameError{Host: "origin"}, "tls"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "tls"},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, "tls"},
		{fasthttp.ErrConnectionClosed, "error"},
		{io.ErrUnexpectedEOF, "error"},
		{errors.New("something else"), "error"},
	}
	for _, tt := range tests {
		if got := failReasonNames[upstreamFailure(tt.err)]; got != tt.want {
			t.Errorf("%v: %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestRetryUpstream(t *testing.T) {
	get, post := &fasthttp.Request{}, &fasthttp.Request{}
	get.Header.SetMethod("GET")
	post.Header.SetMethod("POST")
	tests := []struct {
		req   *fasthttp.Request
		err   error
		retry bool
	}{
		{get, fasthttp.ErrConnectionClosed, true},
		{get, io.EOF, true},
		{get, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{get, fasthttp.ErrTimeout, false},
		{get, &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, false},
		{post, fasthttp.ErrConnectionClosed, false},
	}
	for _, tt := range tests {
		if _, retry := retryUpstream(tt.req, 1, tt.err); retry != tt.retry {
			t.Errorf("%s after %v: retry %v, want %v", tt.req.Header.Method(), tt.err, retry, tt.retry)
		}
	}
}
