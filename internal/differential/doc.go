// Package differential holds the differential harness against real origin
// stacks (issue 9, item 2; the method is docs/differential.md). It has no
// code of its own: its tests start the real edge in process on loopback in
// front of small origin apps, one per framework (Go's net/http in process;
// PHP, Flask, Django, Express and Rack as real processes from Debian's
// packages, their sources under testdata/origins/), send a corpus of hostile
// and fuzzed requests through the edge, and prove black-box that for every
// request the edge either refused it or counted each value every idiom of
// the stack read.
//
// The test prints one line per stack,
//
//	differential: STACK requests=N disagreements=M
//
// and fails when M > 0. Run it with
//
//	go test -count=1 -v -run TestDifferential ./internal/differential/
//
// (go test hides a passing package's output in package-list mode without
// -v). -differential.fuzz=N sets the fuzzed requests per variant,
// -differential.seed their seed, and -differential.report=FILE writes the
// disagreements grouped by class as Markdown. A stack whose interpreter or
// framework is not installed is skipped, or fails when EDGE_REQUIRE_STACKS=1
// (CI sets it).
package differential
