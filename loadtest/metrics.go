package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"
)

// The edge node's metrics that the throughput scenario reads (names as in
// gateway/metrics.go).
const (
	// decisionsMetric counts each matching rule's decision, labelled rule
	// and decision.
	decisionsMetric = "edge_decisions_total"
	// requestsMetric counts the requests the node decided, by verdict.
	// Every verdict's series exists from the start, so its absence means
	// the page is not an edge node's.
	requestsMetric = "edge_requests_total"
)

// maxMetricsBody bounds a scraped metrics page, bytes: a node with
// thousands of rules exposes well under a megabyte.
const maxMetricsBody = 16 << 20

// metricsSource is an edge node's Prometheus endpoint (its admin
// listener's /metrics), which the throughput scenario scrapes right before
// and right after each measured run of that node.
type metricsSource struct {
	flag string // the flag it came from, for errors: "-target-metrics"
	url  string // "http://127.0.0.1:19901/metrics"; empty: none
	addr string // host:port to dial
}

// parseMetricsURL accepts, for the flag named name, a plain-HTTP URL on a
// loopback host, as parseFlagTarget does, with a path; no path (or "/")
// means /metrics. No query, fragment or user.
func parseMetricsURL(name, raw string) (metricsSource, error) {
	return parseRemoteMetricsURL(name, raw, false)
}

// parseRemoteMetricsURL is parseMetricsURL that, with allowRemote, also
// takes a host off this machine (parseRemoteTarget).
func parseRemoteMetricsURL(name, raw string, allowRemote bool) (metricsSource, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return metricsSource{}, fmt.Errorf("parsing %s: %w", name, err)
	}
	if u.Scheme != "http" {
		return metricsSource{}, fmt.Errorf("%s %q: scheme must be http", name, raw)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return metricsSource{}, fmt.Errorf("%s %q: want a URL such as http://127.0.0.1:19901/metrics", name, raw)
	}
	host, err := dialHost(name, raw, u.Hostname(), allowRemote)
	if err != nil {
		return metricsSource{}, err
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	path := u.EscapedPath()
	if path == "" || path == "/" {
		path = "/metrics"
	}
	addr := net.JoinHostPort(host, port)
	return metricsSource{flag: name, url: "http://" + addr + path, addr: addr}, nil
}

// decisionCounts are an edge node's rule decisions, edge_decisions_total
// summed over its rules, by the decision label: at one instant (a scrape),
// or between two (a run). A request matched by several rules counts once
// per rule.
type decisionCounts struct {
	// Decided by the store.
	allow, deny, dryRunDeny int64
	// Answered by the rule's on_store_error because the store could not
	// decide (an error, a timeout, an open breaker): fallbacks.
	storeErrorAllow, storeErrorDeny int64
}

// stored returns the decisions the store made: allow + deny +
// dry_run_deny.
func (c decisionCounts) stored() int64 { return c.allow + c.deny + c.dryRunDeny }

// fallbacks returns the on_store_error decisions: store_error_allow +
// store_error_deny.
func (c decisionCounts) fallbacks() int64 { return c.storeErrorAllow + c.storeErrorDeny }

// since returns the decisions counted from before to c. A counter that
// went down means the node restarted (or another node answered) between
// the scrapes, and makes the difference meaningless: an error.
func (c decisionCounts) since(before decisionCounts) (decisionCounts, error) {
	var d decisionCounts
	for _, f := range []struct {
		name          string
		after, before int64
		out           *int64
	}{
		{"allow", c.allow, before.allow, &d.allow},
		{"deny", c.deny, before.deny, &d.deny},
		{"dry_run_deny", c.dryRunDeny, before.dryRunDeny, &d.dryRunDeny},
		{"store_error_allow", c.storeErrorAllow, before.storeErrorAllow, &d.storeErrorAllow},
		{"store_error_deny", c.storeErrorDeny, before.storeErrorDeny, &d.storeErrorDeny},
	} {
		if f.after < f.before {
			return decisionCounts{}, fmt.Errorf("%s{decision=%q} went down from %d to %d during the run: the node restarted", decisionsMetric, f.name, f.before, f.after)
		}
		*f.out = f.after - f.before
	}
	return d, nil
}

