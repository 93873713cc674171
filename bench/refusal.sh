#!/usr/bin/env bash
# bench/refusal.sh: the refusal path, the edge against NGINX limit_req
# (issue 27, goal 2; also bench/run.sh refusal).
#
# Builds the edge and the load tool, starts on loopback the demo origin,
# the edge on bench/refusal.hcl (per client address, 1 an hour, burst 1,
# a sensitive rule: a bare 429 from the memory store) and NGINX on
# bench/refusal-nginx.conf (limit_req per client address at 1 a minute, no
# burst), spends each of the load's 1000 addresses' one allowed request on
# both, then loads each in alternation, every round and level in the same
# order, with the load tool's plain scenario (GET /api/bench from 1000
# addresses in X-Forwarded-For, a closed loop of N connections), so that
# nearly every answer is a 429 that never reaches the origin. For each run
# it reads the target's CPU time (its process and NGINX's workers,
# /proc/PID/stat) before and after, and prints the medians over the
# rounds and the spread (min-max): refusals a second, CPU µs per answer,
# and the median of the rounds' ratios edge ÷ nginx (goal: ≥ 1.2).
#
# Usage: bench/refusal.sh [-rounds 7] [-levels 32,128] [-duration 10s]
#                         [-targets edge,nginx] [-keep]
# Everything listens on 127.0.0.1 on free ports and stops when the script
# ends. The load tool shares the cores with the target; CPU per answer is
# the target's own, whatever the load tool took.
set -euo pipefail

rounds=7
levels=32,128
duration=10s
only=edge,nginx
keep=0
. "$(dirname "$0")/lib.sh"
bench_flags -rounds=rounds -levels=levels -duration=duration -targets=only -keep=keep=1 -- "$@"
bench_root
pair_setup refusal.sh bench/refusal.hcl bench/refusal-nginx.conf
hz=$(getconf CLK_TCK)

# plain TARGET CONNECTIONS DURATION runs the plain scenario and prints its
# result line's requests, 2xx, non2xx, errors and rps.
plain() {
	"$tmp/loadtest" -scenario plain -target "http://127.0.0.1:${port[$1]}" -path /api/bench -connections "$2" \
		-clients 1000 -api-keys 0 -warmup 0s -duration "$3" -timeout 2s | awk '/^result: / {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		printf "%s %s %s %s %s\n", f["requests"], f["2xx"], f["non2xx"], f["errors"], f["rps"] }'
}

# Each address's one allowed request, spent before anything is measured.
for t in "${targets[@]}"; do
	read -r n ok refused _ _ <<<"$(plain "$t" 32 2s)"
	echo "$t: primed, $ok of $n requests forwarded, $refused refused" >&2
done

load0=$(cut -d' ' -f1-3 /proc/loadavg)
results="$tmp/results"
: >"$results"
for round in $(seq "$rounds"); do
	for c in ${levels//,/ }; do
		for t in "${targets[@]}"; do
			before=$(cpu_ticks "${pid[$t]}")
			line=$(plain "$t" "$c" "$duration")
			after=$(cpu_ticks "${pid[$t]}")
			read -r n ok refused err rps <<<"$line"
			[ -n "$rps" ] || { echo "refusal.sh: the load on $t at $c connections gave no result" >&2; exit 1; }
			# refusals a second: the rate of the answers that were refusals;
			# CPU per answer over the run (its c opening requests included).
			awk -v r="$round" -v c="$c" -v t="$t" -v n="$n" -v ok="$ok" -v ref="$refused" -v err="$err" -v rps="$rps" \
				-v cpu="$((after - before))" -v hz="$hz" 'BEGIN {
				rr = n > 0 ? rps * ref / n : 0; us = 1e6 * cpu / hz / (n + c)
				printf "round %d  %4d conns  %-6s  %8.0f refusals/s  %6.1f µs CPU an answer  (%d answers, %d forwarded, %d errors)\n", r, c, t, rr, us, n, ok, err > "/dev/stderr"
				print r, c, t, rr, us, ok, err }' >>"$results"
		done
	done
done

echo
echo "bench/refusal.sh: GET /api/bench from 1000 refused addresses, closed loop, $rounds rounds, $duration per run"
machine "$load0"
awk -v targets="${targets[*]}" -v levels="${levels//,/ }" "$median_awk"'
	function stat(c, t, k,   r) { lo = hi = v[c, t, k, 1]; for (r = 1; r <= rounds; r++) { a[r] = v[c, t, k, r]; if (a[r] < lo) lo = a[r]; if (a[r] > hi) hi = a[r] }; return median(a, rounds) }
	{ v[$2, $3, 4, $1] = $4; v[$2, $3, 5, $1] = $5; fwd[$2, $3] += $6; err[$2, $3] += $7; if ($1 > rounds) rounds = $1 }
	END {
		nt = split(targets, T, " "); nl = split(levels, L, " ")
		for (l = 1; l <= nl; l++) {
			c = L[l]
			printf "\n%d connections   refusals/s: median (min-max)   CPU µs an answer: median (min-max)   forwarded   errors\n", c
			for (t = 1; t <= nt; t++) {
				m = stat(c, T[t], 4); l1 = lo; h1 = hi; u = stat(c, T[t], 5)
				printf "  %-12s %10.0f (%.0f-%.0f)        %8.1f (%.1f-%.1f)          %9d   %6d\n", T[t], m, l1, h1, u, lo, hi, fwd[c, T[t]], err[c, T[t]]
			}
			if (nt == 2) {
				for (r = 1; r <= rounds; r++) a[r] = v[c, "nginx", 4, r] > 0 ? v[c, "edge", 4, r] / v[c, "nginx", 4, r] : 0
				q = median(a, rounds)
				printf "  edge ÷ nginx, refusals/s, median of the rounds'"'"' ratios: %.2f× (goal ≥ 1.2×: %s)\n", q, (q >= 1.2 ? "met" : "not met")
			}
		}
	}' "$results"
