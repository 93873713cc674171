package gateway

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/nodestore"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// The files of deploy/prometheus and deploy/grafana query the node's
// metrics by name: these tests keep them from rotting as metrics change.

// alertsFile and dashboardFile are the shipped alerting rules and Grafana
// dashboard (docs/operations.md, "Alerts" and "Dashboard").
const (
	alertsFile     = "deploy/prometheus/edge-alerts.yml"
	alertsTestFile = "deploy/prometheus/tests/edge-alerts-test.yml"
	dashboardFile  = "deploy/grafana/edge-dashboard.json"
)

// promqlWords are PromQL's keywords: not metric names.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "offset": true, "bool": true, "inf": true, "nan": true,
}

var (
	promqlString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlLabelSet = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promqlDuration = regexp.MustCompile(`\b(?:\d+(?:ms|s|m|h|d|w|y))+\b`)
	promqlNumber   = regexp.MustCompile(`\b\d[\d.eE+-]*\b`)
)

// promqlMetrics are the metric names expr selects: every identifier that
// is not a function (followed by "("), a keyword, a label (in a matcher
// list or a by/without/on clause), a range or a string.
func promqlMetrics(expr string) []string {
	e := promqlString.ReplaceAllString(expr, `""`)
	e = promqlRange.ReplaceAllString(e, "")
	e = promqlLabelSet.ReplaceAllString(e, "")
	e = promqlMatchers.ReplaceAllString(e, "")
	e = promqlDuration.ReplaceAllString(e, "0") // offset 5m
	e = promqlNumber.ReplaceAllString(e, "0")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		if promqlWords[strings.ToLower(id)] {
			continue
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		names = append(names, id)
	}
	return names
}

func TestPromqlMetrics(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up{job="edge"} == 0`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (instance, le) (rate(edge_store_call_duration_seconds_bucket{result="ok"}[5m]))) > 0.004`, []string{"edge_store_call_duration_seconds_bucket"}},
		{`sum by (rule) (rate(a_total{decision=~"deny|x"}[5m])) > 3 * sum by (rule) (rate(b_total[1h] offset 5m)) and c > 1`, []string{"a_total", "b_total", "c"}},
		{`process_open_fds / process_max_fds > 0.8`, []string{"process_open_fds", "process_max_fds"}},
		{`x - time() < 14 * 86400 and x > 0`, []string{"x", "x"}},
	}
	for _, tt := range tests {
		if got := promqlMetrics(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("promqlMetrics(%q): got %v, want %v", tt.expr, got, tt.want)
		}
	}
}

// alertExprs are the expr values of a Prometheus rule file: single-line
// ones and block scalars (`expr: |` and the lines indented below it).
func alertExprs(t *testing.T, src string) []string {
	t.Helper()
	var exprs []string
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "expr:") {
			continue
		}
		v := strings.TrimSpace(strings.TrimPrefix(trimmed, "expr:"))
		if v != "|" && v != ">" {
			exprs = append(exprs, v)
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		var b strings.Builder
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			b.WriteString(next + "\n")
			i++
		}
		exprs = append(exprs, b.String())
	}
	if len(exprs) == 0 {
		t.Fatal("no expr in the rule file")
	}
	return exprs
}

// dashboardExprs are the queries of a Grafana dashboard: every panel
// target's expr (rows' panels too) and every query variable's query.
func dashboardExprs(t *testing.T, src []byte) []string {
	t.Helper()
	var d any
	if err := json.Unmarshal(src, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_]+\)$`)
	var exprs []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(c, k)
			}
		case []any:
			for _, c := range v {
				walk(c, key)
			}
		case string:
			switch {
			case key == "expr":
				exprs = append(exprs, v)
			case key == "query" || key == "definition":
				if m := labelValues.FindStringSubmatch(v); m != nil {
					exprs = append(exprs, m[1]) // the series whose label values the variable lists
				}
			}
		}
	}
	walk(d, "")
	if len(exprs) == 0 {
		t.Fatal("no query in the dashboard")
	}
	return exprs
}

// exposedFamilies are the metric families a node with every kind of store
// (memory under failclosed, the Redis client's counters) shows on its
// admin listener's /metrics, with the series names PromQL may select for
// each: a histogram's _bucket, _sum and _count, a summary's _sum and
// _count.
func exposedFamilies(t *testing.T) map[string]bool {
	t.Helper()
	ms, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	fc, err := failclosed.New(ms, failclosed.Options{NoBackgroundProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	// The login rule with a key budget of its own: the memory store's
	// rule-labelled families exist once it has taken a key.
	p, diags := builtin.Load("ops.hcl", []byte(strings.Replace(opsPolicy, "sensitive = true", "sensitive = true\n  max_keys  = 100", 1)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	srv, err := New(Options{
		Policy: p, Store: ms, Registry: prometheus.NewRegistry(), Upstream: "http://127.0.0.1:1", Extensions: builtin.Extensions(),
		Health: fc, Collectors: append(nodestore.StoreMetrics(fc), nodestore.RedisMetrics(func() redisstore.Stats { return redisstore.Stats{} })...),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ln, aln := listen(t), listen(t)
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	go func() { defer wg.Done(); _ = srv.ServeAdmin(ctx, aln) }()
	do(t, "POST", "http://"+ln.Addr().String()+"/login", `{}`) // 502: no origin; the key is taken

	names := map[string]bool{}
	for name, mf := range scrape(t, aln.Addr().String()) {
		names[name] = true
		switch mf.GetType().String() {
		case "HISTOGRAM":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "SUMMARY":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// TestDeployFilesQueryExposedMetrics: every metric the shipped alerting
// rules and dashboard select is one a node exposes on /metrics (or
// Prometheus's own up), so that renaming a metric fails here, not in a
// fleet's silent alert.
func TestDeployFilesQueryExposedMetrics(t *testing.T) {
	exposed := exposedFamilies(t)
	exposed["up"] = true // Prometheus's own, per scrape target
	root := repoRoot(t)
	rulesSrc, err := os.ReadFile(filepath.Join(root, alertsFile))
	if err != nil {
		t.Fatal(err)
	}
	dashSrc, err := os.ReadFile(filepath.Join(root, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		file  string
		exprs []string
	}{
		{alertsFile, alertExprs(t, string(rulesSrc))},
		{dashboardFile, dashboardExprs(t, dashSrc)},
	} {
		used := map[string]bool{}
		for _, e := range f.exprs {
			names := promqlMetrics(e)
			if len(names) == 0 {
				t.Errorf("%s: %q selects no metric", f.file, e)
			}
			for _, n := range names {
				used[n] = true
				if !exposed[n] {
					t.Errorf("%s: %q selects %s, which a node does not expose", f.file, strings.TrimSpace(e), n)
				}
			}
		}
		if len(used) < 10 {
			t.Errorf("%s: %d metrics used (%v), want at least 10", f.file, len(used), slices.Sorted(maps.Keys(used)))
		}
	}
}

// TestAlertRulesPassPromtool: `promtool check rules` accepts the rule file
// (syntax, PromQL, templates), and `promtool test rules` passes its unit
// tests (alertsTestFile: alerts that fire, with their labels and
// annotations, and ones that must not). Debian's prometheus package
// provides promtool; without it the test skips, except under
// EDGE_REQUIRE_STACKS=1 (CI), where it fails.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := needBinary(t, "promtool")
	root := repoRoot(t)
	for _, args := range [][]string{
		{"check", "rules", filepath.Join(root, alertsFile)},
		{"test", "rules", filepath.Join(root, alertsTestFile)},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
