package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// throughputHeader describes a throughput run at the top of its report.
type throughputHeader struct {
	method      string
	path        string
	connections int
	clients     int
	warmup      time.Duration
	duration    time.Duration
}

// latencyQuantiles are the reported percentiles, with their labels.
var latencyQuantiles = [...]struct {
	label string
	q     float64 // percent
}{{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p99.9", 99.9}}

// writeThroughputReport prints the results side by side (the target, then
// the comparison target, if any), the ratios of the first to the second,
// and the same as a Markdown table.
func writeThroughputReport(w io.Writer, h throughputHeader, results []*loadResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "throughput: %s\n\n", h.describe())

	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 3, ' ', 0)
	row := func(label string, cell func(r *loadResult) string) {
		fmt.Fprint(tw, label)
		for _, r := range results {
			fmt.Fprint(tw, "\t", cell(r))
		}
		fmt.Fprint(tw, "\t\n")
	}
	if len(results) > 1 {
		row("", func(r *loadResult) string {
			if r == results[0] {
				return "target"
			}
			return "compare"
		})
	}
	row("url", func(r *loadResult) string { return r.base })
	row("requests", func(r *loadResult) string { return strconv.FormatInt(r.total(), 10) })
	row("requests/s", func(r *loadResult) string { return fmtRate(r.rate()) })
	row("elapsed", func(r *loadResult) string {
		s := r.elapsed.Round(time.Millisecond).String()
		if r.capped {
			s += " (-requests cap reached)"
		}
		return s
	})
	for _, code := range []int{200, 429, 503} {
		row(strconv.Itoa(code), func(r *loadResult) string { return strconv.FormatInt(r.statuses[code], 10) })
	}
	row("other", func(r *loadResult) string { return withBreakdown(r.otherStatuses(), otherBreakdown(r)) })
	row("errors", func(r *loadResult) string { return withBreakdown(r.failed(), errorBreakdown(r)) })
	for _, lq := range latencyQuantiles {
		row(lq.label, func(r *loadResult) string { return fmtMS(r.hist.ValueAtQuantile(lq.q)) + "ms" })
	}
	row("max", func(r *loadResult) string { return fmtMS(r.hist.Max()) + "ms" })
	row("connections", func(r *loadResult) string { return strconv.FormatInt(r.dials, 10) + " opened" })
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(table.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteByte('\n')
	}

	if len(results) > 1 {
		t, c := results[0], results[1]
		fmt.Fprintf(&b, "\nthroughput ratio (target/compare): %s\n", fmtRatio(t.rate(), c.rate()))
		fmt.Fprintf(&b, "p99 ratio (target/compare): %s\n", fmtRatio(float64(p99(t)), float64(p99(c))))
	}
	sep := "\n"
	for _, r := range results {
		for k, msg := range r.firstErr {
			if msg != "" {
				fmt.Fprintf(&b, "%sfirst %s error from %s: %s\n", sep, errKindNames[k], r.base, msg)
				sep = ""
			}
		}
	}

	b.WriteByte('\n')
	writeMarkdown(&b, h, results)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMarkdown appends the results as a Markdown table, with a ratio row
// when there are two.
func writeMarkdown(b *strings.Builder, h throughputHeader, results []*loadResult) {
	fmt.Fprintf(b, "%s:\n\n", h.describe())
	b.WriteString("| target | requests | req/s | 200 | 429 | 503 | other | errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		cells := []string{
			r.base,
			strconv.FormatInt(r.total(), 10),
			fmtRate(r.rate()),
			strconv.FormatInt(r.statuses[200], 10),
			strconv.FormatInt(r.statuses[429], 10),
			strconv.FormatInt(r.statuses[503], 10),
			strconv.FormatInt(r.otherStatuses(), 10),
			strconv.FormatInt(r.failed(), 10),
		}
		for _, lq := range latencyQuantiles {
			cells = append(cells, fmtMS(r.hist.ValueAtQuantile(lq.q)))
		}
		cells = append(cells, fmtMS(r.hist.Max()))
		writeMarkdownRow(b, cells)
	}
	if len(results) > 1 {
		t, c := results[0], results[1]
		cells := []string{"target/compare", "", fmtRatio(t.rate(), c.rate()), "", "", "", "", ""}
		for _, lq := range latencyQuantiles {
			cells = append(cells, fmtRatio(float64(t.hist.ValueAtQuantile(lq.q)), float64(c.hist.ValueAtQuantile(lq.q))))
		}
		cells = append(cells, fmtRatio(float64(t.hist.Max()), float64(c.hist.Max())))
		writeMarkdownRow(b, cells)
	}
}

func writeMarkdownRow(b *strings.Builder, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" ")
		b.WriteString(c)
		b.WriteString(" |")
	}
	b.WriteString("\n")
}

// describe returns the run's load in one line.
func (h throughputHeader) describe() string {
	return fmt.Sprintf("%s %s, %d connections, %d client addresses, %v measured per target after a %v warm-up",
		h.method, h.path, h.connections, h.clients, h.duration, h.warmup)
}

func p99(r *loadResult) int64 { return r.hist.ValueAtQuantile(99) }

// fmtMS formats microseconds as milliseconds, to the microsecond.
func fmtMS(us int64) string { return strconv.FormatFloat(float64(us)/1000, 'f', 3, 64) }

// fmtRate formats requests per second, to the request.
func fmtRate(perSecond float64) string { return strconv.FormatFloat(perSecond, 'f', 0, 64) }

// fmtRatio formats a/b to two decimals, or "n/a" when b is zero.
func fmtRatio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

// withBreakdown formats a count followed, when not empty, by its parts.
func withBreakdown(n int64, parts []string) string {
	if len(parts) == 0 {
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}

// otherBreakdown lists the statuses counted as other, "404: 3" in
// ascending order; 0 stands for a status outside 100-599.
func otherBreakdown(r *loadResult) []string {
	var codes []int
	for code, n := range r.statuses {
		if n > 0 && code != 200 && code != 429 && code != 503 {
			codes = append(codes, code)
		}
	}
	slices.Sort(codes)
	out := make([]string, len(codes))
	for i, code := range codes {
		out[i] = fmt.Sprintf("%d: %d", code, r.statuses[code])
	}
	return out
}

// errorBreakdown lists the failed requests by kind, "timeout: 2".
func errorBreakdown(r *loadResult) []string {
	var out []string
	for k, n := range r.errs {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s: %d", errKindNames[k], n))
		}
	}
	return out
}
