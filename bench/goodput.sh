#!/usr/bin/env bash
# bench/goodput.sh: goodput under attack, the edge against NGINX limit_req
# (issue 27, goal 3; also bench/run.sh goodput).
#
# Builds the edge and the load tool, starts on loopback the demo origin,
# the edge on bench/goodput.hcl (one per-IP rule on POST /login and POST
# /otp/send: 1 a second, a burst of 5, a bare 429) and NGINX on
# bench/goodput-nginx.conf (the same rule as limit_req), then:
#
#   1. measures the edge's pass-through capacity: the load tool's plain
#      scenario, GET /api/bench (which no rule matches) in a closed loop
#      of 128 connections, -capacity-duration long;
#   2. sets the flood's rate to -factor times that (3 by default), or to
#      -flood-rate when given;
#   3. runs the load tool's goodput scenario against each target in
#      alternation, -rounds times (edge nginx, edge nginx, …): the flood,
#      POST /login from -clients addresses (10,000) in an open loop at that
#      rate over -connections connections, and at the same time -users
#      people (50) logging in and sending OTPs at -user-rate in all (one
#      each every 2 seconds), in an open loop of their own, latencies from each
#      request's due time in HDR histograms;
#   4. prints each round, then per target the medians and the spread (min
#      and max over the rounds) of the users' success share and p99, the
#      flood's answered rate and the share of it refused, and the goals
#      (users' success ≥ 99%, their p99 ≤ 50 ms) met or not.
#
# Usage: bench/goodput.sh [-rounds 7] [-duration 10s] [-warmup 1s]
#                         [-factor 3] [-flood-rate 0] [-connections 256]
#                         [-clients 10000] [-users 50] [-user-rate 25]
#                         [-capacity-duration 5s] [-targets edge,nginx] [-keep]
# Everything listens on 127.0.0.1 on free ports and stops when the script
# ends. The load tool shares the machine's cores with the target and the
# origin: a flood it cannot send shows as the flood's missed requests,
# and the rate it did send is in the report.
set -euo pipefail

rounds=7
duration=10s
warmup=1s
factor=3
floodrate=0
conns=256
clients=10000
users=50
userrate=25
capdur=5s
only=edge,nginx
keep=0
. "$(dirname "$0")/lib.sh"
bench_flags -rounds=rounds -duration=duration -warmup=warmup -factor=factor -flood-rate=floodrate \
	-connections=conns -clients=clients -users=users -user-rate=userrate -capacity-duration=capdur \
	-targets=only -keep=keep=1 -- "$@"
bench_root
pair_setup goodput.sh bench/goodput.hcl bench/goodput-nginx.conf

# resultfield KEY prints KEY's value on stdin's result line.
resultfield() { awk -v k="$1" '/^result: / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }'; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$floodrate" = 0 ]; then
	cap=$("$tmp/loadtest" -scenario plain -target "http://127.0.0.1:${port[edge]}" -path /api/bench -connections 128 \
		-clients 1000 -api-keys 0 -warmup 1s -duration "$capdur" -timeout 2s | resultfield rps)
	floodrate=$(awk -v c="$cap" -v f="$factor" 'BEGIN { printf "%d", c * f }')
	echo "the edge's pass-through capacity: $cap req/s (GET /api/bench, closed loop, 128 connections); the flood: $factor × that = $floodrate req/s" >&2
else
	cap=""
fi

results="$tmp/results"
: >"$results"
for round in $(seq "$rounds"); do
	for t in "${targets[@]}"; do
		out=$("$tmp/loadtest" -scenario goodput -target "http://127.0.0.1:${port[$t]}" -rate "$floodrate" -connections "$conns" \
			-clients "$clients" -users "$users" -user-rate "$userrate" -user-connections "$users" \
			-warmup "$warmup" -duration "$duration" -timeout 2s)
		line=$(echo "$out" | awk '/^result: / {
			for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
			ans = f["flood_2xx"] + f["flood_429"] + f["flood_other"]
			printf "%s %s %s %s %s %s %s %s\n", f["user_success"], f["user_p99_ms"], f["user_max_ms"], f["flood_rps"], (ans > 0 ? f["flood_429"] / ans : 0), f["flood_missed"], f["flood_errors"], f["user_due"] }')
		[ -n "$line" ] || { echo "goodput.sh: the run on $t gave no result:" >&2; echo "$out" >&2; exit 1; }
		read -r succ p99 umax frps refused missed ferr due <<<"$line"
		printf "round %d  %-6s  users %6.2f%% of %s, p99 %7.3fms (max %7.3fms)  flood %8.0f req/s answered, %5.1f%% refused, %s missed, %s errors\n" \
			"$round" "$t" "$(awk -v s="$succ" 'BEGIN { print 100 * s }')" "$due" "$p99" "$umax" "$frps" "$(awk -v s="$refused" 'BEGIN { print 100 * s }')" "$missed" "$ferr" >&2
		echo "$round $t $succ $p99 $frps $refused $missed" >>"$results"
	done
done

echo
echo "bench/goodput.sh: $rounds rounds, $duration per run after a $warmup warm-up; flood $floodrate req/s${cap:+ ($factor × the pass-through capacity of the edge, $cap req/s)} from $clients addresses over $conns connections; $users users at $userrate req/s in all"
machine "$load0"
awk -v targets="${targets[*]}" "$median_awk"'
	function col(t, k,   r) { for (r = 1; r <= rounds; r++) a[r] = v[t, k, r]; return median(a, rounds) }
	function lo(t, k,   r, m) { m = v[t, k, 1]; for (r = 2; r <= rounds; r++) if (v[t, k, r] < m) m = v[t, k, r]; return m }
	function hi(t, k,   r, m) { m = v[t, k, 1]; for (r = 2; r <= rounds; r++) if (v[t, k, r] > m) m = v[t, k, r]; return m }
	{ for (k = 3; k <= 7; k++) v[$2, k, $1] = $k; if ($1 > rounds) rounds = $1 }
	END {
		nt = split(targets, T, " ")
		printf "\n%-6s  %-28s  %-30s  %-26s  %-22s  %s\n", "target", "users served: median (min)", "users p99 ms: median (min-max)", "flood answered req/s", "flood refused", "goals: served ≥ 99%, p99 ≤ 50 ms"
		for (t = 1; t <= nt; t++) {
			s = col(T[t], 3); p = col(T[t], 4)
			printf "%-6s  %8.2f%% (%.2f%%)%10s  %8.3f (%.3f-%.3f)%9s  %8.0f (%.0f-%.0f)  %6.1f%% (%.1f-%.1f%%)  %s, %s\n", T[t],
				100 * s, 100 * lo(T[t], 3), "", p, lo(T[t], 4), hi(T[t], 4), "", col(T[t], 5), lo(T[t], 5), hi(T[t], 5),
				100 * col(T[t], 6), 100 * lo(T[t], 6), 100 * hi(T[t], 6), (s >= 0.99 ? "met" : "not met"), (p <= 50 ? "met" : "not met")
		}
	}' "$results"
