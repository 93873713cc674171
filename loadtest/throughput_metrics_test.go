package main

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/internal/testnet"
)

// withDecisions gives r the decision counts d, as a scrape would.
func withDecisions(r *loadResult, d decisionCounts) *loadResult {
	r.decisions = &d
	return r
}

func TestThroughputReportDecisions(t *testing.T) {
	t.Parallel()
	h := throughputHeader{method: "GET", path: "/api/bench", connections: 4, clients: 100, warmup: time.Second, duration: 2 * time.Second}
	// The Redis-backed node fell back on 253 of its 1203 rule decisions;
	// the memory-backed one's store decided all of them.
	redis := withDecisions(fakeResult(t, "http://127.0.0.1:18080", 2*time.Second, map[int]int64{200: 1000}, repeat(100, 10)),
		decisionCounts{allow: 900, deny: 50, storeErrorAllow: 250, storeErrorDeny: 3})
	memory := withDecisions(fakeResult(t, "http://127.0.0.1:18081", 2*time.Second, map[int]int64{200: 800}, repeat(200, 10)),
		decisionCounts{allow: 780, dryRunDeny: 20})

	var b strings.Builder
	if err := writeThroughputReport(&b, h, []*loadResult{redis, memory}); err != nil {
		t.Fatal(err)
	}
	want := `throughput: GET /api/bench, 4 connections, 100 client addresses, 2s measured per target after a 1s warm-up

                     target                                              compare
url                  http://127.0.0.1:18080                              http://127.0.0.1:18081
requests             1000                                                800
requests/s           500                                                 400
elapsed              2s                                                  2s
200                  1000                                                800
429                  0                                                   0
503                  0                                                   0
other                0                                                   0
errors               0                                                   0
p50                  0.100ms                                             0.200ms
p90                  0.100ms                                             0.200ms
p99                  0.100ms                                             0.200ms
p99.9                0.100ms                                             0.200ms
max                  0.100ms                                             0.200ms
connections          4 opened                                            4 opened
store decisions      950                                                 800
fallback decisions   253 (store_error_allow: 250, store_error_deny: 3)   0
fallback share       21.0%                                               0%

throughput ratio (target/compare): 1.25×
p99 ratio (target/compare): 0.50×

store decisions (allow, deny, dry_run_deny) and fallback decisions (store_error_allow, store_error_deny, the rules' on_store_error answers): edge_decisions_total summed over the rules, from a scrape as the warm-up ended to one after the last answer
target: 253 of 1203 rule decisions (21.0%) were on_store_error fallbacks: the store did not decide every request, so this rate is not its capacity

GET /api/bench, 4 connections, 100 client addresses, 2s measured per target after a 1s warm-up:

| target | requests | req/s | 200 | 429 | 503 | other | errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | store decisions | fallback decisions | fallback share |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| http://127.0.0.1:18080 | 1000 | 500 | 1000 | 0 | 0 | 0 | 0 | 0.100 | 0.100 | 0.100 | 0.100 | 0.100 | 950 | 253 | 21.0% |
| http://127.0.0.1:18081 | 800 | 400 | 800 | 0 | 0 | 0 | 0 | 0.200 | 0.200 | 0.200 | 0.200 | 0.200 | 800 | 0 | 0% |
| target/compare |  | 1.25× |  |  |  |  |  | 0.50× | 0.50× | 0.50× | 0.50× | 0.50× |  |  |  |
`
	if got := b.String(); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}

	// Metrics for the target only: the compare's cells say so; a run in
	// which no rule decided anything is no capacity either.
	idle := withDecisions(fakeResult(t, "http://127.0.0.1:18080", 2*time.Second, map[int]int64{200: 1000}, repeat(100, 10)), decisionCounts{})
	origin := fakeResult(t, "http://127.0.0.1:19000", 2*time.Second, map[int]int64{200: 800}, repeat(200, 10))
	b.Reset()
	if err := writeThroughputRun(&b, h, []*loadResult{idle, origin}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, line := range []string{
		"store decisions      0                        n/a",
		"fallback decisions   0                        n/a",
		"fallback share       n/a                      n/a",
		"target: no rule decided any request (edge_decisions_total did not move): -path matches no rule, or the metrics are another node's; this rate is not the store's capacity",
	} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("report lacks the line %q:\n%s", line, got)
		}
	}
	if strings.Contains(got, "compare:") {
		t.Errorf("report has a note on the compare, which has no metrics:\n%s", got)
	}
}

