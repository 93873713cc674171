package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// benchPolicyPath is the bench policy of bench/run.sh, relative to this
// package's directory.
const benchPolicyPath = "../bench/policy.hcl"

// resultFields parses the report's result line into its key=value pairs.
func resultFields(t *testing.T, out string) map[string]string {
	t.Helper()
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "result: ")
		if !ok {
			continue
		}
		m := make(map[string]string)
		for _, kv := range strings.Fields(rest) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("result field %q is not key=value", kv)
			}
			m[k] = v
		}
		return m
	}
	t.Fatalf("no result line in\n%s", out)
	return nil
}

func fieldInt(t *testing.T, m map[string]string, k string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(m[k], 10, 64)
	if err != nil {
		t.Fatalf("result %s=%q: %v", k, m[k], err)
	}
	return n
}

// TestPlainAgainstARealEdgeOnTheBenchPolicy: plain's closed and open loops
// through a real edge node on bench/policy.hcl in front of the demo
// origin: every request answered 200 (the bench policy never refuses its
// load), the open loop's requests are its schedule's, and the report's
// result line says so.
func TestPlainAgainstARealEdgeOnTheBenchPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	edge, _, origin := startEdgeOrigin(t, benchPolicyPath)
	base := []string{"-scenario", "plain", "-target", edge, "-connections", "8", "-warmup", "100ms", "-duration", "400ms", "-timeout", "5s"}

	code, out, stderr := runTool(t, base...)
	if code != exitOK || stderr != "" {
		t.Fatalf("closed loop: exit %d, stderr %q\n%s", code, stderr, out)
	}
	wantInReport(t, out, "plain: GET /api/bench, closed loop, 8 connections, 1000 client addresses, 100 API keys, 400ms measured after a 100ms warm-up\n", "connections   8 opened\n")
	m := resultFields(t, out)
	if n := fieldInt(t, m, "requests"); n == 0 || fieldInt(t, m, "2xx") != n || m["non2xx"] != "0" || m["errors"] != "0" || m["mode"] != "closed" {
		t.Errorf("closed loop: %v, want every request answered 2xx", m)
	}

	code, out, stderr = runTool(t, append(base, "-rate", "500")...)
	if code != exitOK || stderr != "" {
		t.Fatalf("open loop: exit %d, stderr %q\n%s", code, stderr, out)
	}
	wantInReport(t, out, "open loop at 500 req/s over 8 connections", "due           200 (the schedule's requests in the window)\n")
	m = resultFields(t, out)
	n := fieldInt(t, m, "requests")
	if n+fieldInt(t, m, "missed") != 200 || fieldInt(t, m, "2xx") != n || m["errors"] != "0" || m["mode"] != "open" || m["rate"] != "500" {
		t.Errorf("open loop: %v, want the 200 due requests, each answered 2xx", m)
	}
	if hits := origin.Hits()["/api/bench"]; hits < n {
		t.Errorf("the origin saw %d requests, want at least the %d measured: the edge forwards every one", hits, n)
	}
}

// TestMixedAgainstARealEdge: mixed through a real edge on the shipped
// policies.hcl, an open loop so the blend's size does not depend on the
// machine's speed (1000 requests, about 40 stuffing logins from each of
// two attackers, whose per-client login limit is 5): every kind of the
// blend is sent and answered, the attackers are refused, and some
// legitimate API calls get through.
func TestMixedAgainstARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	edge, _, _ := startEdgeOrigin(t, "../policies.hcl")
	code, out, stderr := runTool(t, "-scenario", "mixed", "-target", edge, "-connections", "8", "-rate", "2000", "-warmup", "100ms", "-duration", "500ms", "-timeout", "5s", "-clients", "5000", "-attackers", "2")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, out)
	}
	rows := make(map[string][]int64)
	row := regexp.MustCompile(`(?m)^([a-z-]+)\s+(\d+)%\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s`)
	for _, g := range row.FindAllStringSubmatch(out, -1) {
		var v []int64
		for _, s := range g[3:9] {
			n, _ := strconv.ParseInt(s, 10, 64)
			v = append(v, n)
		}
		rows[g[1]] = v // requests, 2xx, 4xx, 429, other, errors
	}
	for _, k := range mixKinds {
		v, ok := rows[k.name]
		if !ok || v[0] == 0 || v[5] != 0 {
			t.Errorf("kind %s: %v, want requests answered", k.name, v)
		}
	}
	if v := rows["stuffing"]; len(v) == 6 && v[3] == 0 {
		t.Errorf("stuffing: %v, want 429s", v)
	}
	if v := rows["api-read"]; len(v) == 6 && v[1] == 0 {
		t.Errorf("api-read: %v, want some through", v)
	}
	att := regexp.MustCompile(`attacking\s+(\d+) requests, (\d+) refused`).FindStringSubmatch(out)
	if att == nil || att[2] == "0" {
		t.Errorf("attacking: %v, want refusals", att)
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}
