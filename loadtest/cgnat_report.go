package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// writeCgnatReport writes the cgnat-crowd report: the policy's numbers as
// the scenario assumed them, phase 1, the crowd, the attacker against its
// bounds, and the verdict.
func writeCgnatReport(w io.Writer, r *cgnatResult) error {
	p := r.p
	var b strings.Builder
	fmt.Fprintf(&b, "cgnat-crowd: %d visitors and one cookie-cycling attacker behind %s (X-Forwarded-For), %s\n",
		p.visitors, r.client, r.target)
	fmt.Fprintf(&b, "policy (from the flags): %d per %v per visitor (gcra, burst %d), ip_ceiling %d, new visitor IDs %d per %v per IP\n",
		p.limit, p.period, p.limit, p.ipCeiling, p.mintLimit, p.mintPeriod)

	ph := &r.phase1
	fmt.Fprintf(&b, "\nphase 1, visitor IDs: %d × GET %s without a cookie, %d connections\n", p.visitors, mintPath, r.connections)
	fmt.Fprintf(&b, "  IDs           %d of %d  (answers: %s)  %s\n", ph.cookies, p.visitors, statusList(ph.statuses), fmtSeconds(ph.elapsed))

	if r.ran2 {
		c, a, bd := &r.crowd, &r.attack, &r.bound
		fmt.Fprintf(&b, "\nphase 2, one period (%v) of GET %s\n", p.period, r.path)
		fmt.Fprintf(&b, "  crowd: %d visitors × %d requests (%s of %d) = %d, spread over the period, each with its own ID, %d connections\n",
			p.visitors, p.perVisitor(), percent(p.perVisitor(), p.limit), p.limit, c.planned, r.connections)
		fmt.Fprintf(&b, "    sent            %d\n", c.sent)
		fmt.Fprintf(&b, "    served (200)    %d\n", c.served)
		fmt.Fprintf(&b, "    refused (429)   %d\n", c.refused)
		fmt.Fprintf(&b, "    other           %d%s\n", otherCount(c.other), otherSuffix(c.other))
		fmt.Fprintf(&b, "    new IDs         %d  (answers that re-issued an ID: the edge did not accept the visitor's)\n", c.reissued)
		fmt.Fprintf(&b, "    visitors refused at least once: %d of %d\n", c.visitorsRefused, p.visitors)
		fmt.Fprintf(&b, "    last answer %s after the start; sent at most %s late; slowest answer %s\n",
			fmtSeconds(c.elapsed), fmtMillis(c.maxLate), fmtMillis(c.maxLatency))
		fmt.Fprintf(&b, "    all served: %s\n", yesNo(c.served == c.planned && c.reissued == 0))

		fmt.Fprintf(&b, "  attacker: %d requests without a cookie (it drops each new ID), spread over the period, one connection\n", p.attacks)
		fmt.Fprintf(&b, "    sent            %d  in %s\n", a.sent, fmtSeconds(a.elapsed))
		fmt.Fprintf(&b, "    passes (200)    %d  bound %d = cookieless burst %d + ⌊%s / %s⌋ (the IP's cookieless bucket, %d per %v, over the attack + %v clock allowance)\n",
			a.passes, bd.passes, p.limit, fmtSeconds(bd.passSpan), emission(p.limit, p.period), p.limit, p.period, clockAllowance)
		fmt.Fprintf(&b, "    IDs obtained    %d  bound %d = min(passes bound %d, mint budget left %d = %d + ⌊%s / %s⌋ − %d IDs of the crowd)\n",
			a.cookies, bd.cookies, bd.passes, bd.mintLeft, p.mintLimit, fmtSeconds(bd.mintSpan), emission(p.mintLimit, p.mintPeriod), bd.crowdIDs)
		fmt.Fprintf(&b, "    refused (429)   %d\n", a.refused)
		fmt.Fprintf(&b, "    other           %d%s\n", otherCount(a.other), otherSuffix(a.other))
		fmt.Fprintf(&b, "    held to its bound: %s\n", yesNo(a.passes <= bd.passes && a.cookies <= bd.cookies))
		fmt.Fprintf(&b, "  IP ceiling: %d crowd + %d attacker = %d passed, ceiling %d per %v\n",
			c.served, a.passes, c.served+a.passes, p.ipCeiling, p.period)
	} else {
		fmt.Fprintf(&b, "\nphase 2 not run: every visitor needs an ID first\n")
	}

	if f := r.failures(); len(f) > 0 {
		fmt.Fprintf(&b, "\ncgnat-crowd: FAIL: %s\n", strings.Join(f, "; "))
	} else {
		fmt.Fprintf(&b, "\ncgnat-crowd: ok: all %d crowd requests served; attacker held to %d passes and %d IDs (bounds %d and %d)\n",
			r.crowd.planned, r.attack.passes, r.attack.cookies, r.bound.passes, r.bound.cookies)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// statusList renders answers by status, "200 ×500, 429 ×3"; "none" when
// empty.
func statusList(m map[int]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d ×%d", s, m[s]))
	}
	return strings.Join(parts, ", ")
}

// otherSuffix lists the other statuses after their count, if any.
func otherSuffix(m map[int]int64) string {
	if len(m) == 0 {
		return ""
	}
	return "  (" + statusList(m) + ")"
}

// percent renders n/d as a whole percentage.
func percent(n, d int64) string {
	if d == 0 {
		return "0%"
	}
	return fmt.Sprintf("%d%%", n*100/d)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// fmtSeconds renders d in seconds with milliseconds, "10.004s".
func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// fmtMillis renders d in milliseconds with a decimal, "3.1ms".
func fmtMillis(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
