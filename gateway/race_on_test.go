//go:build race

package gateway

// raceEnabled: the race detector multiplies latencies, so latency bounds
// are asserted in the run without it (.ci/run makes one).
const raceEnabled = true
