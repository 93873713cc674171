package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/internal/testnet"
)

// edgeRequests is the edge_requests_total family every edge node exposes,
// which parseEdgeMetrics requires.
const edgeRequests = `# HELP edge_requests_total Requests the edge decided, by verdict.
# TYPE edge_requests_total counter
edge_requests_total{verdict="forward"} 118862
edge_requests_total{verdict="refuse_limit"} 0
`

func TestParseEdgeMetrics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		page    string
		want    decisionCounts
		wantErr string
	}{
		{
			name: "as the node writes it",
			page: `# HELP edge_decisions_total Decisions of each rule on the requests it matched, by rule and decision (allow, deny, dry_run_deny, store_error_allow, store_error_deny).
# TYPE edge_decisions_total counter
edge_decisions_total{decision="allow",rule="trace-gcra"} 24721
edge_decisions_total{decision="deny",rule="trace-gcra"} 12
edge_decisions_total{decision="dry_run_deny",rule="trace-gcra"} 3
edge_decisions_total{decision="store_error_allow",rule="trace-gcra"} 94141
edge_decisions_total{decision="store_error_deny",rule="x"} 0
edge_decisions_total{decision="allow",rule="x"} 5
edge_decisions_total{decision="store_error_deny",rule="y"} 7
` + edgeRequests + `# HELP edge_store_errors_total Store calls that failed or timed out (breaker probes included).
# TYPE edge_store_errors_total counter
edge_store_errors_total 4971
edge_store_short_circuits_total 89170
`,
			want: decisionCounts{allow: 24726, deny: 12, dryRunDeny: 3, storeErrorAllow: 94141, storeErrorDeny: 7},
		},
		{
			name: "labels in any order, comments, blank lines, no TYPE, a timestamp, exponent notation",
			page: `# a comment that is neither HELP nor TYPE

edge_decisions_total{rule="a",decision="allow"} 1.5e+06
edge_decisions_total{ rule = "b" , decision = "allow" , } 2 1700000000000
edge_decisions_total{decision="store_error_allow",rule="b"} 3
#	TYPE other_total counter
` + edgeRequests,
			want: decisionCounts{allow: 1_500_002, storeErrorAllow: 3},
		},
		{
			name: "missing series count 0",
			page: edgeRequests + `# TYPE edge_decisions_total counter
edge_decisions_total{decision="allow",rule="a"} 9
`,
			want: decisionCounts{allow: 9},
		},
		{
			name: "no decisions at all: a node that has decided nothing",
			page: edgeRequests + "# HELP edge_decisions_total Decisions.\n# TYPE edge_decisions_total counter\n",
			want: decisionCounts{},
		},
		{
			name: "other decision labels are not the five",
			page: edgeRequests + `edge_decisions_total{decision="skip",rule="a"} 100
edge_decisions_total{decision="Allow",rule="a"} 100
edge_decisions_total{decision="allow",rule="a"} 1
`,
			want: decisionCounts{allow: 1},
		},
		{
			name: "the same label values under another metric do not count",
			page: edgeRequests + `edge_decisions{decision="allow",rule="a"} 100
edge_decisions_total_x{decision="allow",rule="a"} 100
edge_store_fallback_total{decision="allow",mode="allow"} 100
`,
			want: decisionCounts{},
		},
		{
			name: "escaped label values",
			page: edgeRequests + `edge_decisions_total{decision="allow",rule="a \"quoted\" \\ rule\n"} 4
`,
			want: decisionCounts{allow: 4},
		},
		{"not an edge node's page", "# TYPE up gauge\nup 1\n", decisionCounts{}, "no edge_requests_total: not an edge node's metrics"},
		{"empty page", "", decisionCounts{}, "no edge_requests_total"},
		{"HTML", "<html><body>not found</body></html>\n", decisionCounts{}, "text format parsing error in line 1"},
		{"unclosed labels", edgeRequests + `edge_decisions_total{decision="allow",rule="a" 3` + "\n", decisionCounts{}, "text format parsing error in line 5"},
		{"unquoted label value", edgeRequests + "edge_decisions_total{decision=allow} 3\n", decisionCounts{}, "text format parsing error"},
		{"no value", edgeRequests + `edge_decisions_total{decision="allow",rule="a"}` + "\n", decisionCounts{}, "text format parsing error"},
		{"value not a number", edgeRequests + `edge_decisions_total{decision="allow",rule="a"} many` + "\n", decisionCounts{}, "text format parsing error"},
		{"last line cut", edgeRequests + `edge_decisions_total{decision="allow",rule="a"} 3`, decisionCounts{}, "unexpected end of input stream"},
		{"fraction", edgeRequests + `edge_decisions_total{decision="allow",rule="a"} 2.5` + "\n", decisionCounts{}, `edge_decisions_total{decision="allow",rule="a"}: value 2.5 is not a count`},
		{"negative", edgeRequests + `edge_decisions_total{decision="deny",rule="a"} -1` + "\n", decisionCounts{}, "value -1 is not a count"},
		{"NaN", edgeRequests + `edge_decisions_total{decision="deny",rule="a"} NaN` + "\n", decisionCounts{}, "value NaN is not a count"},
		{"infinite", edgeRequests + `edge_decisions_total{decision="deny",rule="a"} +Inf` + "\n", decisionCounts{}, "value +Inf is not a count"},
		{"beyond 2^53", edgeRequests + `edge_decisions_total{decision="deny",rule="a"} 1e16` + "\n", decisionCounts{}, "is not a count"},
		{"a gauge", edgeRequests + "# TYPE edge_decisions_total gauge\n" + `edge_decisions_total{decision="allow",rule="a"} 3` + "\n", decisionCounts{}, "edge_decisions_total is a gauge, want a counter"},
		{"no decision label", edgeRequests + `edge_decisions_total{rule="a"} 3` + "\n", decisionCounts{}, "series without a decision label"},
		{"twice the same series", edgeRequests + `edge_decisions_total{decision="allow",rule="a"} 3` + "\n" + `edge_decisions_total{rule="a",decision="allow"} 4` + "\n",
			decisionCounts{}, `edge_decisions_total{decision="allow",rule="a"} appears twice`},
		{"two TYPE lines", edgeRequests + "# TYPE edge_decisions_total counter\n# TYPE edge_decisions_total counter\n", decisionCounts{}, "second TYPE line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseEdgeMetrics(strings.NewReader(tt.page))
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %+v, %v; want error %q", got, err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Errorf("got error %v, want %+v", err, tt.want)
			case tt.wantErr == "" && got != tt.want:
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecisionCounts(t *testing.T) {
	t.Parallel()
	before := decisionCounts{allow: 10, deny: 1, dryRunDeny: 2, storeErrorAllow: 3, storeErrorDeny: 4}
	after := decisionCounts{allow: 110, deny: 1, dryRunDeny: 5, storeErrorAllow: 53, storeErrorDeny: 6}
	d, err := after.since(before)
	if err != nil {
		t.Fatal(err)
	}
	if want := (decisionCounts{allow: 100, dryRunDeny: 3, storeErrorAllow: 50, storeErrorDeny: 2}); d != want {
		t.Errorf("since: got %+v, want %+v", d, want)
	}
	if d.stored() != 103 || d.fallbacks() != 52 {
		t.Errorf("stored %d, fallbacks %d; want 103 (100 allow + 3 dry_run_deny) and 52 (50 + 2)", d.stored(), d.fallbacks())
	}
	// Any counter going down voids the difference, even if the sums grow.
	down := after
	down.storeErrorDeny, down.allow = 0, 1000
	if _, err := down.since(before); err == nil || !strings.Contains(err.Error(), `edge_decisions_total{decision="store_error_deny"} went down from 4 to 0`) {
		t.Errorf("a counter that went down: got %v, want an error naming it", err)
	}
}

func TestFmtShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		part, whole int64
		want        string
	}{
		{0, 0, "n/a"}, {0, 10, "0%"}, {10, 10, "100%"}, {1, 4, "25.0%"}, {1, 3, "33.3%"},
		{1, 1_000_000, "<0.1%"}, {999_999, 1_000_000, ">99.9%"}, {1, 1000, "0.1%"},
	}
	for _, tt := range tests {
		if got := fmtShare(tt.part, tt.whole); got != tt.want {
			t.Errorf("fmtShare(%d, %d): got %q, want %q", tt.part, tt.whole, got, tt.want)
		}
	}
}

func TestParseMetricsURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw     string
		wantURL string // empty: must be refused
	}{
		{"http://127.0.0.1:19901/metrics", "http://127.0.0.1:19901/metrics"},
		{"http://127.0.0.1:19901", "http://127.0.0.1:19901/metrics"},
		{"http://127.0.0.1:19901/", "http://127.0.0.1:19901/metrics"},
		{"http://localhost:19901/admin/metrics", "http://127.0.0.1:19901/admin/metrics"},
		{"http://[::1]:19901/metrics", "http://[::1]:19901/metrics"},
		{"http://127.0.0.1/metrics", "http://127.0.0.1:80/metrics"},
		{"http://10.0.0.1:19901/metrics", ""},
		{"http://example.com/metrics", ""},
		{"https://127.0.0.1:19901/metrics", ""},
		{"127.0.0.1:19901/metrics", ""},
		{"http://user@127.0.0.1:19901/metrics", ""},
		{"http://127.0.0.1:19901/metrics?x=1", ""},
		{"http://127.0.0.1:19901/metrics?", ""},
		{"http://127.0.0.1:19901/metrics#top", ""},
	}
	for _, tt := range tests {
		got, err := parseMetricsURL("-target-metrics", tt.raw)
		switch {
		case tt.wantURL == "" && err == nil:
			t.Errorf("parseMetricsURL(%q): got %+v, want an error", tt.raw, got)
		case tt.wantURL == "" && !strings.HasPrefix(err.Error(), "-target-metrics") && !strings.HasPrefix(err.Error(), "parsing -target-metrics"):
			t.Errorf("parseMetricsURL(%q): error %q does not name the flag", tt.raw, err)
		case tt.wantURL != "" && err != nil:
			t.Errorf("parseMetricsURL(%q): %v", tt.raw, err)
		case tt.wantURL != "" && (got.url != tt.wantURL || got.flag != "-target-metrics" || !strings.HasPrefix(tt.wantURL, "http://"+got.addr+"/")):
			t.Errorf("parseMetricsURL(%q): got %+v, want url %s", tt.raw, got, tt.wantURL)
		}
	}
}