// decided returns a one-second result at rate ok/s whose node decided
// allow requests in its store and fell back on fallback.
func decided(t *testing.T, base string, ok, allow, fallback int64) *loadResult {
	t.Helper()
	return withDecisions(rateResult(t, base, ok, 0, 0, 100), decisionCounts{allow: allow, storeErrorAllow: fallback})
}

func TestThroughputSummaryFallbacks(t *testing.T) {
	t.Parallel()
	const redis, memory = "http://127.0.0.1:18080", "http://127.0.0.1:18081"
	// The Redis-backed node (target) at 64 connections: its Redis calls
	// time out and its rules fail open, once in three repetitions, and
	// that repetition is its fastest (fail-open forwards uncounted). Its
	// highest median is at 64, but the store's capacity must come from
	// 16.
	levels := []levelResults{
		{connections: 4, runs: [][]*loadResult{
			{decided(t, redis, 200, 210, 0), decided(t, memory, 2000, 2010, 0)},
			{decided(t, redis, 220, 230, 0), decided(t, memory, 2100, 2110, 0)},
		}},
		{connections: 16, runs: [][]*loadResult{
			{decided(t, redis, 800, 810, 0), decided(t, memory, 1900, 1910, 0)},
			{decided(t, redis, 900, 910, 0), decided(t, memory, 1800, 1810, 0)},
		}},
		{connections: 64, runs: [][]*loadResult{
			{decided(t, redis, 1000, 1010, 0), decided(t, memory, 1700, 1710, 0)},
			{decided(t, redis, 3000, 1000, 2010), decided(t, memory, 1600, 1610, 0)},
		}},
	}
	sum := summarize(levels)
	if got := sum[2].targets[0]; !got.scraped || got.stored != 2010 || got.fallbacks != 2010 {
		t.Errorf("target at 64: got scraped %v, stored %d, fallbacks %d; want true, 2010, 2010 (summed over the repetitions)", got.scraped, got.stored, got.fallbacks)
	}
	if pk := peaks(sum); pk[0].connections != 64 {
		t.Fatalf("unfiltered peak of the target at %d connections; the test needs it at 64, the level it must not be taken from", pk[0].connections)
	}

	h := summaryHeader{method: "GET", path: "/api/bench", clients: 100, warmup: 100 * time.Millisecond, duration: time.Second,
		levels: 3, repetitions: 2, bases: []string{redis, memory}}
	var b strings.Builder
	if err := writeThroughputSummary(&b, h, sum); err != nil {
		t.Fatal(err)
	}
	want := `summary: GET /api/bench, 100 client addresses, 3 levels × 2 repetitions, 1s measured per target per level per repetition after a 100ms warm-up
target:  http://127.0.0.1:18080
compare: http://127.0.0.1:18081

connections                    req/s   each repetition   p50       p99       non-2xx   errors   store decisions   fallback decisions
4             target           210     200, 220          0.100ms   0.100ms   0         0        440               0
              compare          2050    2000, 2100        0.100ms   0.100ms   0         0        4120              0
              target/compare   0.10×                     1.00×     1.00×
16            target           850     800, 900          0.100ms   0.100ms   0         0        1720              0
              compare          1850    1900, 1800        0.100ms   0.100ms   0         0        3720              0
              target/compare   0.46×                     1.00×     1.00×
64            target           2000    1000, 3000        0.100ms   0.100ms   0         0        2010              2010 (50.0%)
              compare          1650    1700, 1600        0.100ms   0.100ms   0         0        3320              0
              target/compare   1.21×                     1.00×     1.00×

not valid for capacity: 64 connections, where target made 2010 on_store_error fallback decisions of 4020 (50.0%): the store did not decide every request
peak over levels where the store decided every request: target 850 req/s at 16 connections, compare 2050 req/s at 4 connections; peak ratio (target/compare): 0.41×

req/s: median over the repetitions; p50, p99: medians of the repetitions' percentiles; non-2xx (answers outside 200-299) and errors (no answer): summed over the repetitions.
store decisions (allow, deny, dry_run_deny) and fallback decisions (store_error_allow, store_error_deny: the rules' on_store_error answers; their share of all decisions): edge_decisions_total summed over the rules and the repetitions, each run's from a scrape as its warm-up ended to one after its last answer; n/a: no metrics for that target.

GET /api/bench, 100 client addresses, 3 levels × 2 repetitions, 1s measured per target per level per repetition after a 100ms warm-up; medians over the repetitions:

| connections | target | req/s | each repetition | p50 ms | p99 ms | non-2xx | errors | store decisions | fallback decisions |
|---:|---|---:|---|---:|---:|---:|---:|---:|---:|
| 4 | http://127.0.0.1:18080 | 210 | 200, 220 | 0.100 | 0.100 | 0 | 0 | 440 | 0 |
| 4 | http://127.0.0.1:18081 | 2050 | 2000, 2100 | 0.100 | 0.100 | 0 | 0 | 4120 | 0 |
| 4 | target/compare | 0.10× |  | 1.00× | 1.00× |  |  |  |  |
| 16 | http://127.0.0.1:18080 | 850 | 800, 900 | 0.100 | 0.100 | 0 | 0 | 1720 | 0 |
| 16 | http://127.0.0.1:18081 | 1850 | 1900, 1800 | 0.100 | 0.100 | 0 | 0 | 3720 | 0 |
| 16 | target/compare | 0.46× |  | 1.00× | 1.00× |  |  |  |  |
| 64 | http://127.0.0.1:18080 | 2000 | 1000, 3000 | 0.100 | 0.100 | 0 | 0 | 2010 | 2010 (50.0%) |
| 64 | http://127.0.0.1:18081 | 1650 | 1700, 1600 | 0.100 | 0.100 | 0 | 0 | 3320 | 0 |
| 64 | target/compare | 1.21× |  | 1.00× | 1.00× |  |  |  |  |

Not valid for capacity (fallback decisions, or no rule decision at all): 64 connections.

| peak over levels where the store decided every request | req/s | connections |
|---|---:|---:|
| http://127.0.0.1:18080 | 850 | 16 |
| http://127.0.0.1:18081 | 2050 | 4 |
| target/compare | 0.41× |  |
`
	if got := b.String(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}

	// The compare's fallbacks void a level too; then no level is left:
	// no peak, no ratio, said plainly.
	levels[0].runs[1][1] = decided(t, memory, 2100, 2000, 110)
	levels[1].runs[0][1] = decided(t, memory, 1900, 0, 1910)
	b.Reset()
	if err := writeThroughputSummary(&b, h, summarize(levels)); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, line := range []string{
		"not valid for capacity: 4 connections, where compare made 110 on_store_error fallback decisions of 4120 (2.7%): the store did not decide every request",
		"not valid for capacity: 16 connections, where compare made 1910 on_store_error fallback decisions of 3720 (51.3%): the store did not decide every request",
		"not valid for capacity: 64 connections, where target made 2010 on_store_error fallback decisions of 4020 (50.0%): the store did not decide every request",
		"peak: none: there is no level where the store decided every request, so no rate above is a capacity and there is no peak ratio",
		"Not valid for capacity (fallback decisions, or no rule decision at all): 4, 16, 64 connections.",
		"No level where the store decided every request: no peak, no peak ratio.",
	} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("summary lacks the line %q:\n%s", line, got)
		}
	}
	for _, bad := range []string{"peak ratio (", "req/s at", "peaked at", "| peak"} {
		if strings.Contains(got, bad) {
			t.Errorf("summary without a valid level mentions %q:\n%s", bad, got)
		}
	}
}

