package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
)

// fleetToggleLines are the "dry-run toggle from the fleet" lines of a
// node's JSON log, each as its fields.
func fleetToggleLines(t *testing.T, logs *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if e["msg"] == "dry-run toggle from the fleet" {
			out = append(out, e)
		}
	}
	return out
}

// TestFleetDryRunToggleIsLoggedOnEveryNode: a toggle made on node a
// through the admin API is logged by node b when b picks it up from
// Redis, one line per toggle, on and off alike, naming the rule, the new
// state, who and why; node a, which took it, logs its audit line and no
// pickup line; a field deleted from the hash by hand is an off of unknown
// actor; a node started while a toggle is in force logs it once, and no
// old off.
func TestFleetDryRunToggleIsLoggedOnEveryNode(t *testing.T) {
	r := testredis.Start(t)
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	p := dryPolicy(t, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url     = %q\n  timeout = \"1s\"\n}", r.URL()))
	var aLogs, bLogs syncBuffer
	nodes := startDryRunFleetLogged(t, p, clk, []io.Writer{&aLogs, &bLogs})
	a, b := nodes[0], nodes[1]
	// b's polls run in the background too: a direct poll returns once b
	// has applied (and logged) what the hash holds, whichever poll did it.
	poll := func() { b.srv.pollDryRuns(t.Context()) }

	type want struct {
		rule          string
		dryRun        bool
		actor, reason string
		until         string // "" for an off
	}
	check := func(step string, wants ...want) {
		t.Helper()
		got := fleetToggleLines(t, &bLogs)
		if len(got) != len(wants) {
			t.Fatalf("%s: node b logged %d toggle lines, want %d:\n%s", step, len(got), len(wants), bLogs.String())
		}
		for i, w := range wants {
			e := got[i]
			if e["level"] != "WARN" || e["rule"] != w.rule || e["dry_run"] != w.dryRun || e["actor"] != w.actor || e["reason"] != w.reason || e["scope"] != "fleet" {
				t.Errorf("%s: line %d: got %v, want rule %q dry_run %v actor %q reason %q at WARN", step, i, e, w.rule, w.dryRun, w.actor, w.reason)
			}
			if u, _ := e["until"].(string); u != w.until {
				t.Errorf("%s: line %d: until %q, want %q", step, i, u, w.until)
			}
		}
	}

	if r := toggle(t, a.admin, `{"rule": "dry-probe", "dry_run": true, "for": "30m", "reason": "INC-8 false positives"}`); r.status != http.StatusOK {
		t.Fatalf("toggle on: got %d %s", r.status, r.body)
	}
	poll()
	on := want{"dry-probe", true, "alice", "INC-8 false positives", "2026-12-02T00:30:00Z"}
	check("on", on)
	poll() // nothing changed: nothing more
	check("a second poll", on)

	if r := toggle(t, a.admin, `{"rule": "dry-probe", "dry_run": false, "reason": "INC-8 fixed"}`); r.status != http.StatusOK {
		t.Fatalf("toggle off: got %d %s", r.status, r.body)
	}
	poll()
	off := want{"dry-probe", false, "alice", "INC-8 fixed", ""}
	check("off", on, off)

	if r := toggle(t, a.admin, `{"rule": "*", "dry_run": true, "for": "10m", "reason": "rollout"}`); r.status != http.StatusOK {
		t.Fatalf("toggle the node: got %d %s", r.status, r.body)
	}
	poll()
	node := want{"*", true, "alice", "rollout", "2026-12-02T00:10:00Z"}
	check("the whole node", on, off, node)
	if _, err := r.Do("HDEL", "edge:dry-run", "*"); err != nil {
		t.Fatal(err)
	}
	poll()
	check("a field deleted", on, off, node, want{"*", false, "", "its field was deleted from the Redis hash", ""})

	// Node a took every toggle: its audit lines say so, and it logs no
	// pickup of its own toggles (the deleted field is one it picks up).
	a.srv.pollDryRuns(t.Context())
	if got := fleetToggleLines(t, &aLogs); len(got) != 1 || got[0]["rule"] != "*" || got[0]["dry_run"] != false {
		t.Errorf("node a's pickup lines: got %v, want only the deleted field's off", got)
	}
	if n := strings.Count(aLogs.String(), `"msg":"admin dry-run"`); n != 3 {
		t.Errorf("node a's audit lines: got %d, want 3", n)
	}

	// A node that starts with a toggle in force and an old off in the hash
	// logs the toggle, once.
	if r := toggle(t, a.admin, `{"rule": "dry-probe", "dry_run": true, "for": "5m", "reason": "INC-9"}`); r.status != http.StatusOK {
		t.Fatalf("toggle on: got %d %s", r.status, r.body)
	}
	if r := toggle(t, a.admin, `{"rule": "*", "dry_run": false, "reason": "rollout done"}`); r.status != http.StatusOK {
		t.Fatalf("toggle off: got %d %s", r.status, r.body)
	}
	var cLogs syncBuffer
	c := startDryRunFleetLogged(t, p, clk, []io.Writer{&cLogs})[0]
	c.srv.pollDryRuns(t.Context())
	c.srv.pollDryRuns(t.Context())
	got := fleetToggleLines(t, &cLogs)
	if len(got) != 1 || got[0]["rule"] != "dry-probe" || got[0]["dry_run"] != true || got[0]["reason"] != "INC-9" || got[0]["until"] != "2026-12-02T00:05:00Z" {
		t.Errorf("a new node's toggle lines: got %v, want the one toggle in force", got)
	}
}
