package main

import (
	"context"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules/memstore"
)

const cgnatPolicyPath = "testdata/cgnat-crowd.hcl"

// startEdge runs a real edge node and the demo origin in-process on
// loopback listeners of their own, with the policy at path after the
// textual replacements (old, new pairs), and returns the edge's base URL.
func startEdge(t *testing.T, path string, replace ...string) string {
	t.Helper()
	edge, _, _ := startEdgeOrigin(t, path, replace...)
	return edge
}

// startEdgeOrigin is startEdge returning also the demo origin and its base
// URL.
func startEdgeOrigin(t *testing.T, path string, replace ...string) (edgeURL, originURL string, origin *demo.Origin) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s does not contain %q", path, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	p, diags := builtin.Load(path, []byte(s))
	if diags.HasErrors() {
		t.Fatalf("%s: %v", path, diags)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	oln, ln := listenLoopback(t), listenLoopback(t)
	origin = demo.New()
	wg.Go(func() { _ = origin.Serve(ctx, oln) })

	// The policy's own bound, as cmd/edge opens the memory store (the
	// attacks' key flood runs against a small one).
	st, err := memstore.New(memstore.Options{MaxKeys: node.Of(p).Store.MaxKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := gateway.New(gateway.Options{Extensions: builtin.Extensions(), Policy: p, Store: st, Upstream: "http://" + oln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	return "http://" + ln.Addr().String(), "http://" + oln.Addr().String(), origin
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// reportInt returns the first integer group of re in the report.
func reportInt(t *testing.T, out, re string) int64 {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("report lacks /%s/:\n%s", re, out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The period is shortened from 10 s to 2 s, in the policy and the flags
// alike, so a run takes about 2.5 s.
var shortPeriod = []string{`period    = "10s"`, `period    = "2s"`}

// TestCgnatCrowdAgainstARealEdge runs the scenario against a real node on
// cgnat-crowd.hcl: all 500 visitors get an ID, all 4000 crowd requests
// are served, and the cookie-cycling attacker passes its burst and its
// refills, never more, with an ID on each pass.
func TestCgnatCrowdAgainstARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("a real run of a few seconds")
	}
	t.Setenv("EDGE_VISITOR_SECRETS", "loadtest-visitor-secret-0123456789")
	base := startEdge(t, cgnatPolicyPath, shortPeriod...)

	code, out, stderr := runTool(t, "-scenario", "cgnat-crowd", "-target", base, "-period", "2s")
	t.Logf("report:\n%s", out)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr %q, want nothing", stderr)
	}
	for _, want := range []string{
		"  IDs           500 of 500  (answers: 200 ×500)",
		"    sent            4000\n",
		"    served (200)    4000\n",
		"    refused (429)   0\n",
		"    new IDs         0 ",
		"    visitors refused at least once: 0 of 500\n",
		"    all served: yes\n",
		"    held to its bound: yes\n",
		"cgnat-crowd: ok: all 4000 crowd requests served",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	sent := reportInt(t, out, `\n    sent            (\d+)  in `)
	passes := reportInt(t, out, `passes \(200\)    (\d+)  bound`)
	bound := reportInt(t, out, `passes \(200\)    \d+  bound (\d+)`)
	ids := reportInt(t, out, `IDs obtained    (\d+)  bound`)
	refused := reportInt(t, out, `\n    refused \(429\)   (\d+)\n    other           \d+\n    held`)
	if sent != 200 || passes+refused != sent {
		t.Errorf("attacker: sent %d, passes %d, refused %d; want 200 = passes + refused", sent, passes, refused)
	}
	// Its burst at least (it asks 20 times as often as its bucket
	// refills), and never more than the bound: over about 2 s, the burst
	// and about 10 refills of 200 ms, more if a loaded machine stretched
	// the attack.
	if passes < 10 || passes > bound {
		t.Errorf("attacker passes %d, bound %d; want 10 ≤ passes ≤ bound", passes, bound)
	}
	// The mint budget has over 100 IDs left: every pass mints one.
	if ids != passes {
		t.Errorf("attacker got %d IDs for %d passes; want one per pass", ids, passes)
	}
}

// TestCgnatCrowdDetectsATightCeiling: with the default ip_ceiling, 10 ×
// limit = 100 per 2 s (its burst of 100 and 50 a second: about 200 over
// the run, at most 1600 if a loaded machine stretched it to the whole
// -duration), the crowd's 4000 requests cannot all be served, and the
// scenario says so with exit 1.
func TestCgnatCrowdDetectsATightCeiling(t *testing.T) {
	if testing.Short() {
		t.Skip("a real run of a few seconds")
	}
	t.Setenv("EDGE_VISITOR_SECRETS", "loadtest-visitor-secret-0123456789")
	base := startEdge(t, cgnatPolicyPath, append(shortPeriod, "ip_ceiling = 4500", "ip_ceiling = 100")...)

	code, out, stderr := runTool(t, "-scenario", "cgnat-crowd", "-target", base, "-period", "2s", "-ip-ceiling", "100")
	if code != exitMismatch {
		t.Fatalf("exit %d, want %d; stderr %q\n%s", code, exitMismatch, stderr, out)
	}
	if !strings.Contains(stderr, "exceed -ip-ceiling 100:") || !strings.Contains(stderr, "crowd requests served") {
		t.Errorf("stderr %q: want the warning and the failure", stderr)
	}
	refused := reportInt(t, out, `\n    refused \(429\)   (\d+)\n    other           \d+\n    new IDs`)
	if refused < 2000 {
		t.Errorf("crowd refused %d, want over 2000 of 4000:\n%s", refused, out)
	}
	if !strings.Contains(out, "    all served: NO\n") || !strings.Contains(out, "cgnat-crowd: FAIL: ") {
		t.Errorf("report:\n%s", out)
	}
}