func TestCapacityLevels(t *testing.T) {
	t.Parallel()
	ts := func(rate float64, scraped bool, stored, fallbacks int64) targetSummary {
		return targetSummary{rate: rate, scraped: scraped, stored: stored, fallbacks: fallbacks}
	}
	lv := func(connections int, targets ...targetSummary) levelSummary {
		return levelSummary{connections: connections, targets: targets}
	}
	tests := []struct {
		name   string
		levels []levelSummary
		want   []int // the connections of the levels kept
		peak   []int // the peaks' connections over them
	}{
		{"no metrics: every level", []levelSummary{lv(4, ts(10, false, 0, 0)), lv(8, ts(20, false, 0, 0))}, []int{4, 8}, []int{8}},
		{"target fell back at its fastest level", []levelSummary{lv(4, ts(10, true, 5, 0)), lv(8, ts(20, true, 5, 1))}, []int{4}, []int{4}},
		{"compare fell back", []levelSummary{lv(4, ts(10, true, 5, 0), ts(30, true, 5, 0)), lv(8, ts(20, true, 5, 0), ts(40, true, 9, 1))},
			[]int{4}, []int{4, 4}},
		{"compare without metrics is not judged", []levelSummary{lv(4, ts(10, true, 5, 0), ts(30, false, 0, 0)), lv(8, ts(20, true, 5, 0), ts(40, false, 0, 0))},
			[]int{4, 8}, []int{8, 8}},
		{"no rule decided anything", []levelSummary{lv(4, ts(10, true, 0, 0)), lv(8, ts(5, true, 3, 0))}, []int{8}, []int{8}},
		{"every level fell back", []levelSummary{lv(4, ts(10, true, 5, 1)), lv(8, ts(20, true, 0, 1))}, nil, nil},
	}
	for _, tt := range tests {
		kept := capacityLevels(tt.levels)
		var got, peak []int
		for _, lv := range kept {
			got = append(got, lv.connections)
		}
		for _, p := range peaks(kept) {
			peak = append(peak, p.connections)
		}
		if !slices.Equal(got, tt.want) || !slices.Equal(peak, tt.peak) {
			t.Errorf("%s: kept %v with peaks at %v, want %v with peaks at %v", tt.name, got, peak, tt.want, tt.peak)
		}
	}
}

