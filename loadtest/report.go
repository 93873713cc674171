package main

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/valyala/fasthttp"
)

// observation is one answer the edge gave in a replay.
type observation struct {
	status int           // HTTP status
	late   time.Duration // send time minus the trace's time (stagger included)
}

// allowed reports whether the edge let the request through: any answer
// but 429 counts, since the edge refuses with 429 and the origin answers
// whatever it answers.
func (o observation) allowed() bool { return o.status != fasthttp.StatusTooManyRequests }

// algoResult is one algorithm's replay: what the fixture expects and what
// the edge answered.
type algoResult struct {
	algorithm string
	path      string
	client    netip.Addr
	at        []float64 // the trace's times, seconds after t=0
	want      []bool    // allowed, per the fixture
	got       []observation
}

// mismatches returns the indices where the edge decided otherwise than the
// fixture, including requests that got no answer.
func (r *algoResult) mismatches() []int {
	var out []int
	for i, want := range r.want {
		if i >= len(r.got) || r.got[i].allowed() != want {
			out = append(out, i)
		}
	}
	return out
}

// counts returns how many requests the edge allowed and refused.
func (r *algoResult) counts() (allowed, refused int) {
	for _, o := range r.got {
		if o.allowed() {
			allowed++
		} else {
			refused++
		}
	}
	return allowed, refused
}

// wantCounts returns how many requests the fixture allows and refuses.
func (r *algoResult) wantCounts() (allowed, refused int) {
	for _, w := range r.want {
		if w {
			allowed++
		} else {
			refused++
		}
	}
	return allowed, refused
}

// reportHeader describes the run at the top of the report.
type reportHeader struct {
	scenario string
	target   string
	trace    string
	t0       time.Time
	stagger  time.Duration
}

// writeReport prints one table per algorithm and a summary, and returns
// the number of mismatched decisions.
func writeReport(w io.Writer, h reportHeader, results []algoResult) (int, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s against %s\n", h.scenario, h.target)
	fmt.Fprintf(&b, "fixture %s, t=0 at %s (Unix %d.%09d), stagger %v per request\n",
		h.trace, h.t0.UTC().Format(time.RFC3339Nano), h.t0.Unix(), h.t0.Nanosecond(), h.stagger)

	total := 0
	var failed []string
	for i := range results {
		r := &results[i]
		bad := r.mismatches()
		total += len(bad)
		if len(bad) > 0 {
			failed = append(failed, fmt.Sprintf("%s (%d)", r.algorithm, len(bad)))
		}
		isBad := make(map[int]bool, len(bad))
		for _, j := range bad {
			isBad[j] = true
		}

		fmt.Fprintf(&b, "\n%s: GET %s as client %s\n", r.algorithm, r.path, r.client)
		var table strings.Builder
		tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tt (s)\twant\tgot\tstatus\tlate\t")
		for j, want := range r.want {
			got, status, late, mark := "-", "-", "-", ""
			if j < len(r.got) {
				o := r.got[j]
				got = decisionWord(o.allowed())
				status = fmt.Sprint(o.status)
				late = fmt.Sprintf("%+.3fms", float64(o.late)/float64(time.Millisecond))
			}
			if isBad[j] {
				mark = "MISMATCH"
			}
			fmt.Fprintf(tw, "  %d\t%.3f\t%s\t%s\t%s\t%s\t%s\n", j+1, r.at[j], decisionWord(want), got, status, late, mark)
		}
		if err := tw.Flush(); err != nil {
			return 0, err
		}
		for line := range strings.Lines(table.String()) {
			b.WriteString(strings.TrimRight(line, " \n"))
			b.WriteByte('\n')
		}
		ga, gr := r.counts()
		wa, wr := r.wantCounts()
		verdict := "ok"
		if len(bad) > 0 {
			verdict = fmt.Sprintf("%d MISMATCHED", len(bad))
		}
		fmt.Fprintf(&b, "  allowed %d (fixture %d), refused %d (fixture %d): %s\n", ga, wa, gr, wr, verdict)
	}

	if total == 0 {
		fmt.Fprintf(&b, "\nall %d algorithms match the fixture\n", len(results))
	} else {
		fmt.Fprintf(&b, "\nMISMATCH: %d decisions differ: %s\n", total, strings.Join(failed, ", "))
		fmt.Fprintf(&b, "(points on a boundary are the sensitive ones: see the late column)\n")
	}
	_, err := io.WriteString(w, b.String())
	return total, err
}

func decisionWord(allowed bool) string {
	if allowed {
		return "allow"
	}
	return "refuse"
}