// parseEdgeMetrics reads an edge node's metrics page in the Prometheus
// text format (version 0.0.4, what the node's /metrics serves) and sums
// edge_decisions_total over the rules, by decision. A decision with no
// series counts 0 (a node that has not decided anything yet may have
// none); decision labels other than the five known ones are ignored. The
// page must hold edge_requests_total, so a page that is not an edge
// node's is an error rather than zero decisions; so are malformed lines,
// two series with the same rule and decision, a series without a
// decision label, and a value that is not a whole number in [0, 2^53].
func parseEdgeMetrics(r io.Reader) (decisionCounts, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return decisionCounts{}, err
	}
	if _, ok := fams[requestsMetric]; !ok {
		return decisionCounts{}, fmt.Errorf("no %s: not an edge node's metrics", requestsMetric)
	}
	var c decisionCounts
	mf, ok := fams[decisionsMetric]
	if !ok {
		return c, nil
	}
	typ := mf.GetType()
	if typ != dto.MetricType_COUNTER && typ != dto.MetricType_UNTYPED {
		return decisionCounts{}, fmt.Errorf("%s is a %s, want a counter", decisionsMetric, strings.ToLower(typ.String()))
	}
	type series struct{ rule, decision string }
	seen := make(map[series]bool, len(mf.GetMetric()))
	for _, m := range mf.GetMetric() {
		var s series
		hasDecision := false
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "rule":
				s.rule = lp.GetValue()
			case "decision":
				s.decision, hasDecision = lp.GetValue(), true
			}
		}
		if !hasDecision {
			return decisionCounts{}, fmt.Errorf("%s series without a decision label", decisionsMetric)
		}
		if seen[s] {
			return decisionCounts{}, fmt.Errorf("%s{decision=%q,rule=%q} appears twice", decisionsMetric, s.decision, s.rule)
		}
		seen[s] = true
		v := m.GetCounter().GetValue()
		if typ == dto.MetricType_UNTYPED {
			v = m.GetUntyped().GetValue()
		}
		n, err := wholeCount(v)
		if err != nil {
			return decisionCounts{}, fmt.Errorf("%s{decision=%q,rule=%q}: %w", decisionsMetric, s.decision, s.rule, err)
		}
		switch s.decision {
		case "allow":
			c.allow += n
		case "deny":
			c.deny += n
		case "dry_run_deny":
			c.dryRunDeny += n
		case "store_error_allow":
			c.storeErrorAllow += n
		case "store_error_deny":
			c.storeErrorDeny += n
		}
	}
	return c, nil
}

// wholeCount converts a counter's value to a count: it must be a whole
// number in [0, 2^53], where float64 holds every integer exactly.
func wholeCount(v float64) (int64, error) {
	if math.IsNaN(v) || v < 0 || v > 1<<53 || v != math.Trunc(v) {
		return 0, fmt.Errorf("value %v is not a count", v)
	}
	return int64(v), nil
}

// scraper reads one edge node's metrics page, on a connection of its own.
// It is used by one goroutine at a time.
type scraper struct {
	src     metricsSource
	hc      *fasthttp.HostClient
	timeout time.Duration
}

// newScraper returns a scraper of src whose requests time out after
// timeout (-timeout), dialling included.
func newScraper(src metricsSource, timeout time.Duration) *scraper {
	return &scraper{
		src: src,
		hc: &fasthttp.HostClient{
			Addr:                      src.addr,
			Name:                      "edge-loadtest",
			MaxConns:                  1,
			MaxIdemponentCallAttempts: 1,
			ReadTimeout:               timeout,
			WriteTimeout:              timeout,
			MaxResponseBodySize:       maxMetricsBody,
			DisablePathNormalizing:    true,
		},
		timeout: timeout,
	}
}

func (s *scraper) close() { s.hc.CloseIdleConnections() }

// scrape reads the node's decision counts now. Any failure (nothing
// listening, a timeout, a status other than 200, a page that is not the
// text format or not an edge node's) is an error naming the flag and the
// URL: a run must never report zero decisions it could not read.
func (s *scraper) scrape(ctx context.Context) (decisionCounts, error) {
	c, err := s.get(ctx)
	if err != nil {
		return decisionCounts{}, fmt.Errorf("scraping %s %s: %w", s.src.flag, s.src.url, err)
	}
	return c, nil
}

func (s *scraper) get(ctx context.Context) (decisionCounts, error) {
	if err := ctx.Err(); err != nil {
		return decisionCounts{}, err
	}
	timeout := s.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(s.src.url)
	req.Header.SetMethod(fasthttp.MethodGet)
	// The text format, uncompressed: fasthttp sends no Accept-Encoding.
	req.Header.Set(fasthttp.HeaderAccept, "text/plain;version=0.0.4")
	if err := s.hc.DoTimeout(req, resp, timeout); err != nil {
		return decisionCounts{}, err
	}
	if code := resp.StatusCode(); code != fasthttp.StatusOK {
		return decisionCounts{}, fmt.Errorf("answered %d, want 200", code)
	}
	if ct := string(resp.Header.ContentType()); !strings.HasPrefix(ct, "text/plain") {
		return decisionCounts{}, fmt.Errorf("answered Content-Type %q, want the Prometheus text format (text/plain)", ct)
	}
	c, err := parseEdgeMetrics(bytes.NewReader(resp.Body()))
	if err != nil {
		return decisionCounts{}, fmt.Errorf("reading the page: %w", err)
	}
	return c, nil
}