// fakeNode plays an edge node's /metrics for a benchServer, whose every
// request is one decision of the node's rule "api", counted before the
// request is answered, as the edge counts it before proxying. The
// decision is allow, except in the measured part of the runs listed in
// overloaded, where every fourth request is a store_error_allow, as a
// Redis-backed node's is when its store times out. The node tells the
// runs apart by its scrapes, which the tool makes once before the first
// run and then right before and right after each run's measured part:
// after an even number of scrapes 2j, it is in run j's measured part.
type fakeNode struct {
	overloaded []int // runs of this node, 1-based, in which it falls back
	failFrom   int   // from this scrape on (1-based), /metrics answers 503; 0: never

	url string

	mu       sync.Mutex
	requests int64
	counts   decisionCounts
	scrapes  []fakeScrape // what each scrape was answered, in order
}

// fakeScrape is what one scrape of a fakeNode was answered.
type fakeScrape struct {
	counts   decisionCounts // rule "api" plus the constant rule "login"
	requests int64          // requests the node had decided by then
}

// loginDecisions are the counts of a second rule that no request of the
// load matches: constant, so they must cancel out of every difference.
var loginDecisions = decisionCounts{allow: 3, deny: 2}

func startFakeNode(t *testing.T, n *fakeNode) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.url = "http://" + ln.Addr().String() + "/metrics"
	srv := &fasthttp.Server{Handler: n.serveMetrics}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() { _ = srv.Shutdown(); wg.Wait() })
	return n
}

func (n *fakeNode) decide() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.requests++
	s := len(n.scrapes)
	if s >= 2 && s%2 == 0 && slices.Contains(n.overloaded, s/2) && n.requests%4 == 0 {
		n.counts.storeErrorAllow++
		return
	}
	n.counts.allow++
}

