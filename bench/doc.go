// Package bench holds the side-by-side benchmark of issue 16, the edge
// against NGINX limit_req, and its tests; it has no code of its own.
//
//	bench/run.sh       builds what it needs, starts the demo origin, the edge
//	                   on policy.hcl and on empty.hcl (memory store), minproxy
//	                   and NGINX on nginx.conf, all on loopback, loads each in
//	                   alternation and prints the median ratios
//	bench/policy.hcl   five rules that match every request of the load and
//	                   never refuse it: per address, per /24, per API key, per
//	                   route, and a dry-run shadow
//	bench/empty.hcl    the same edge with no rules
//	bench/nginx.conf   NGINX as a user would deploy it (a template run.sh fills in)
//	bench/minproxy     a fasthttp reverse proxy with no rules, the floor of Go
//
// The tests check that both policies pass `edge validate`, that the edge
// on policy.hcl decides every request of the bench load with each of its
// five rules and forwards it, that NGINX accepts nginx.conf (`nginx -t`)
// and forwards the load unrefused, and that minproxy forwards it. How to
// run the benchmark: BENCHMARKS.md ("Performance against NGINX").
package bench