// metricsPage is a fake /metrics handler: it answers with status, content
// type and body.
type metricsPage struct {
	status      int
	contentType string
	body        string
}

func startMetricsPage(t *testing.T, p metricsPage) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(p.status)
		ctx.SetContentType(p.contentType)
		ctx.SetBodyString(p.body)
	}}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() { _ = srv.Shutdown(); wg.Wait() })
	return "http://" + ln.Addr().String() + "/metrics"
}

func TestScrapeFailures(t *testing.T) {
	t.Parallel()
	free := "http://" + testnet.DeadAddr(t) + "/metrics"
	const text = "text/plain; version=0.0.4; charset=utf-8"
	ok := edgeRequests + `edge_decisions_total{decision="allow",rule="a"} 7` + "\n"
	tests := []struct {
		name    string
		url     string
		want    decisionCounts
		wantErr string
	}{
		{"ok", startMetricsPage(t, metricsPage{200, text, ok}), decisionCounts{allow: 7}, ""},
		{"refused", free, decisionCounts{}, "connection refused"},
		{"not found", startMetricsPage(t, metricsPage{404, "text/plain", "not found\n"}), decisionCounts{}, "answered 404, want 200"},
		{"server error", startMetricsPage(t, metricsPage{503, text, ok}), decisionCounts{}, "answered 503, want 200"},
		{"JSON", startMetricsPage(t, metricsPage{200, "application/json", `{"status":"ok"}`}), decisionCounts{}, `answered Content-Type "application/json", want the Prometheus text format`},
		{"unparsable", startMetricsPage(t, metricsPage{200, text, ok + "edge_decisions_total{\n"}), decisionCounts{}, "reading the page: text format parsing error"},
		{"another exporter", startMetricsPage(t, metricsPage{200, text, "up 1\n"}), decisionCounts{}, "reading the page: no edge_requests_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src, err := parseMetricsURL("-compare-metrics", tt.url)
			if err != nil {
				t.Fatal(err)
			}
			sc := newScraper(src, 2*time.Second)
			defer sc.close()
			got, err := sc.scrape(context.Background())
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if prefix := fmt.Sprintf("scraping -compare-metrics %s: ", tt.url); err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %+v, %v; want an error %q…%q", got, err, prefix, tt.wantErr)
			}
		})
	}
}