func (n *fakeNode) serveMetrics(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) != "/metrics" {
		ctx.Error("not found\n", fasthttp.StatusNotFound)
		return
	}
	n.mu.Lock()
	c, reqs := n.counts, n.requests
	sc := fakeScrape{counts: c, requests: reqs}
	sc.counts.allow += loginDecisions.allow
	sc.counts.deny += loginDecisions.deny
	n.scrapes = append(n.scrapes, sc)
	fail := n.failFrom > 0 && len(n.scrapes) >= n.failFrom
	n.mu.Unlock()
	if fail {
		ctx.Error("overloaded\n", fasthttp.StatusServiceUnavailable)
		return
	}
	// As promhttp writes it, but for the label order of one line and a
	// comment.
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8; escaping=underscores")
	fmt.Fprintf(ctx, `# HELP edge_decisions_total Decisions of each rule on the requests it matched, by rule and decision (allow, deny, dry_run_deny, store_error_allow, store_error_deny).
# TYPE edge_decisions_total counter
edge_decisions_total{decision="allow",rule="api"} %d
edge_decisions_total{decision="deny",rule="api"} 0
edge_decisions_total{decision="dry_run_deny",rule="api"} 0
edge_decisions_total{rule="api",decision="store_error_allow"} %d
edge_decisions_total{decision="store_error_deny",rule="api"} 0
edge_decisions_total{decision="allow",rule="login"} %d
edge_decisions_total{decision="deny",rule="login"} %d
# a fake node
# HELP edge_requests_total Requests the edge decided, by verdict (forward, refuse_limit, refuse_forbidden, reject_missing_identity, unavailable).
# TYPE edge_requests_total counter
edge_requests_total{verdict="forward"} %d
edge_requests_total{verdict="refuse_limit"} 0
# HELP edge_store_errors_total Store calls that failed or timed out (breaker probes included).
# TYPE edge_store_errors_total counter
edge_store_errors_total %d
`, c.allow, c.storeErrorAllow, loginDecisions.allow, loginDecisions.deny, reqs, c.storeErrorAllow)
}

func (n *fakeNode) scraped() []fakeScrape {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.scrapes)
}

