package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/nodestore"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/leasestore"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// opsPolicy has a limited API keyed by a header, a dry-run rule keyed by
// the route (so each path is a key), a sensitive login and a visitor rule.
const opsPolicy = `
edge {
  trusted_proxies = ["127.0.0.1/32", "::1/128"]
}
visitor {
  cookie      = "__edge_vid"
  secret_env  = "EDGE_TEST_OPS_VISITOR_SECRETS_UNSET"
  mint_limit  = 1000000
  mint_period = "1m"
}
rule "api-per-key" {
  paths  = ["/api/*"]
  key    = ["header:X-Api-Key"]
  limit  = 2
  period = "1m"
  missing_identity = "skip"
}
rule "api-per-path" {
  paths   = ["/api/*"]
  key     = ["route"]
  limit   = 1
  period  = "1m"
  dry_run = true
}
rule "login" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 2
  period    = "1m"
  sensitive = true
}
rule "pages-per-visitor" {
  paths  = ["/trace/*"]
  key    = ["visitor"]
  limit  = 1000000
  period = "1m"
}
`

func loadOpsPolicy(t *testing.T) *rules.Policy {
	t.Helper()
	p, diags := builtin.Load("ops.hcl", []byte(opsPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// series gathers the node's registry: every series as name{label="value",…}.
func series(t *testing.T, n *node) map[string]bool {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			sort.Strings(ls)
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = true
		}
	}
	return out
}

// TestMetricCardinalityIsBounded: a flood of 2000 requests with distinct
// keys, paths, client addresses and spoofed visitor cookies adds no series
// to any metric (the "no label takes a request's value"): the
// series after the flood are exactly those after one request of each
// kind, and no label value is anything a request sent.
func TestMetricCardinalityIsBounded(t *testing.T) {
	p := loadOpsPolicy(t)
	n := startNode(t, p, nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	base := "http://" + n.addr
	send := func(i int) {
		xff := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		switch i % 4 {
		case 0:
			do(t, "GET", fmt.Sprintf("%s/api/flood-%d", base, i), "", "X-Api-Key", fmt.Sprintf("key-%d", i), "X-Forwarded-For", xff)
		case 1:
			do(t, "POST", base+"/login", `{"user":"u"}`, "X-Forwarded-For", xff)
		case 2:
			do(t, "GET", fmt.Sprintf("%s/trace/page?flood=%d", base, i), "", "X-Forwarded-For", xff, "Cookie", fmt.Sprintf("__edge_vid=flood-%d", i))
		case 3:
			do(t, "GET", fmt.Sprintf("%s/nowhere-flood-%d", base, i), "", "X-Forwarded-For", xff)
		}
	}
	// One request of each kind, twice (so the limits refuse), and a
	// malformed one.
	for i := range 8 {
		send(i)
	}
	if r := raw(t, n.addr, "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n"); rawStatus(t, r) != 400 {
		t.Fatalf("malformed request: got %q", r)
	}
	before := series(t, n)
	for i := 8; i < 2000; i++ {
		send(i)
	}
	after := series(t, n)

	for s := range after {
		if !before[s] {
			t.Errorf("the flood added series %s", s)
		}
	}
	names := map[string]bool{noRoute: true}
	for _, r := range p.Rules {
		names[r.Name] = true
	}
	perFamily := map[string]int{}
	for s := range after {
		perFamily[s[:strings.IndexByte(s, '{')]]++
		for _, marker := range []string{"flood", "key-", "10.", "nowhere", "/api", "/login", "/trace/page"} {
			if strings.Contains(s, marker) {
				t.Errorf("series %s carries a request's value (%q)", s, marker)
			}
		}
	}
	// Every family is bounded by the policy: at most its rules (and the
	// (none) route) times a fixed list of values.
	limit := (len(p.Rules) + 1) * (rules.NumOutcomes + len(statusClasses))
	for f, c := range perFamily {
		if c > limit {
			t.Errorf("%s has %d series, want at most %d", f, c, limit)
		}
	}
	for _, f := range []string{"edge_decisions_total", "edge_http_responses_total", "edge_reloads_total", "edge_visitor_ids_minted_total", "edge_store_call_duration_seconds"} {
		if perFamily[f] == 0 {
			t.Errorf("no %s series", f)
		}
	}
	api := 0.0
	for _, c := range statusClasses {
		api += testutil.ToFloat64(n.srv.m.responses.WithLabelValues("api-per-key", c))
	}
	if api != 500 {
		t.Errorf("api-per-key answers: got %v, want the flood's 500", api)
	}
}

// TestResponsesByRouteAndStatus: every answer is counted under the first
// rule it matched, "(none)" for none or a request refused before any rule,
// and the class of the status the client received.
func TestResponsesByRouteAndStatus(t *testing.T) {
	n := startNode(t, loadOpsPolicy(t), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	base := "http://" + n.addr
	want := map[[2]string]int{}
	refused := 0
	count := func(route string, status int) {
		want[[2]string{route, statusClasses[status/100-1]}]++
		if status == http.StatusTooManyRequests {
			refused++
		}
	}
	for range 4 { // two allowed, two refused (sensitive: bare 429)
		count("login", do(t, "POST", base+"/login", `{}`, "X-Forwarded-For", "203.0.113.7").status)
	}
	for i := range 3 { // the dry-run rule never refuses; the key's limit does
		count("api-per-key", do(t, "GET", base+"/api/x"+strconv.Itoa(i), "", "X-Api-Key", "k").status)
	}
	count(noRoute, do(t, "GET", base+"/elsewhere", "").status)
	count(noRoute, rawStatus(t, raw(t, n.addr, "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n")))

	if refused != 3 {
		t.Fatalf("got %d refusals, want 3 (two logins, one API call): %v", refused, want)
	}
	for _, route := range []string{"login", "api-per-key", "api-per-path", "pages-per-visitor", noRoute} {
		for _, class := range statusClasses {
			got := int(testutil.ToFloat64(n.srv.m.responses.WithLabelValues(route, class)))
			if w := want[[2]string{route, class}]; got != w {
				t.Errorf("edge_http_responses_total{route=%q,status=%q}: got %d, want %d", route, class, got, w)
			}
		}
	}
}

// extCounter is s's counter named name, one of an extension's
// (ext.Counted: nat's edge_visitor_ids_minted_total).
func extCounter(t *testing.T, s *Server, name string) prometheus.Counter {
	t.Helper()
	for i, e := range s.ext.list {
		if c, ok := e.(ext.Counted); ok {
			for j, m := range c.Counters() {
				if m.Name == name {
					return s.ext.counters[i][j].(prometheus.Counter)
				}
			}
		}
	}
	t.Fatalf("no extension counts %s", name)
	return nil
}

// TestReloadsVisitorsAndStoreLatencyAreCounted: CountReload by result,
// each visitor ID minted (as many as Set-Cookies the clients got), and one
// store-latency observation per request that reached the store, as
// "error" when the store failed.
func TestReloadsVisitorsAndStoreLatencyAreCounted(t *testing.T) {
	n := startNode(t, loadOpsPolicy(t), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	n.srv.CountReload(true)
	n.srv.CountReload(false)
	n.srv.CountReload(false)
	if ok, refused := testutil.ToFloat64(n.srv.m.reloads[1]), testutil.ToFloat64(n.srv.m.reloads[0]); ok != 1 || refused != 2 {
		t.Errorf("edge_reloads_total: got ok %v refused %v, want 1 and 2", ok, refused)
	}

	cookies := 0
	for range 3 {
		r := do(t, "GET", "http://"+n.addr+"/trace/page", "")
		if r.status != http.StatusOK {
			t.Fatalf("/trace/page: got %d", r.status)
		}
		cookies += len(r.header.Values("Set-Cookie"))
	}
	if got := int(testutil.ToFloat64(extCounter(t, n.srv, "edge_visitor_ids_minted_total"))); cookies != 3 || got != cookies {
		t.Errorf("edge_visitor_ids_minted_total: got %d, want %d (the Set-Cookies, 3)", got, cookies)
	}
	h := histogramCounts(t, n)
	if h["ok"] < 3 || h["error"] != 0 {
		t.Errorf("edge_store_call_duration_seconds counts: got %v, want at least 3 ok and no error", h)
	}

	// A failing store: every call is an error observation.
	sick := startNode(t, loadOpsPolicy(t), nodeOptions{store: failingStore{}, clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	for range 2 {
		do(t, "GET", "http://"+sick.addr+"/trace/page", "")
	}
	if h := histogramCounts(t, sick); h["error"] != 2 || h["ok"] != 0 {
		t.Errorf("failing store: got %v, want 2 error and no ok", h)
	}
}

func histogramCounts(t *testing.T, n *node) map[string]uint64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "edge_store_call_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// failingStore fails every call, as a Redis that is down does.
type failingStore struct{}

func (failingStore) Take(context.Context, time.Time, []rules.Op, []rules.Result) error {
	return errors.New("store down: test")
}
func (failingStore) Close() error { return nil }

// TestDecisionLogs: every refusal and would-be refusal is an info line
// naming the rule, allowed requests are logged one in allowLogEvery, and
// no line holds a client's address or identity, only keyed hashes.
func TestDecisionLogs(t *testing.T) {
	var logs syncBuffer
	n := startNode(t, loadOpsPolicy(t), nodeOptions{logs: &logs, clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	base := "http://" + n.addr
	const ip, apiKey = "198.51.100.23", "secret-api-key-77"
	for range 3 {
		do(t, "POST", base+"/login", `{}`, "X-Forwarded-For", ip)
	}
	for range 2 { // the second is a would-be refusal of api-per-path
		do(t, "GET", base+"/api/one", "", "X-Api-Key", apiKey, "X-Forwarded-For", ip)
	}
	for range 2 * allowLogEvery {
		if r := do(t, "GET", base+"/trace/page", "", "X-Forwarded-For", ip); r.status != http.StatusOK {
			t.Fatalf("/trace/page: got %d", r.status)
		}
	}

	got := map[string]int{} // msg + " " + rule
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if strings.Contains(line, ip) || strings.Contains(line, apiKey) {
			t.Errorf("log line holds a raw identity: %s", line)
		}
		msg, _ := e["msg"].(string)
		switch msg {
		case "refused", "would have refused":
			if e["level"] != "INFO" || e["key"] == nil {
				t.Errorf("refusal line without level INFO and a key hash: %s", line)
			}
			got[msg+" "+e["rule"].(string)]++
		case "allowed (sampled)":
			r, _ := e["rule"].(map[string]any)
			if r["name"] != "pages-per-visitor" || len(r["key"].(string)) != 30 {
				t.Errorf("sampled allow without the rule and its key hash: %s", line)
			}
			got[msg]++
		}
	}
	want := map[string]int{"refused login": 1, "would have refused api-per-path": 1, "allowed (sampled)": 2}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%q lines: got %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
}

var _ rules.Store = failingStore{}

// TestOperationsDocListsEveryMetric: the metrics table of
// docs/operations.md names every metric a node with every kind of store
// registers, and nothing else.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	fc, err := failclosed.New(ms, failclosed.Options{NoBackgroundProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	reg := prometheus.NewRegistry()
	if _, err := New(Options{
		Policy: loadOpsPolicy(t), Store: ms, Registry: reg, Upstream: "http://127.0.0.1:1", Extensions: builtin.Extensions(),
		Health: fc, Collectors: slices.Concat(nodestore.StoreMetrics(fc), nodestore.RedisMetrics(func() redisstore.Stats { return redisstore.Stats{} }), nodestore.LeaseMetrics(func() leasestore.Stats { return leasestore.Stats{} })),
	}); err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	ch := make(chan *prometheus.Desc, 256)
	go func() { reg.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		registered[m[1]] = true
	}

	src, err := os.ReadFile(filepath.Join(repoRoot(t), "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The table names each edge_ metric, and the runtime's and the
	// process's families (client_golang's collectors) by prefix: `go_*`.
	documented, prefixes := map[string]bool{}, map[string]bool{}
	name := regexp.MustCompile("`((?:edge|go|process)_[a-z_]*)(\\*)?`")
	for line := range strings.Lines(string(src)) {
		if !strings.HasPrefix(line, "| `edge_") && !strings.HasPrefix(line, "| `go_") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			if m[2] == "*" {
				prefixes[m[1]] = true
			} else {
				documented[m[1]] = true
			}
		}
	}
	if len(registered) < 25 || len(documented) < 25 {
		t.Fatalf("found %d registered and %d documented metrics, want over 25 of each", len(registered), len(documented))
	}
	covered := map[string]bool{} // the prefixes some registered name has
	for n := range registered {
		if documented[n] {
			continue
		}
		byPrefix := false
		for p := range prefixes {
			if strings.HasPrefix(n, p) {
				byPrefix, covered[p] = true, true
			}
		}
		if !byPrefix {
			t.Errorf("%s is registered but not in docs/operations.md's metrics table", n)
		}
	}
	for n := range documented {
		if !registered[n] {
			t.Errorf("docs/operations.md lists %s, which no node registers", n)
		}
	}
	for _, p := range []string{"go_", "process_"} {
		if !prefixes[p] {
			t.Errorf("docs/operations.md's metrics table has no `%s*` row for the runtime's collector", p)
		}
	}
	for p := range prefixes {
		if !covered[p] {
			t.Errorf("docs/operations.md lists `%s*`, but no node registers a metric so named", p)
		}
	}
}
