package differential

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// findingsReport renders the runs' disagreements as Markdown, grouped by
// class: per class the cases and the variants that disagreed on them, and
// one example request with what its variant read and the probes' answers.
func findingsReport(runs []*stackRun, cases, fuzz int, seed uint64) string {
	var b strings.Builder
	b.WriteString("# Differential harness findings\n\n")
	fmt.Fprintf(&b, "Written by `go test ./internal/differential/ -differential.report=FILE` (%d requests per variant, %d of them fuzzed with seed %d). Method: docs/differential.md.\n\n", cases, fuzz, seed)
	for _, run := range runs {
		fmt.Fprintf(&b, "    differential: %s requests=%d disagreements=%d\n", run.stack, run.requests, len(run.found))
	}
	b.WriteString("\n")
	byClass := map[string][]disagreement{}
	for _, run := range runs {
		for _, d := range run.found {
			byClass[d.Class] = append(byClass[d.Class], d)
		}
	}
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool { return len(byClass[classes[i]]) > len(byClass[classes[j]]) })
	for _, c := range classes {
		ds := byClass[c]
		fmt.Fprintf(&b, "## %s (%d disagreements)\n\n", c, len(ds))
		// Per case: which variants read which field uncounted.
		type row struct{ variants, fields map[string]bool }
		rows := map[string]*row{}
		var order []string
		for _, d := range ds {
			r := rows[d.Case]
			if r == nil {
				r = &row{map[string]bool{}, map[string]bool{}}
				rows[d.Case] = r
				order = append(order, d.Case)
			}
			r.variants[d.Variant] = true
			r.fields[d.Field+" ("+d.Verdict+")"] = true
		}
		sort.Strings(order)
		b.WriteString("| case | variants | fields |\n|---|---|---|\n")
		for _, name := range order {
			r := rows[name]
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", strings.ReplaceAll(name, "|", `\|`), keys(r.variants), keys(r.fields))
		}
		d := ds[0]
		fmt.Fprintf(&b, "\nExample (%s, `%s`): the origin saw Content-Type %s and read %s; %s %s was %s.\n\n",
			d.Variant, d.Case, strconv.Quote(d.OriginCT), formatRead(d.Read), d.Field, strconv.Quote(string(d.Value)), d.Verdict)
		fmt.Fprintf(&b, "    request: %s\n    probes:  %s\n\n", quoteRequest(d.Request), strings.Join(d.Probes, "; "))
	}
	if len(classes) == 0 {
		b.WriteString("No disagreements.\n")
	}
	return b.String()
}

func keys(m map[string]bool) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}