// TestThroughputMetricsEndToEnd runs the tool at 2 levels × 2
// repetitions against two servers standing for a Redis-backed node
// (target), which falls back on every fourth request at 5 connections,
// and a memory-backed one (compare), with a fake /metrics each, and
// checks that every run's report gives exactly the difference of the two
// scrapes around it, that those scrapes bracket the run, and that the
// summary leaves the level with fallbacks out of the peak.
func TestThroughputMetricsEndToEnd(t *testing.T) {
	t.Parallel()
	var log arrivalLog
	redisNode := startFakeNode(t, &fakeNode{overloaded: []int{2, 4}}) // its runs at 5 connections
	memNode := startFakeNode(t, &fakeNode{})
	redis := serveBench(t, &benchServer{t: t, method: "GET", uri: "/api/bench", log: &log, name: "redis", node: redisNode})
	memory := serveBench(t, &benchServer{t: t, method: "GET", uri: "/api/bench", log: &log, name: "memory", node: memNode})
	levels := []int64{2, 5} // at most 5: benchServer drops the sixth client's request
	code, stdout, stderr := runTool(t, "-scenario", "throughput", "-target", redis.url(), "-compare", memory.url(),
		"-target-metrics", redisNode.url, "-compare-metrics", strings.TrimSuffix(memNode.url, "/metrics"),
		"-connections", "2,5", "-repeat", "2", "-duration", "150ms", "-warmup", "50ms", "-clients", "20")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstderr: %s\nstdout:\n%s", code, stderr, stdout)
	}
	t.Logf("output:\n%s", stdout)

	title := regexp.MustCompile(`(?m)^throughput, repetition \d of 2, level \d of 2: GET /api/bench, (\d+) connections, .*$`)
	summaryAt := strings.Index(stdout, "\nsummary: ")
	heads := title.FindAllStringSubmatchIndex(stdout, -1)
	if summaryAt < 0 || len(heads) != 4 {
		t.Fatalf("want 4 run reports and a summary:\n%s", stdout)
	}
	nodes := []*fakeNode{redisNode, memNode}
	scrapes := [][]fakeScrape{redisNode.scraped(), memNode.scraped()}
	for k, sc := range scrapes {
		if len(sc) != 1+2*len(heads) {
			t.Fatalf("node %d was scraped %d times, want once before the first run and twice per run: %d", k, len(sc), 1+2*len(heads))
		}
	}
	segs := log.segments()
	if len(segs) != 2*len(heads) {
		t.Fatalf("the servers saw %d stretches of requests, want %d: %v", len(segs), 2*len(heads), segs)
	}
	row := func(block, re string) [2]int64 {
		m := regexp.MustCompile(`(?m)^` + re + `$`).FindStringSubmatch(block)
		if m == nil {
			t.Fatalf("run report lacks %s:\n%s", re, block)
		}
		return [2]int64{atoi(t, m[1]), atoi(t, m[2])}
	}
	var cum [2]int64                 // requests each server received up to the current run
	fallbacks := make([][2]int64, 2) // per level (index), per target: summed over the repetitions
	stored := make([][2]int64, 2)
	for i, hd := range heads {
		end := summaryAt
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		block := stdout[hd[0]:end]
		conns := atoi(t, stdout[hd[2]:hd[3]])
		l := slices.Index(levels, conns)
		requests := row(block, `requests +(\d+) +(\d+)`)
		gotStored := row(block, `store decisions +(\d+) +(\d+)`)
		gotFallbacks := row(block, `fallback decisions +(\d+)(?: \(store_error_allow: \d+\))? +(\d+)(?: \(store_error_allow: \d+\))?`)
		for k := range nodes {
			before, after := scrapes[k][1+2*i], scrapes[k][2+2*i]
			want, err := after.counts.since(before.counts)
			if err != nil {
				t.Fatal(err)
			}
			if gotStored[k] != want.stored() || gotFallbacks[k] != want.fallbacks() {
				t.Errorf("run %d, target %d: reported %d store and %d fallback decisions; the scrapes around it differ by %d and %d",
					i+1, k, gotStored[k], gotFallbacks[k], want.stored(), want.fallbacks())
			}
			// Each rule decision here is a request: the after-scrape saw
			// every request of the run (all answered), the before-scrape
			// at least those that opened the connections, and between
			// them at most the measured ones and one in flight per
			// connection as the warm-up ended.
			seg := segs[2*i+k]
			cum[k] += seg.n
			if after.requests != cum[k] {
				t.Errorf("run %d, target %d: the scrape after it saw %d requests, want all %d the server had received by its end", i+1, k, after.requests, cum[k])
			}
			if before.requests < cum[k]-seg.n+conns || after.requests-before.requests > requests[k]+conns || after.requests == before.requests {
				t.Errorf("run %d, target %d: the scrapes saw %d and %d requests; want at least %d (the connections' openings) before, and between them 1 to %d (measured + connections)",
					i+1, k, before.requests, after.requests, cum[k]-seg.n+conns, requests[k]+conns)
			}
			stored[l][k] += want.stored()
			fallbacks[l][k] += want.fallbacks()
		}
		// The Redis node fell back in its runs at 5 connections only.
		if overloaded := conns == 5; (gotFallbacks[0] > 0) != overloaded || gotFallbacks[1] != 0 {
			t.Errorf("run %d at %d connections: fallbacks %v; want the target's only at 5 connections, the compare's none", i+1, conns, gotFallbacks)
		}
		if note := "target: " + strconv.FormatInt(gotFallbacks[0], 10) + " of "; (conns == 5) != strings.Contains(block, "\n"+note) {
			t.Errorf("run %d at %d connections: the note %q is there: %v; want it only at 5 connections:\n%s", i+1, conns, note, strings.Contains(block, note), block)
		}
	}

	summary := stdout[summaryAt+1:]
	for l, conns := range levels {
		for k, label := range []string{"target", "compare"} {
			lead := ` +`
			if k == 0 {
				lead = strconv.FormatInt(conns, 10) + ` +`
			}
			// The level's number opens its first row only: the compare's
			// rows are told apart by their order.
			all := regexp.MustCompile(`(?m)^`+lead+label+` +\d+ +\d+, \d+ .* (\d+) +(\d+)(?: \(\d+\.\d%\))?$`).FindAllStringSubmatch(summary, -1)
			if want := map[int]int{0: 1, 1: len(levels)}[k]; len(all) != want {
				t.Fatalf("summary has %d %s rows like %s's at %d connections, want %d:\n%s", len(all), label, label, conns, want, summary)
			}
			m := all[0]
			if k == 1 {
				m = all[l]
			}
			if atoi(t, m[1]) != stored[l][k] || atoi(t, m[2]) != fallbacks[l][k] {
				t.Errorf("summary, %s at %d connections: %s store and %s fallback decisions, want the runs' sums %d and %d",
					label, conns, m[1], m[2], stored[l][k], fallbacks[l][k])
			}
		}
	}
	notValid := fmt.Sprintf("not valid for capacity: 5 connections, where target made %d on_store_error fallback decisions of %d (%s): the store did not decide every request",
		fallbacks[1][0], fallbacks[1][0]+stored[1][0], fmtShare(fallbacks[1][0], fallbacks[1][0]+stored[1][0]))
	if !strings.Contains(summary, "\n"+notValid+"\n") || strings.Contains(summary, "not valid for capacity: 2 connections") {
		t.Errorf("summary does not mark 5 connections, and only it, as not valid for capacity (want %q):\n%s", notValid, summary)
	}
	// Both peaks come from 2 connections, the one level left, whatever
	// the rates at 5.
	if !regexp.MustCompile(`(?m)^peak over levels where the store decided every request: target \d+ req/s at 2 connections, compare \d+ req/s at 2 connections; peak ratio \(target/compare\): \d+\.\d\d×$`).MatchString(summary) {
		t.Errorf("summary's peak is not over 2 connections only:\n%s", summary)
	}
	if strings.Contains(summary, "peaked at the highest level") {
		t.Errorf("summary says a target peaked at 5 connections, which is left out:\n%s", summary)
	}
}

