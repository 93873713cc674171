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
	scraped := anyScraped(results)
	if scraped {
		row("store decisions", func(r *loadResult) string {
			if r.decisions == nil {
				return "n/a"
			}
			return strconv.FormatInt(r.decisions.stored(), 10)
		})
		row("fallback decisions", func(r *loadResult) string {
			if r.decisions == nil {
				return "n/a"
			}
			return withBreakdown(r.decisions.fallbacks(), fallbackBreakdown(*r.decisions))
		})
		row("fallback share", func(r *loadResult) string {
			if r.decisions == nil {
				return "n/a"
			}
			return fmtShare(r.decisions.fallbacks(), r.decisions.stored()+r.decisions.fallbacks())
		})
	}
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
	if scraped {
		b.WriteString("\nstore decisions (allow, deny, dry_run_deny) and fallback decisions (store_error_allow, store_error_deny, " +
			"the rules' on_store_error answers): edge_decisions_total summed over the rules, from a scrape as the warm-up ended " +
			"to one after the last answer\n")
		for i, r := range results {
			if r.decisions == nil {
				continue
			}
			if note := decisionsNote(*r.decisions); note != "" {
				fmt.Fprintf(b, "%s: %s\n", targetLabels[i], note)
			}
		}
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
	scraped := anyScraped(results)
	b.WriteString("| target | requests | req/s | 200 | 429 | 503 | other | errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |")
	if scraped {
		b.WriteString(" store decisions | fallback decisions | fallback share |")
	}
	b.WriteString("\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	if scraped {
		b.WriteString("---:|---:|---:|")
	}
	b.WriteString("\n")
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
		switch d := r.decisions; {
		case d != nil:
			cells = append(cells, strconv.FormatInt(d.stored(), 10), strconv.FormatInt(d.fallbacks(), 10),
				fmtShare(d.fallbacks(), d.stored()+d.fallbacks()))
		case scraped:
			cells = append(cells, "n/a", "n/a", "n/a")
		}
		writeMarkdownRow(b, cells)
	}
	if len(results) > 1 {
		t, c := results[0], results[1]
		cells := []string{"target/compare", "", fmtRatio(t.rate(), c.rate()), "", "", "", "", ""}
		for _, lq := range latencyQuantiles {
			cells = append(cells, fmtRatio(float64(t.hist.ValueAtQuantile(lq.q)), float64(c.hist.ValueAtQuantile(lq.q))))
		}
		cells = append(cells, fmtRatio(float64(t.hist.Max()), float64(c.hist.Max())))
		if scraped {
			cells = append(cells, "", "", "")
		}
		writeMarkdownRow(b, cells)
	}
}

// anyScraped reports whether any of results has decision counts.
func anyScraped(results []*loadResult) bool {
	return slices.ContainsFunc(results, func(r *loadResult) bool { return r.decisions != nil })
}

// fallbackBreakdown lists the fallback decisions by kind,
// "store_error_allow: 2".
func fallbackBreakdown(d decisionCounts) []string {
	var out []string
	if d.storeErrorAllow > 0 {
		out = append(out, fmt.Sprintf("store_error_allow: %d", d.storeErrorAllow))
	}
	if d.storeErrorDeny > 0 {
		out = append(out, fmt.Sprintf("store_error_deny: %d", d.storeErrorDeny))
	}
	return out
}

// decisionsNote says why a run's decisions make its rate no measure of
// the store's capacity: fallbacks (the store did not decide them) or no
// decision at all (no rule was at work); "" when neither.
func decisionsNote(d decisionCounts) string {
	all := d.stored() + d.fallbacks()
	switch {
	case all == 0:
		return "no rule decided any request (edge_decisions_total did not move): -path matches no rule, or the metrics are another node's; this rate is not the store's capacity"
	case d.fallbacks() > 0:
		return fmt.Sprintf("%d of %d rule decisions (%s) were on_store_error fallbacks: the store did not decide every request, so this rate is not its capacity",
			d.fallbacks(), all, fmtShare(d.fallbacks(), all))
	}
	return ""
}

