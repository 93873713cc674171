package main

import (
	"strings"
	"testing"
	"time"
)

// TestProgress: each tick prints the time since the start, out of the
// budget, and what is left, by the tick's own time (an injected ticker:
// no sleeping); nothing after done.
func TestProgress(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ticks := make(chan time.Time)
	done := make(chan struct{})
	stopped := make(chan struct{})
	var out strings.Builder
	go func() { defer close(stopped); progress(done, ticks, start, time.Minute, "throughput", &out) }()
	for _, d := range []time.Duration{time.Second, 2500 * time.Millisecond, 59 * time.Second, 61 * time.Second} {
		ticks <- start.Add(d) // unbuffered: taken by progress before the next
	}
	close(done)
	<-stopped
	want := "loadtest: throughput: 1s of 1m0s, 59s left\n" +
		"loadtest: throughput: 2s of 1m0s, 58s left\n" +
		"loadtest: throughput: 59s of 1m0s, 1s left\n" +
		"loadtest: throughput: 1m1s of 1m0s, 0s left\n"
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestRemoteTargetNeedsAllowRemote: a -target, -compare or metrics URL
// off this machine is a usage error (exit 2) that names -allow-remote;
// with -allow-remote it is taken and dialled as given.
func TestRemoteTargetNeedsAllowRemote(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-target", "http://10.0.0.1:18080"},
		{"-target", "http://staging.example.com:18080"},
		{"-scenario", "throughput", "-compare", "http://192.0.2.1:19000"},
		{"-scenario", "throughput", "-target-metrics", "http://192.0.2.1:19901/metrics"},
	} {
		code, _, stderr := runTool(t, args...)
		if code != exitError || !strings.Contains(stderr, "is not a loopback address") || !strings.Contains(stderr, "-allow-remote") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming -allow-remote", args, code, stderr)
		}
	}
	for _, tt := range []struct{ raw, addr string }{
		{"http://10.0.0.1:18080", "10.0.0.1:18080"},
		{"http://staging.example.com", "staging.example.com:80"},
		{"http://[2001:db8::1]:18080", "[2001:db8::1]:18080"},
		{"http://127.0.0.1:18080", "127.0.0.1:18080"},
	} {
		got, err := parseRemoteTarget("-target", tt.raw, true)
		if err != nil || got.addr != tt.addr || got.base != "http://"+tt.addr {
			t.Errorf("parseRemoteTarget(%q, allowRemote): got %+v, %v; want addr %s", tt.raw, got, err, tt.addr)
		}
	}
	if m, err := parseRemoteMetricsURL("-target-metrics", "http://192.0.2.1:19901/metrics", true); err != nil || m.addr != "192.0.2.1:19901" {
		t.Errorf("parseRemoteMetricsURL with allowRemote: got %+v, %v", m, err)
	}
	for _, raw := range []string{"https://10.0.0.1", "http://10.0.0.1/prefix", "http://:80"} {
		if got, err := parseRemoteTarget("-target", raw, true); err == nil {
			t.Errorf("parseRemoteTarget(%q, allowRemote): got %+v, want an error", raw, got)
		}
	}
	// Past the check, a run with -allow-remote goes to the target: an
	// address nothing answers on (TEST-NET-1) fails to connect, not as a
	// usage error about loopback.
	code, _, stderr := runTool(t, "-allow-remote", "-target", "http://192.0.2.1:9", "-timeout", "50ms", "-requests", "1")
	if strings.Contains(stderr, "loopback") || code == exitOK {
		t.Errorf("-allow-remote to an address nothing answers on: exit %d, stderr %q; want a connection failure", code, stderr)
	}
}