func TestThroughputMetricsUsageErrors(t *testing.T) {
	t.Parallel()
	runUsageErrors(t, []string{"-scenario", "throughput", "-target", "http://127.0.0.1:1"}, []usageError{
		{"remote target metrics", []string{"-target-metrics", "http://192.0.2.1:19901/metrics"},
			`-target-metrics "http://192.0.2.1:19901/metrics": host "192.0.2.1" is not a loopback address`},
		{"remote compare metrics", []string{"-compare", "http://127.0.0.1:1", "-compare-metrics", "http://example.com/metrics"},
			`-compare-metrics "http://example.com/metrics": host "example.com" is not a loopback address`},
		{"https", []string{"-target-metrics", "https://127.0.0.1:19901/metrics"}, "-target-metrics \"https://127.0.0.1:19901/metrics\": scheme must be http"},
		{"query", []string{"-target-metrics", "http://127.0.0.1:19901/metrics?name[]=x"}, "want a URL such as http://127.0.0.1:19901/metrics"},
		{"compare metrics without compare", []string{"-compare-metrics", "http://127.0.0.1:19902/metrics"}, "-compare-metrics needs -compare"},
		{"for another scenario", []string{"-scenario", "seed-trace", "-target-metrics", "http://127.0.0.1:19901/metrics"},
			"-target-metrics and -compare-metrics are for -scenario throughput only"},
	})
}

