package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/nodestore"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// metricsPolicy limits /api/bench per client address far above what a
// short run sends: every request is one decision of the rule "api",
// allowed, and with on_store_error left at its default for a rule that
// is not sensitive, "allow": failing open when the store cannot decide.
const metricsPolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32"]
}

rule "api" {
  paths     = ["/api/bench"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 1000000
  period    = "1s"
}
`

// errStoreDown is downStore's answer to every call.
var errStoreDown = errors.New("store down")

// downStore is a store that never answers, as Redis does for a node that
// has overloaded it: every call times out.
type downStore struct{}

func (downStore) Take(context.Context, time.Time, []rules.Op, []rules.Result) error {
	return errStoreDown
}

func (downStore) Close() error { return nil }

var _ rules.Store = downStore{}

// startMetricsEdge runs a real edge node on metricsPolicy and st, with the
// demo origin behind it and its admin listener, and returns the node's
// base URL and its metrics URL.
func startMetricsEdge(t *testing.T, st rules.Store, collectors []prometheus.Collector) (base, metrics string) {
	t.Helper()
	p, diags := builtin.Load("metrics.hcl", []byte(metricsPolicy))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	oln, ln, aln := listenLoopback(t), listenLoopback(t), listenLoopback(t)
	origin := demo.New()
	wg.Go(func() { _ = origin.Serve(ctx, oln) })
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Collectors: collectors, Upstream: "http://" + oln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	wg.Go(func() { _ = srv.ServeAdmin(ctx, aln) })
	return "http://" + ln.Addr().String(), "http://" + aln.Addr().String() + "/metrics"
}

// TestThroughputMetricsRealNodes measures a real node whose store is down
// (it fails open on every request) against one on the memory store, each
// with its real /metrics, and expects the report to say that every
// decision of the first was a fallback and none of the second's.
func TestThroughputMetricsRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two edge nodes under load")
	}
	t.Parallel()
	fc, err := failclosed.New(downStore{}, failclosed.Options{NoBackgroundProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	down, downMetrics := startMetricsEdge(t, fc, nodestore.StoreMetrics(fc))
	ms, err := memstore.New(memstore.Options{MaxKeys: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	memory, memoryMetrics := startMetricsEdge(t, ms, nil)

	// 2s windows: the tool refuses a measurement whose metrics scrape
	// outlasted the window, which a busy machine can make of 200ms.
	code, stdout, stderr := runTool(t, "-scenario", "throughput", "-target", down, "-target-metrics", downMetrics,
		"-compare", memory, "-compare-metrics", memoryMetrics, "-duration", "2s", "-warmup", "100ms", "-connections", "2", "-clients", "20")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstderr: %s\nstdout:\n%s", code, stderr, stdout)
	}
	requests := regexp.MustCompile(`(?m)^requests +(\d+) +(\d+)$`).FindStringSubmatch(stdout)
	stored := regexp.MustCompile(`(?m)^store decisions +(\d+) +(\d+)$`).FindStringSubmatch(stdout)
	fallbacks := regexp.MustCompile(`(?m)^fallback decisions +(\d+) \(store_error_allow: (\d+)\) +(\d+)$`).FindStringSubmatch(stdout)
	if requests == nil || stored == nil || fallbacks == nil || !regexp.MustCompile(`(?m)^fallback share +100% +0%$`).MatchString(stdout) {
		t.Fatalf("want the down node's every decision a store_error_allow and none of the memory node's:\n%s", stdout)
	}
	// One rule, so one decision per request: between the scrapes, at
	// most the measured requests and one warm-up request in flight per
	// connection as the first scrape was answered (measured requests
	// decided before it are not counted).
	for k, n := range []string{fallbacks[1], stored[2]} {
		got, measured := atoi(t, n), atoi(t, requests[1+k])
		if got < 1 || got > measured+2 {
			t.Errorf("target %d: %d decisions for %d measured requests on 2 connections; want 1 to %d", k, got, measured, measured+2)
		}
	}
	if stored[1] != "0" || fallbacks[3] != "0" {
		t.Errorf("store decisions %s of the down node, fallbacks %s of the memory node; want 0 and 0:\n%s", stored[1], fallbacks[3], stdout)
	}
	if !strings.Contains(stdout, "\ntarget: "+fallbacks[1]+" of "+fallbacks[1]+" rule decisions (100%) were on_store_error fallbacks") || strings.Contains(stdout, "\ncompare: ") {
		t.Errorf("report does not note the target's fallbacks, or notes the compare's:\n%s", stdout)
	}
}
