package main

import (
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// inflightPolicy shortens the edge's upstream_timeout and the login
// concurrency rule's lease, so that in-flight's timeouts case waits 2 s
// for its 504s and 12 s for their leases rather than the shipped 10 s and
// 30 s: the semantics are the shipped policy's (lease longer than
// upstream_timeout, a timed-out login keeping its slot until its lease
// ends), only the durations shrink. The lease leaves 10 s of slack over
// the timeouts: a held phase longer than a lease widens the bound by a
// limit, which a stall on two busy cores must not do.
var inflightPolicy = []string{
	"  max_body_bytes = 65536\n", "  max_body_bytes = 65536\n  upstream_timeout = \"2s\"\n",
	"  lease     = \"30s\"\n", "  lease     = \"12s\"\n",
}

// TestAttacksInFlightDetectsBreaches: a node whose login concurrency rule
// is in dry_run (it takes and gives back slots, refuses nothing) while the
// tool reads the enforcing one lets every login of a wave through, and
// every case says BREACH against the limit of 10; the slots-back checks,
// whose budget the extra logins spent, say why they were skipped.
func TestAttacksInFlightDetectsBreaches(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	strict := writeAttacksPolicy(t, inflightPolicy...)
	weak := writeAttacksPolicy(t, append(append([]string(nil), inflightPolicy...), dryRun("login-in-flight-per-ip")...)...)
	edge, origin, _ := startEdgeOrigin(t, weak)
	code, out, stderr := runAttacksTool(t, edge, origin, strict, "-classes", "in-flight")
	if code != exitMismatch {
		t.Fatalf("exit %d, want %d; stderr %q\n%s", code, exitMismatch, stderr, out)
	}
	got := map[string][]string{}
	for _, m := range attackLine.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2:]
	}
	for _, tt := range []struct{ name, gain string }{
		{"in-flight/parallel", "20"},  // the whole first wave at the origin
		{"in-flight/spellings", "20"}, // every spelling alike
		{"in-flight/timeouts", "30"},  // the first wave timed out, still held, and 10 more
		{"in-flight/hang-ups", "30"},  // hung up on, still held, and 10 more
	} {
		if g := got[tt.name]; g == nil || g[0] != tt.gain || g[1] != "10" || g[4] != "BREACH" {
			t.Errorf("%s: got %q, want gain %s bound 10 BREACH", tt.name, g, tt.gain)
		}
	}
	for _, name := range []string{"timeouts-leaked", "hang-ups-leaked"} {
		if want := "attack: in-flight/" + name + " skipped: the client's login budget was spent"; !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", out, stderr)
	}
}

// TestInflightBound: the in-flight bound is, per concurrency rule, the
// logins it does not hold plus min(logins, limit) per key, the least over
// the rules; a held phase longer than the lease adds a limit per lease; a
// refused login counts nothing.
func TestInflightBound(t *testing.T) {
	op := func(key byte, limit int64, lease time.Duration) constraint {
		return constraint{role: 2, name: "login-in-flight", key: rules.Key{key}, op: rules.Op{Key: rules.Key{key}, Limit: limit, PeriodUS: lease.Microseconds(), Algorithm: rules.Distinct}}
	}
	held := func(cs ...constraint) canonVerdict { return canonVerdict{inflight: cs} }
	many := func(n int, v canonVerdict) []canonVerdict {
		out := make([]canonVerdict, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	lease := 5 * time.Second
	for _, tt := range []struct {
		name string
		vs   []canonVerdict
		span time.Duration
		want int64
	}{
		{"one key", many(30, held(op(1, 10, lease))), time.Second, 10},
		{"fewer than the limit", many(4, held(op(1, 10, lease))), time.Second, 4},
		{"two keys", append(many(15, held(op(1, 10, lease))), many(15, held(op(2, 10, lease)))...), time.Second, 20},
		{"not held", append(many(15, held(op(1, 10, lease))), many(3, held())...), time.Second, 13},
		{"refused", append(many(15, held(op(1, 10, lease))), many(3, canonVerdict{refused: true})...), time.Second, 10},
		{"longer than the lease", many(30, held(op(1, 10, lease))), lease + time.Second, 20},
		{"no rule", many(7, held()), time.Second, 7},
	} {
		ir := &inflightRun{verdicts: tt.vs}
		if got := ir.bound(tt.span); got.bound != tt.want {
			t.Errorf("%s: bound %d (%s), want %d", tt.name, got.bound, got.why, tt.want)
		}
	}
}
