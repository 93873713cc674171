package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/counter"
)

// algorithms are the policy algorithms of counter's table (Spec.Policy),
// by id: the lesson's six, which every table of Cases' loop, the seed trace
// and the cost tables run. count_distinct's (counter.Distinct) has tables of
// its own (distinct.go).
var algorithms = func() []rules.Algorithm {
	var out []rules.Algorithm
	for _, a := range counter.Algorithms() {
		if a.Spec().Policy {
			out = append(out, a)
		}
	}
	return out
}()

// expectation is a policy algorithm's numbers in the tables every policy
// algorithm replays, at the lesson's setting (5 a second, burst 5), in ms.
type expectation struct {
	// window is a full counter's effective window (fresh) at e into the
	// current second: the five spent, one more fits after an emission
	// interval (200ms) for the buckets, when the window ends for
	// fixed_window, a period later for sliding_log, and for sliding_window
	// once 5×(1−e) + 0 + 1 ≤ 5 in the next window, at e = 200ms.
	window func(e time.Duration) time.Duration
	// reset is the time back to full after five spent at 100ms (the key's
	// TTL; expiry).
	reset float64
	// spent is, five spent at 100ms, the effective window and the wait of
	// a sixth (expiry, retryAdmitted): one emission interval for the
	// buckets, to the window's end for fixed_window, until 5×(1−e) + 1 ≤ 5
	// in the next window (e = 200ms) for sliding_window, and until the five
	// leave for sliding_log.
	spent float64
	// recover is the wait after 3 taken and 4 more charged at 100ms
	// (costCases): 2 units of debt.
	recover float64
}

// expect holds every policy algorithm's expectation. A new algorithm of
// counter's table adds its entry here, its values table (valueCases) and its
// decisions in the seed trace (SeedTracePath); RunWith runs no store
// without them (uncovered).
var expect = map[rules.Algorithm]expectation{
	rules.GCRA:          bucket,
	rules.TokenBucket:   bucket,
	rules.LeakyBucket:   bucket,
	rules.FixedWindow:   {window: func(e time.Duration) time.Duration { return time.Second - e }, reset: 900, spent: 900, recover: 900},
	rules.SlidingWindow: {window: func(e time.Duration) time.Duration { return ms(1200) - e }, reset: 1900, spent: 1100, recover: 1328.572},
	rules.SlidingLog:    {window: func(time.Duration) time.Duration { return time.Second }, reset: 1000, spent: 1000, recover: 1000},
}

// expectOf returns alg's expectation; it panics, naming alg, when expect
// has none (a policy algorithm new to counter's table).
func expectOf(alg rules.Algorithm) expectation {
	e, ok := expect[alg]
	if !ok {
		panic(fmt.Sprintf("storetest: no expectation for %s, a policy algorithm of counter's table: add its entry to expect", alg))
	}
	return e
}

// bucket is gcra's, token_bucket's and leaky_bucket's expectation: they
// decide and report alike when the emission interval is exact (200ms).
var bucket = expectation{window: func(time.Duration) time.Duration { return ms(200) }, reset: 1000, spent: 200, recover: 600}

// uncovered lists what cases lack for counter's table: an algorithm no
// case's op runs, a policy algorithm without its values table (one without
// its expectation cannot build them: expectOf). RunWith runs no store while
// it lists anything.
func uncovered(cases []Case) []string {
	ran := map[rules.Algorithm]bool{}
	names := map[string]bool{}
	for _, c := range cases {
		names[c.Name] = true
		for _, st := range c.Steps {
			for _, op := range st.Ops {
				ran[op.Algorithm] = true
			}
		}
	}
	var out []string
	for _, a := range counter.Algorithms() {
		if !ran[a] {
			out = append(out, fmt.Sprintf("%s: no case runs it", a))
		}
		if !a.Spec().Policy {
			continue
		}
		if !names[a.String()+"/values"] {
			out = append(out, fmt.Sprintf("%s: no values table (valueCases)", a))
		}
	}
	return out
}

// checkCovered fails tb when cases lack anything for counter's table
// (uncovered).
func checkCovered(tb testing.TB, cases []Case) {
	tb.Helper()
	if u := uncovered(cases); len(u) > 0 {
		slices.Sort(u)
		tb.Fatalf("storetest: the cases do not cover counter's table:\n\t%s", strings.Join(u, "\n\t"))
	}
}
