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

	// With several levels or repetitions, which run of the set this is
	// (1-based); zero for a single run.
	repetition, repetitions int
	level, levels           int
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
	if err := appendThroughputText(&b, h, results); err != nil {
		return err
	}
	b.WriteByte('\n')
	writeMarkdown(&b, h, results)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeThroughputRun prints one run of a set of levels or repetitions as
// writeThroughputReport does, without the Markdown table: the summary
// after the last run has one for all of them.
func writeThroughputRun(w io.Writer, h throughputHeader, results []*loadResult) error {
	var b strings.Builder
	if err := appendThroughputText(&b, h, results); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// appendThroughputText appends the text part of writeThroughputReport.
func appendThroughputText(b *strings.Builder, h throughputHeader, results []*loadResult) error {
	title := "throughput"
	if h.repetitions > 0 {
		title = fmt.Sprintf("throughput, repetition %d of %d, level %d of %d", h.repetition, h.repetitions, h.level, h.levels)
	}
	fmt.Fprintf(b, "%s: %s\n\n", title, h.describe())

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
		fmt.Fprintf(b, "\nthroughput ratio (target/compare): %s\n", fmtRatio(t.rate(), c.rate()))
		fmt.Fprintf(b, "p99 ratio (target/compare): %s\n", fmtRatio(float64(p99(t)), float64(p99(c))))
	}
	sep := "\n"
	for _, r := range results {
		for k, msg := range r.firstErr {
			if msg != "" {
				fmt.Fprintf(b, "%sfirst %s error from %s: %s\n", sep, errKindNames[k], r.base, msg)
				sep = ""
			}
		}
	}
	return nil
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

// levelResults is what one level of a set measured: by repetition, in
// order, the results of its targets (the target, then the comparison
// target, if any).
type levelResults struct {
	connections int
	runs        [][]*loadResult
}

// targetSummary is one target's figures at one level over the
// repetitions.
type targetSummary struct {
	base   string
	rates  []float64 // answered requests per second of each repetition, in order
	rate   float64   // median of rates
	p50    float64   // median over the repetitions of each one's p50, µs
	p99    float64   // median over the repetitions of each one's p99, µs
	non2xx int64     // answers with a status outside 200-299, summed over the repetitions
	errors int64     // requests without an answer, summed over the repetitions
	capped int       // repetitions that the -requests cap ended early
}

// levelSummary is one level's figures: the target's, then the comparison
// target's, if any.
type levelSummary struct {
	connections int
	targets     []targetSummary
}

// throughputPeak is the highest median rate of one target over the levels.
type throughputPeak struct {
	base        string
	rate        float64 // median requests per second at that level
	connections int     // the level it was reached at
}

// summarize reduces each level's repetitions to medians and sums. Every
// repetition of a level must hold the same number of targets.
func summarize(levels []levelResults) []levelSummary {
	out := make([]levelSummary, len(levels))
	for i, lv := range levels {
		out[i].connections = lv.connections
		if len(lv.runs) == 0 {
			continue
		}
		for t := range lv.runs[0] {
			ts := targetSummary{base: lv.runs[0][t].base}
			var p50s, p99s []float64
			for _, run := range lv.runs {
				r := run[t]
				ts.rates = append(ts.rates, r.rate())
				p50s = append(p50s, float64(r.hist.ValueAtQuantile(50)))
				p99s = append(p99s, float64(p99(r)))
				ts.non2xx += r.non2xx()
				ts.errors += r.failed()
				if r.capped {
					ts.capped++
				}
			}
			ts.rate, ts.p50, ts.p99 = median(ts.rates), median(p50s), median(p99s)
			out[i].targets = append(out[i].targets, ts)
		}
	}
	return out
}

// peaks returns, for each target, the level with its highest median rate;
// among equal rates, the first level listed. Capacity is the highest rate
// a target sustains, so the peaks, not one level's figures, compare two
// targets whose rates stop at different levels.
func peaks(levels []levelSummary) []throughputPeak {
	var out []throughputPeak
	for _, lv := range levels {
		for t, ts := range lv.targets {
			if t == len(out) {
				out = append(out, throughputPeak{base: ts.base, rate: -1})
			}
			if ts.rate > out[t].rate {
				out[t] = throughputPeak{base: ts.base, rate: ts.rate, connections: lv.connections}
			}
		}
	}
	return out
}

// median returns the median of xs (the mean of the two middle values when
// their number is even), or 0 for none. It does not modify xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// non2xx returns the number of measured answers with a status outside
// 200-299.
func (r *loadResult) non2xx() int64 {
	n := r.answered()
	for code, c := range r.statuses {
		if code >= 200 && code <= 299 {
			n -= c
		}
	}
	return n
}

// summaryHeader describes a set of levels and repetitions.
type summaryHeader struct {
	method      string
	path        string
	clients     int
	warmup      time.Duration
	duration    time.Duration
	levels      int
	repetitions int
	bases       []string // the target, then the comparison target, if any
}

// describe returns the set's load in one line.
func (h summaryHeader) describe() string {
	return fmt.Sprintf("%s %s, %d client addresses, %d %s × %d %s, %v measured per target per level per repetition after a %v warm-up",
		h.method, h.path, h.clients, h.levels, plural(h.levels, "level", "levels"),
		h.repetitions, plural(h.repetitions, "repetition", "repetitions"), h.duration, h.warmup)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// targetLabels are the rows' names in the text summary, by target index.
var targetLabels = [...]string{"target", "compare"}

// writeThroughputSummary prints, per level, the median rate of each target
// over the repetitions with each repetition's figure, the ratio of the
// medians (target/compare), the median p50 and p99, and the non-2xx
// answers and errors summed over the repetitions, so a broken run cannot
// hide in a median; then each target's peak and the peak ratio; then the
// same as Markdown tables.
func writeThroughputSummary(w io.Writer, h summaryHeader, levels []levelSummary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "summary: %s\n", h.describe())
	for i, base := range h.bases {
		fmt.Fprintf(&b, "%-8s %s\n", targetLabels[i]+":", base)
	}
	b.WriteByte('\n')

	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 3, ' ', 0)
	fmt.Fprint(tw, "connections\t\treq/s\teach repetition\tp50\tp99\tnon-2xx\terrors\t\n")
	for _, lv := range levels {
		for t, ts := range lv.targets {
			level := ""
			if t == 0 {
				level = strconv.Itoa(lv.connections)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%sms\t%sms\t%d\t%d\t\n", level, targetLabels[t],
				fmtRate(ts.rate), fmtRates(ts.rates), fmtMSf(ts.p50), fmtMSf(ts.p99), ts.non2xx, ts.errors)
		}
		if len(lv.targets) > 1 {
			t, c := lv.targets[0], lv.targets[1]
			fmt.Fprintf(tw, "\ttarget/compare\t%s\t\t%s\t%s\t\t\t\n",
				fmtRatio(t.rate, c.rate), fmtRatio(t.p50, c.p50), fmtRatio(t.p99, c.p99))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(table.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteByte('\n')
	}

	pk := peaks(levels)
	b.WriteString("\npeak:")
	for t, p := range pk {
		if t > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s %s req/s at %d connections", targetLabels[t], fmtRate(p.rate), p.connections)
	}
	if len(pk) > 1 {
		fmt.Fprintf(&b, "; peak ratio (target/compare): %s", fmtRatio(pk[0].rate, pk[1].rate))
	}
	b.WriteByte('\n')
	// A peak at the highest level may not be the target's capacity: its
	// rate may still be rising with the connections.
	highest := 0
	for _, lv := range levels {
		highest = max(highest, lv.connections)
	}
	for t, p := range pk {
		if p.connections == highest {
			fmt.Fprintf(&b, "%s peaked at the highest level measured, %d connections: its capacity may be higher (add a higher level)\n", targetLabels[t], highest)
		}
	}

	b.WriteString("\nreq/s: median over the repetitions; p50, p99: medians of the repetitions' percentiles; " +
		"non-2xx (answers outside 200-299) and errors (no answer): summed over the repetitions.\n")
	var capped []string
	for _, lv := range levels {
		for t, ts := range lv.targets {
			if ts.capped > 0 {
				capped = append(capped, fmt.Sprintf("%s at %d connections: %d of %d", targetLabels[t], lv.connections, ts.capped, len(ts.rates)))
			}
		}
	}
	if len(capped) > 0 {
		fmt.Fprintf(&b, "the -requests cap ended runs early (their rates cover less than -duration): %s\n", strings.Join(capped, "; "))
	}

	b.WriteByte('\n')
	writeSummaryMarkdown(&b, h, levels, pk)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSummaryMarkdown appends the summary as Markdown tables: one row per
// level and target, a ratio row per level when there are two targets, and
// the peaks.
func writeSummaryMarkdown(b *strings.Builder, h summaryHeader, levels []levelSummary, pk []throughputPeak) {
	fmt.Fprintf(b, "%s; medians over the repetitions:\n\n", h.describe())
	b.WriteString("| connections | target | req/s | each repetition | p50 ms | p99 ms | non-2xx | errors |\n")
	b.WriteString("|---:|---|---:|---|---:|---:|---:|---:|\n")
	for _, lv := range levels {
		level := strconv.Itoa(lv.connections)
		for _, ts := range lv.targets {
			writeMarkdownRow(b, []string{level, ts.base, fmtRate(ts.rate), fmtRates(ts.rates),
				fmtMSf(ts.p50), fmtMSf(ts.p99), strconv.FormatInt(ts.non2xx, 10), strconv.FormatInt(ts.errors, 10)})
		}
		if len(lv.targets) > 1 {
			t, c := lv.targets[0], lv.targets[1]
			writeMarkdownRow(b, []string{level, "target/compare", fmtRatio(t.rate, c.rate), "",
				fmtRatio(t.p50, c.p50), fmtRatio(t.p99, c.p99), "", ""})
		}
	}
	b.WriteString("\n| peak | req/s | connections |\n|---|---:|---:|\n")
	for _, p := range pk {
		writeMarkdownRow(b, []string{p.base, fmtRate(p.rate), strconv.Itoa(p.connections)})
	}
	if len(pk) > 1 {
		writeMarkdownRow(b, []string{"target/compare", fmtRatio(pk[0].rate, pk[1].rate), ""})
	}
}

// fmtRates formats each repetition's requests per second, in order.
func fmtRates(rates []float64) string {
	s := make([]string, len(rates))
	for i, r := range rates {
		s[i] = fmtRate(r)
	}
	return strings.Join(s, ", ")
}

// fmtMSf formats microseconds, possibly fractional (a median of two), as
// milliseconds to the microsecond.
func fmtMSf(us float64) string { return strconv.FormatFloat(us/1000, 'f', 3, 64) }