func TestThroughputBudgetMetrics(t *testing.T) {
	t.Parallel()
	cfg := config{timeout: time.Second, warmup: time.Second, duration: 10 * time.Second, levels: []int{8, 16}, repeat: 3,
		compare: target{addr: "127.0.0.1:1", base: "http://127.0.0.1:1"}}
	per := 2*time.Second + time.Second + 10*time.Second + time.Second + time.Second // 15s per run, as without metrics
	const runs = 2 * 3
	// Per target with metrics: two scrapes per run and one before the
	// first, each at most -timeout.
	scrapes := (2*runs + 1) * time.Second
	withTarget, withBoth := cfg, cfg
	withTarget.target.metrics = metricsSource{url: "http://127.0.0.1:2/metrics"}
	withBoth.target.metrics = withTarget.target.metrics
	withBoth.compare.metrics = metricsSource{url: "http://127.0.0.1:3/metrics"}
	for _, tt := range []struct {
		name string
		cfg  config
		want time.Duration
	}{
		{"none", cfg, 2 * runs * per},
		{"target", withTarget, 2*runs*per + scrapes},
		{"both", withBoth, 2*runs*per + 2*scrapes},
	} {
		if got := throughputBudget(tt.cfg); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestThroughputMetricsScrapeFails checks that a scrape that fails fails
// the run, before any load when it is the first, at once when it is the
// one as the warm-up ends, and before the compare when it is the one
// after the target's run.
func TestThroughputMetricsScrapeFails(t *testing.T) {
	t.Parallel()
	free := "http://" + testnet.DeadAddr(t) + "/metrics"
	garbage := startMetricsPage(t, metricsPage{200, "text/plain; version=0.0.4", edgeRequests + "edge_decisions_total{decision=\"allow\" 1\n"})

	tests := []struct {
		name        string
		metrics     func(t *testing.T) (url string, scrapes func() int)
		duration    time.Duration
		wantErr     string
		wantLoad    bool // the target got the load
		wantScrapes int  // the fake node's scrapes, failed ones included
		midRun      bool // the scrape fails while the load runs, which must stop it
	}{
		{"refused before the first run", func(*testing.T) (string, func() int) { return free, nil },
			10 * time.Second, "scraping -target-metrics " + free + ": ", false, 0, false},
		{"unparsable", func(*testing.T) (string, func() int) { return garbage, nil },
			10 * time.Second, "scraping -target-metrics " + garbage + ": reading the page: text format parsing error in line 5", false, 0, false},
		// A 10 s run that went on after its scrape failed would take at
		// least that long.
		{"answers 503 as the warm-up ends", func(t *testing.T) (string, func() int) {
			n := startFakeNode(t, &fakeNode{failFrom: 2})
			return n.url, func() int { return len(n.scraped()) }
		}, 10 * time.Second, ": answered 503, want 200", true, 2, true},
		{"answers 503 after the run", func(t *testing.T) (string, func() int) {
			n := startFakeNode(t, &fakeNode{failFrom: 3})
			return n.url, func() int { return len(n.scraped()) }
		}, 100 * time.Millisecond, ": answered 503, want 200", true, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			edge := startBenchServer(t, "GET", "/api/bench", 0)
			origin := startBenchServer(t, "GET", "/api/bench", 0)
			url, scrapes := tt.metrics(t)
			start := time.Now()
			code, stdout, stderr := runTool(t, "-scenario", "throughput", "-target", edge.url(), "-target-metrics", url,
				"-compare", origin.url(), "-duration", tt.duration.String(), "-warmup", "50ms", "-connections", "2")
			took := time.Since(start)
			if code != exitError || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitError, tt.wantErr)
			}
			if tt.wantLoad && !strings.HasPrefix(stderr, "loadtest: throughput: measuring "+edge.url()+": scraping -target-metrics "+url+": ") {
				t.Errorf("stderr %q does not say which run and which scrape failed", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
			if got := edge.received.Load(); (got > 0) != tt.wantLoad {
				t.Errorf("the target received %d requests; want some: %v", got, tt.wantLoad)
			}
			if got := origin.received.Load(); got != 0 {
				t.Errorf("the compare received %d requests after the target's run failed", got)
			}
			if tt.midRun && took >= tt.duration {
				t.Errorf("the run took %v: it went on after its scrape failed", took)
			}
			if scrapes != nil {
				if got := scrapes(); got != tt.wantScrapes {
					t.Errorf("the node was scraped %d times, want %d (the last one failing)", got, tt.wantScrapes)
				}
			}
		})
	}
}

// TestCapacityProblemsWording: a level where a target with metrics made no
// rule decision says why (no rule matched), not that the store failed; one
// with fallbacks says the store did not decide every request.
func TestCapacityProblemsWording(t *testing.T) {
	lv := levelSummary{connections: 8, targets: []targetSummary{
		{base: "http://127.0.0.1:1", scraped: true},
		{base: "http://127.0.0.1:2", scraped: true, stored: 90, fallbacks: 10},
	}}
	got := lv.capacityProblems()
	want := []string{
		"target made no rule decisions: -path matches no rule there, so the store decided nothing",
		"compare made 10 on_store_error fallback decisions of 100 (10.0%): the store did not decide every request",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
