package gateway

import (
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/edge-gateway/edge/internal/testnet"
)

// scrape reads the admin listener's /metrics at admin (HOST:PORT), as
// Prometheus does, and parses its text exposition.
func scrape(t testing.TB, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	r := do(t, "GET", "http://"+admin+"/metrics", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", r.status, r.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(r.body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

// histogramCount is the sample count of family name's series whose label
// key is value, -1 when there is no such series.
func histogramCount(mfs map[string]*dto.MetricFamily, name, key, value string) int {
	for _, m := range mfs[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == key && l.GetValue() == value {
				return int(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

// labelValues are family name's values of label key, sorted.
func labelValues(mfs map[string]*dto.MetricFamily, name, key string) []string {
	var vs []string
	for _, m := range mfs[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == key {
				vs = append(vs, l.GetValue())
			}
		}
	}
	slices.Sort(vs)
	return vs
}

// TestRuntimeAndLatencyMetricsThroughAdmin: the admin listener's /metrics
// carries the Go runtime's and the process's metrics, edge_build_info (1,
// with the binary's Go version), and the request and origin histograms
// with every one of their fixed label values from the start; requests
// through the public listener raise exactly their verdict's count, and
// each forwarded one the origin's "answered".
func TestRuntimeAndLatencyMetricsThroughAdmin(t *testing.T) {
	n := startNode(t, loadOpsPolicy(t), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	before := scrape(t, n.admin)

	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "go_info", "go_memstats_heap_inuse_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} {
		if before[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	build := before["edge_build_info"].GetMetric()
	if len(build) != 1 || build[0].GetGauge().GetValue() != 1 {
		t.Fatalf("edge_build_info: got %v, want one series at 1", build)
	}
	labels := map[string]string{}
	for _, l := range build[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if got := slices.Sorted(maps.Keys(labels)); !slices.Equal(got, []string{"goversion", "revision", "version"}) {
		t.Errorf("edge_build_info labels: got %v, want goversion, revision, version", got)
	}
	if labels["goversion"] != runtime.Version() || labels["version"] == "" || labels["revision"] == "" {
		t.Errorf("edge_build_info: got %v, want goversion %s and a version and revision", labels, runtime.Version())
	}

	for _, tt := range []struct {
		name, key string
		want      []string
	}{
		{"edge_request_duration_seconds", "verdict", append(slices.Clone(verdictNames[:]), malformedVerdict)},
		{"edge_upstream_duration_seconds", "result", []string{"answered", "connect", "error", "timeout", "tls"}},
	} {
		mf := before[tt.name]
		if mf.GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s: got type %v, want a histogram", tt.name, mf.GetType())
			continue
		}
		slices.Sort(tt.want)
		if got := labelValues(before, tt.name, tt.key); !slices.Equal(got, tt.want) {
			t.Errorf("%s %s values: got %v, want %v", tt.name, tt.key, got, tt.want)
		}
		for _, m := range mf.GetMetric() {
			if b := m.GetHistogram().GetBucket(); len(b) != len(latencyBuckets)+1 || m.GetHistogram().GetSampleCount() != 0 {
				t.Errorf("%s: got %d buckets and %d samples before any request, want %d (and +Inf) and 0", tt.name, len(b), m.GetHistogram().GetSampleCount(), len(latencyBuckets)+1)
			}
		}
	}

	base := "http://" + n.addr
	for range 3 { // forwarded: the visitor rule's limit is a million
		if r := do(t, "GET", base+"/trace/page", ""); r.status != http.StatusOK {
			t.Fatalf("/trace/page: got %d", r.status)
		}
	}
	for range 3 { // two forwarded, the third over the login's limit of 2
		do(t, "POST", base+"/login", `{}`, "X-Forwarded-For", "203.0.113.7")
	}
	if s := rawStatus(t, raw(t, n.addr, "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n")); s != http.StatusBadRequest {
		t.Fatalf("malformed request: got %d, want 400", s)
	}

	after := scrape(t, n.admin)
	for _, tt := range []struct {
		name, key, value string
		want             int
	}{
		{"edge_request_duration_seconds", "verdict", "forward", 5},
		{"edge_request_duration_seconds", "verdict", "refuse_limit", 1},
		{"edge_request_duration_seconds", "verdict", malformedVerdict, 1},
		{"edge_request_duration_seconds", "verdict", "unavailable", 0},
		{"edge_upstream_duration_seconds", "result", "answered", 5},
		{"edge_upstream_duration_seconds", "result", "connect", 0},
	} {
		if got := histogramCount(after, tt.name, tt.key, tt.value); got != tt.want {
			t.Errorf("%s{%s=%q} count: got %d, want %d", tt.name, tt.key, tt.value, got, tt.want)
		}
	}
}

// TestUpstreamDurationOfAnOriginThatIsDown: a forwarded request that no
// origin answers is observed under its reason, never as answered.
func TestUpstreamDurationOfAnOriginThatIsDown(t *testing.T) {
	dead := testnet.DeadAddr(t)
	n := startUpNode(t, upPolicy(t, t.TempDir(), `upstream = "http://`+dead+`"`, nil), "")
	if got := n.get(t); got != http.StatusBadGateway {
		t.Fatalf("got %d, want 502", got)
	}
	mfs := scrape(t, n.admin)
	if c, a := histogramCount(mfs, "edge_upstream_duration_seconds", "result", "connect"), histogramCount(mfs, "edge_upstream_duration_seconds", "result", "answered"); c != 1 || a != 0 {
		t.Errorf("edge_upstream_duration_seconds: got connect %d answered %d, want 1 and 0", c, a)
	}
	if got := histogramCount(mfs, "edge_request_duration_seconds", "verdict", "forward"); got != 1 {
		t.Errorf("edge_request_duration_seconds{verdict=\"forward\"}: got %d, want 1", got)
	}
}
