// Command loadtest sends scripted traffic to a running edge node on this
// machine and checks what the edge decided, or measures how fast it
// answers.
//
// Usage:
//
//	go run ./loadtest -scenario seed-trace -target http://127.0.0.1:18080
//	go run ./loadtest -scenario throughput -target http://127.0.0.1:18080 -compare http://127.0.0.1:19000
//	go run ./loadtest -scenario throughput -target http://127.0.0.1:18080 -compare http://127.0.0.1:19000 -connections 32,128,256 -repeat 3
//	go run ./loadtest -scenario throughput -target http://127.0.0.1:18080 -target-metrics http://127.0.0.1:19901/metrics -compare http://127.0.0.1:18081 -compare-metrics http://127.0.0.1:19902/metrics -connections 32,128,256 -repeat 3
//	go run ./loadtest -scenario cgnat-crowd -target http://127.0.0.1:18080
//	go run ./loadtest -scenario plain -target http://127.0.0.1:18080 -rate 20000 -connections 64
//	go run ./loadtest -scenario mixed -target http://127.0.0.1:8080 -connections 32
//
// Scenarios are functions of a context and a config, registered by name in
// scenarios, with their own -duration and -requests defaults if they need
// them. Every run is bounded in time (-duration) and in requests
// (-requests), and only loopback targets are accepted: this is a test tool,
// not a traffic generator for other people's hosts.
//
// The throughput scenario measures capacity, the highest rate a target
// sustains. With a list of -connections levels it reports each target's
// peak over the levels and the ratio of the peaks: at few connections a
// target whose requests wait on a network round trip (an edge node on
// Redis) is bound by latency, rate = connections ÷ latency (Little's law),
// not by CPU, so the ratio at one such level understates its capacity.
// -repeat interleaves repetitions of the levels so a shared machine's
// drift weighs on both targets alike, and the summary gives medians.
// -target-metrics and -compare-metrics name an edge node's /metrics,
// scraped right before and right after each run's measured part (the
// scrapes bracket it, requests in flight at its edges included), to count
// the rule decisions its store made and those its rules' on_store_error
// answered instead (fallbacks): a node that fails open forwards requests
// uncounted and looks faster, so the peak is taken only over the levels
// where the store decided every request, and a scrape that fails fails
// the run.
//
// The plain and mixed scenarios (one route; a blend of login, signup,
// OTP and API traffic from IPv4 and IPv6 clients and a few attackers) run
// in a closed loop of -connections or, with -rate, an open loop whose
// latencies are measured from each request's due time, so a stall shows
// in the percentiles instead of hiding behind the connections it holds
// (coordinated omission); their report ends with a result line for
// scripts such as bench/run.sh.
//
// Exit status: 0 when the scenario passed, 1 when the edge's decisions
// differed from the expected ones, 2 on a usage or connection error.
package main