// fmtShare formats part/whole as a percentage to one decimal, "n/a" when
// whole is 0. Only none is "0%" and only all "100%": a share that rounds
// to either is "<0.1%" or ">99.9%", so one fallback among a million
// decisions does not read as none.
func fmtShare(part, whole int64) string {
	switch {
	case whole == 0:
		return "n/a"
	case part == 0:
		return "0%"
	case part == whole:
		return "100%"
	}
	s := strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64)
	switch s {
	case "0.0":
		return "<0.1%"
	case "100.0":
		return ">99.9%"
	}
	return s + "%"
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

	// With the target's metrics scraped on every repetition (scraped),
	// its rule decisions summed over the repetitions: those its store
	// made and its on_store_error fallbacks.
	scraped           bool
	stored, fallbacks int64
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
			ts := targetSummary{base: lv.runs[0][t].base, scraped: true}
			var p50s, p99s []float64
			for _, run := range lv.runs {
				r := run[t]
				if r.decisions == nil {
					ts.scraped = false
				} else {
					ts.stored += r.decisions.stored()
					ts.fallbacks += r.decisions.fallbacks()
				}
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

// capacityProblems returns why lv's rates are not capacity figures, one
// phrase per target whose metrics were scraped and whose store did not
// decide every request at that level: it made on_store_error fallback
// decisions, or no rule decided anything. None: lv may give a capacity.
// Targets without metrics are not judged.
func (lv levelSummary) capacityProblems() []string {
	var out []string
	for t, ts := range lv.targets {
		if !ts.scraped {
			continue
		}
		all := ts.stored + ts.fallbacks
		switch {
		case all == 0:
			out = append(out, targetLabels[t]+" made no rule decisions: -path matches no rule there, so the store decided nothing")
		case ts.fallbacks > 0:
			out = append(out, fmt.Sprintf("%s made %d on_store_error fallback decisions of %d (%s): the store did not decide every request",
				targetLabels[t], ts.fallbacks, all, fmtShare(ts.fallbacks, all)))
		}
	}
	return out
}

// capacityLevels returns the levels whose rates may be read as
// capacities: those without capacityProblems. A node that falls back to
// on_store_error "allow" forwards requests uncounted and looks faster
// while doing less work, so its peak must not come from such a level.
func capacityLevels(levels []levelSummary) []levelSummary {
	var out []levelSummary
	for _, lv := range levels {
		if len(lv.capacityProblems()) == 0 {
			out = append(out, lv)
		}
	}
	return out
}

// anyLevelScraped reports whether any target's metrics were scraped.
func anyLevelScraped(levels []levelSummary) bool {
	for _, lv := range levels {
		for _, ts := range lv.targets {
			if ts.scraped {
				return true
			}
		}
	}
	return false
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
// same as Markdown tables. With metrics scraped, it also prints the rule
// decisions summed over the repetitions (the store's and the fallbacks),
// names the levels where the store did not decide every request, and
// takes the peaks over the other levels only.
func writeThroughputSummary(w io.Writer, h summaryHeader, levels []levelSummary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "summary: %s\n", h.describe())
	for i, base := range h.bases {
		fmt.Fprintf(&b, "%-8s %s\n", targetLabels[i]+":", base)
	}
	b.WriteByte('\n')

	scraped := anyLevelScraped(levels)
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 3, ' ', 0)
	fmt.Fprint(tw, "connections\t\treq/s\teach repetition\tp50\tp99\tnon-2xx\terrors\t")
	if scraped {
		fmt.Fprint(tw, "store decisions\tfallback decisions\t")
	}
	fmt.Fprint(tw, "\n")
	for _, lv := range levels {
		for t, ts := range lv.targets {
			level := ""
			if t == 0 {
				level = strconv.Itoa(lv.connections)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%sms\t%sms\t%d\t%d\t", level, targetLabels[t],
				fmtRate(ts.rate), fmtRates(ts.rates), fmtMSf(ts.p50), fmtMSf(ts.p99), ts.non2xx, ts.errors)
			if scraped {
				stored, fallbacks := summaryDecisions(ts)
				fmt.Fprintf(tw, "%s\t%s\t", stored, fallbacks)
			}
			fmt.Fprint(tw, "\n")
		}
		if len(lv.targets) > 1 {
			t, c := lv.targets[0], lv.targets[1]
			fmt.Fprintf(tw, "\ttarget/compare\t%s\t\t%s\t%s\t\t\t",
				fmtRatio(t.rate, c.rate), fmtRatio(t.p50, c.p50), fmtRatio(t.p99, c.p99))
			if scraped {
				fmt.Fprint(tw, "\t\t")
			}
			fmt.Fprint(tw, "\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(table.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteByte('\n')
	}

	b.WriteByte('\n')
	usable := levels
	if scraped {
		for _, lv := range levels {
			if problems := lv.capacityProblems(); len(problems) > 0 {
				fmt.Fprintf(&b, "not valid for capacity: %d connections, where %s\n",
					lv.connections, strings.Join(problems, " and "))
			}
		}
		usable = capacityLevels(levels)
	}
	pk := peaks(usable)
	switch {
	case len(pk) == 0:
		b.WriteString("peak: none: there is no level where the store decided every request, so no rate above is a capacity and there is no peak ratio\n")
	case scraped:
		b.WriteString("peak over levels where the store decided every request:")
	default:
		b.WriteString("peak:")
	}
	for t, p := range pk {
		if t > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s %s req/s at %d connections", targetLabels[t], fmtRate(p.rate), p.connections)
	}
	if len(pk) > 1 {
		fmt.Fprintf(&b, "; peak ratio (target/compare): %s", fmtRatio(pk[0].rate, pk[1].rate))
	}
	if len(pk) > 0 {
		b.WriteByte('\n')
	}
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
	if scraped {
		b.WriteString("store decisions (allow, deny, dry_run_deny) and fallback decisions (store_error_allow, store_error_deny: " +
			"the rules' on_store_error answers; their share of all decisions): edge_decisions_total summed over the rules and the repetitions, " +
			"each run's from a scrape as its warm-up ended to one after its last answer; n/a: no metrics for that target.\n")
	}
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
	writeSummaryMarkdown(&b, h, levels, pk, scraped)
	_, err := io.WriteString(w, b.String())
	return err
}

// summaryDecisions formats a target's summed decisions for the summary:
// the store's, and the fallbacks with their share of all decisions when
// there are any; "n/a" for a target without metrics.
func summaryDecisions(ts targetSummary) (stored, fallbacks string) {
	if !ts.scraped {
		return "n/a", "n/a"
	}
	stored, fallbacks = strconv.FormatInt(ts.stored, 10), strconv.FormatInt(ts.fallbacks, 10)
	if ts.fallbacks > 0 {
		fallbacks += " (" + fmtShare(ts.fallbacks, ts.stored+ts.fallbacks) + ")"
	}
	return stored, fallbacks
}

// writeSummaryMarkdown appends the summary as Markdown tables: one row per
// level and target, a ratio row per level when there are two targets, and
// the peaks pk; with scraped metrics, the decisions' columns, the levels
// not valid for capacity, and the peaks' restriction in the heading.
func writeSummaryMarkdown(b *strings.Builder, h summaryHeader, levels []levelSummary, pk []throughputPeak, scraped bool) {
	fmt.Fprintf(b, "%s; medians over the repetitions:\n\n", h.describe())
	b.WriteString("| connections | target | req/s | each repetition | p50 ms | p99 ms | non-2xx | errors |")
	if scraped {
		b.WriteString(" store decisions | fallback decisions |")
	}
	b.WriteString("\n|---:|---|---:|---|---:|---:|---:|---:|")
	if scraped {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	for _, lv := range levels {
		level := strconv.Itoa(lv.connections)
		for _, ts := range lv.targets {
			cells := []string{level, ts.base, fmtRate(ts.rate), fmtRates(ts.rates),
				fmtMSf(ts.p50), fmtMSf(ts.p99), strconv.FormatInt(ts.non2xx, 10), strconv.FormatInt(ts.errors, 10)}
			if scraped {
				stored, fallbacks := summaryDecisions(ts)
				cells = append(cells, stored, fallbacks)
			}
			writeMarkdownRow(b, cells)
		}
		if len(lv.targets) > 1 {
			t, c := lv.targets[0], lv.targets[1]
			cells := []string{level, "target/compare", fmtRatio(t.rate, c.rate), "",
				fmtRatio(t.p50, c.p50), fmtRatio(t.p99, c.p99), "", ""}
			if scraped {
				cells = append(cells, "", "")
			}
			writeMarkdownRow(b, cells)
		}
	}
	if scraped {
		var invalid []string
		for _, lv := range levels {
			if len(lv.capacityProblems()) > 0 {
				invalid = append(invalid, strconv.Itoa(lv.connections))
			}
		}
		if len(invalid) > 0 {
			fmt.Fprintf(b, "\nNot valid for capacity (fallback decisions, or no rule decision at all): %s connections.\n", strings.Join(invalid, ", "))
		}
	}
	if len(pk) == 0 {
		b.WriteString("\nNo level where the store decided every request: no peak, no peak ratio.\n")
		return
	}
	if scraped {
		b.WriteString("\n| peak over levels where the store decided every request | req/s | connections |\n|---|---:|---:|\n")
	} else {
		b.WriteString("\n| peak | req/s | connections |\n|---|---:|---:|\n")
	}
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
