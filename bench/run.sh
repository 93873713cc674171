#!/usr/bin/env bash
# bench/run.sh: the edge against NGINX limit_req, side by side (issue 16).
#
# Builds the edge, the load tool and bench/minproxy, starts on loopback
#   origin   the demo origin (edge demo-origin)
#   edge     the edge on bench/policy.hcl (five rules that match every
#            request and refuse none), memory store
#   norules  the edge on bench/empty.hcl (no rules)
#   minproxy bench/minproxy, fasthttp with no rules
#   nginx    NGINX on bench/nginx.conf (limit_req per client address),
#            installed from Debian's nginx-light when missing
# and, with -redis, one redis-server (no persistence) and
#   edge-redis  the edge on bench/policy.hcl's rules, Redis store (the
#               five rules in one script call per request), its store
#               budget -redis-budget (5ms, the default; on a loaded
#               machine Redis misses it and the edge fails open, which
#               fails the run: give it more to measure the store, not
#               the budget)
#   redisrate   bench/redisrate, fasthttp calling go-redis/redis_rate
#               once per request, on the same Redis
# then puts the same load on each in alternation, every round and level
# in the same order (edge nginx minproxy norules origin [edge-redis
# redisrate], edge nginx …), and prints the medians over the rounds and
# the median of each round's ratios: edge ÷ nginx, edge ÷ minproxy,
# edge ÷ norules, and with -redis edge-redis ÷ redisrate and
# edge-redis ÷ edge (requests per second), and the p99 each proxy adds
# over the origin alone. -targets runs a subset, in that order (the
# ratios whose two targets ran are printed).
#
# The load: GET /api/bench, 1000 client addresses in X-Forwarded-For and
# 100 API keys in X-Api-Key, in a closed loop of N connections (the load
# tool's plain scenario, loadtest/README.md), or wrk when it is installed
# (one address and one key then: the rules still match every request).
#
# bench/run.sh goodput [flags] runs bench/goodput.sh instead: the users'
# goodput under a flood, the edge against NGINX; bench/run.sh refusal
# [flags] runs bench/refusal.sh: refusals a second and CPU per refusal in
# a flood the policy refuses, the edge against NGINX (their -h says more).
#
# Usage: bench/run.sh [-rounds 5] [-levels 32,128] [-duration 10s]
#                     [-warmup 1s] [-tool auto|loadtest|wrk]
#                     [-redis] [-redis-budget 5ms]
#                     [-targets edge,edge-redis,redisrate,…] [-keep]
# Everything listens on 127.0.0.1 on free ports, and stops when the
# script ends; each load run is bounded by -warmup + -duration. The
# whole run takes about rounds × levels × targets × (warmup + duration).
# Numbers from a machine that also runs other jobs compare the targets
# under the same conditions, not what any of them does alone.
set -euo pipefail

# bench/run.sh goodput|refusal …: goodput under attack and the refusal
# path (issue 27), bench/goodput.sh and bench/refusal.sh.
case "${1:-}" in
goodput | refusal) exec "$(dirname "$0")/$1.sh" "${@:2}" ;;
esac

rounds=5
levels=32,128
duration=10s
warmup=1s
tool=auto
keep=0
redis=0
redisbudget=5ms
only=""
. "$(dirname "$0")/lib.sh"
bench_flags -rounds=rounds -levels=levels -duration=duration -warmup=warmup -tool=tool -keep=keep=1 \
	-redis=redis=1 -redis-budget=redisbudget -targets=only -- "$@"
check_rounds run.sh 5

bench_root
bench_setup

# ---- what it needs ----------------------------------------------------------
echo "building edge, loadtest, minproxy into $tmp" >&2
go build -o "$tmp/edge" ./cmd/edge
go build -o "$tmp/loadtest" ./loadtest
go build -o "$tmp/minproxy" ./bench/minproxy
targets=(edge nginx minproxy norules origin)
if [ "$redis" = 1 ]; then
	targets+=(edge-redis redisrate)
	redisserver=$(command -v redis-server || true)
	[ -n "$redisserver" ] || { echo "run.sh: -redis needs redis-server (Debian's redis-server package)" >&2; exit 2; }
	(cd bench/redisrate && go build -o "$tmp/redisrate" .)
fi
if [ -n "$only" ]; then
	picked=()
	for t in "${targets[@]}"; do
		case ",$only," in *",$t,"*) picked+=("$t") ;; esac
	done
	for t in ${only//,/ }; do
		case " ${targets[*]} " in *" $t "*) ;; *) echo "run.sh: -targets: no target $t (${targets[*]}; edge-redis and redisrate need -redis)" >&2; exit 2 ;; esac
	done
	targets=("${picked[@]}")
fi
want() { case " ${targets[*]} " in *" $1 "*) return 0 ;; esac; return 1; }
nginx=""
want nginx && need_nginx
wrk=$(command -v wrk || true)
case "$tool" in
auto) if [ -n "$wrk" ]; then tool=wrk; else tool=loadtest; fi ;;
wrk) [ -n "$wrk" ] || { echo "run.sh: -tool wrk, but wrk is not installed" >&2; exit 2; } ;;
loadtest) ;;
*) echo "run.sh: -tool must be auto, loadtest or wrk" >&2; exit 2 ;;
esac


# ---- the targets --------------------------------------------------------------
origin=$(freeport) edge=$(freeport) edgeadmin=$(freeport) norules=$(freeport) norulesadmin=$(freeport)
minproxy=$(freeport) nginxport=$(freeport)

declare -A pid=() # each target's process (NGINX: its master), for its CPU time
"$tmp/edge" demo-origin -listen "127.0.0.1:$origin" >"$tmp/origin.log" 2>&1 &
pids+=($!)
pid[origin]=$!
waitport "$origin" origin
"$tmp/edge" serve -config bench/policy.hcl -store memory -log-level warn \
	-listen "127.0.0.1:$edge" -admin "127.0.0.1:$edgeadmin" -upstream "http://127.0.0.1:$origin" >"$tmp/edge.log" 2>&1 &
pids+=($!)
pid[edge]=$!
"$tmp/edge" serve -config bench/empty.hcl -store memory -log-level warn \
	-listen "127.0.0.1:$norules" -admin "127.0.0.1:$norulesadmin" -upstream "http://127.0.0.1:$origin" >"$tmp/norules.log" 2>&1 &
pids+=($!)
pid[norules]=$!
"$tmp/minproxy" -listen "127.0.0.1:$minproxy" -upstream "127.0.0.1:$origin" >"$tmp/minproxy.log" 2>&1 &
pids+=($!)
pid[minproxy]=$!
if want nginx; then
	start_nginx bench/nginx.conf "$nginxport" "$origin"
	pid[nginx]=${pids[-1]}
fi
declare -A port=([edge]=$edge [nginx]=$nginxport [minproxy]=$minproxy [norules]=$norules [origin]=$origin)
if [ "$redis" = 1 ]; then
	# One Redis for both, without persistence (a snapshot or an AOF
	# rewrite in a run would be noise), on loopback only. The edge's key
	# secret is random: the keys only have to agree within this run.
	redisport=$(freeport) edgeredis=$(freeport) edgeredisadmin=$(freeport) redisrate=$(freeport)
	"$redisserver" --port "$redisport" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$tmp" --logfile "$tmp/redis.log" --daemonize no >/dev/null 2>&1 &
	pids+=($!)
	redispid=$!
	waitport "$redisport" redis
	# bench/policy.hcl's rules with a Redis store block (its budget).
	awk -v url="redis://127.0.0.1:$redisport/0" -v budget="$redisbudget" '
		/^store "memory" \{/ { skip = 1; printf "store \"redis\" {\n  url     = \"%s\"\n  timeout = \"%s\"\n}\n", url, budget; next }
		skip && /^\}/ { skip = 0; next }
		!skip' bench/policy.hcl >"$tmp/policy-redis.hcl"
	EDGE_KEY_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n') "$tmp/edge" serve -config "$tmp/policy-redis.hcl" \
		-log-level warn \
		-listen "127.0.0.1:$edgeredis" -admin "127.0.0.1:$edgeredisadmin" -upstream "http://127.0.0.1:$origin" >"$tmp/edge-redis.log" 2>&1 &
	pids+=($!)
	pid[edge-redis]=$!
	"$tmp/redisrate" -listen "127.0.0.1:$redisrate" -upstream "127.0.0.1:$origin" -redis "127.0.0.1:$redisport" >"$tmp/redisrate.log" 2>&1 &
	pids+=($!)
	pid[redisrate]=$!
	waitport "$edgeredis" edge-redis
	waitport "$redisrate" redisrate
	port[edge-redis]=$edgeredis
	port[redisrate]=$redisrate
fi
waitport "$edge" edge
waitport "$norules" norules
waitport "$minproxy" minproxy
want nginx && waitport "$nginxport" nginx

# ---- one load run -------------------------------------------------------------
# load TARGET CONNECTIONS prints "rps p99_ms non2xx errors" for one run.
secs() { # a Go duration in ms, s or m as whole seconds (rounded up, at least 1), for wrk
	case "$1" in
	*ms) awk -v v="${1%ms}" 'BEGIN { s = int((v + 999) / 1000); print (s < 1 ? 1 : s) }' ;;
	*s) awk -v v="${1%s}" 'BEGIN { s = int(v + 0.999); print (s < 1 ? 1 : s) }' ;;
	*m) echo $((${1%m} * 60)) ;;
	*) echo "run.sh: -tool wrk: duration $1: want ms, s or m" >&2; return 1 ;;
	esac
}
load() {
	local url="http://127.0.0.1:${port[$1]}" c=$2 out
	if [ "$tool" = wrk ]; then
		local hdr=(-H "X-Forwarded-For: 198.18.0.1" -H "X-Api-Key: bench-key-0")
		timeout 60 "$wrk" -t2 -c"$c" -d"$(secs "$warmup")" "${hdr[@]}" "$url/api/bench" >/dev/null
		out=$(timeout "$(($(secs "$duration") + 60))" "$wrk" -t2 -c"$c" -d"$(secs "$duration")" --latency "${hdr[@]}" "$url/api/bench")
		echo "$out" | awk '
			function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
			/Requests\/sec:/ { rps = $2 }
			$1 == "99%" { p99 = ms($2) }
			/Non-2xx or 3xx responses:/ { non = $NF }
			/Socket errors:/ { err = $4 + $6 + $8 + $10; gsub(/,/, "", err) }
			END { printf "%s %.3f %d %d\n", rps, p99, non, err }'
		return
	fi
	out=$("$tmp/loadtest" -scenario plain -target "$url" -path /api/bench -connections "$c" \
		-clients 1000 -api-keys 100 -warmup "$warmup" -duration "$duration" -timeout 2s)
	echo "$out" | awk '/^result: / {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		printf "%s %s %s %s\n", f["rps"], f["p99_ms"], f["non2xx"], f["errors"] }'
}

load0=$(cat /proc/loadavg)
echo "bench: $tool, GET /api/bench, levels $levels, $rounds rounds, $duration measured after a $warmup warm-up per run; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
results="$tmp/results"
: >"$results"
hz=$(getconf CLK_TCK)
# gosecs D prints Go duration D (ms, s or m) in seconds.
gosecs() { awk -v d="$1" 'BEGIN { if (d ~ /ms$/) print d / 1000; else if (d ~ /m$/) print d * 60; else print d + 0 }'; }
runsecs=$(awk -v a="$(gosecs "$warmup")" -v b="$(gosecs "$duration")" 'BEGIN { print a + b }')
for round in $(seq "$rounds"); do
	for c in ${levels//,/ }; do
		for t in "${targets[@]}"; do
			# The target's CPU time over the run (its warm-up too), and
			# Redis's for the two on Redis.
			before=$(cpu_ticks "${pid[$t]}") rbefore=$([ -n "${redispid:-}" ] && cpu_ticks "$redispid" || echo 0)
			line=$(load "$t" "$c")
			after=$(cpu_ticks "${pid[$t]}") rafter=$([ -n "${redispid:-}" ] && cpu_ticks "$redispid" || echo 0)
			read -r rps p99 non err <<<"$line"
			if [ -z "$err" ]; then echo "run.sh: the load on $t at $c connections gave no result" >&2; exit 1; fi
			# CPU µs a request: the run's CPU over its requests at the
			# measured rate through warm-up and window alike.
			read -r cpu rcpu <<<"$(awk -v r="$rps" -v s="$runsecs" -v hz="$hz" -v a="$((after - before))" -v b="$((rafter - rbefore))" \
				'BEGIN { n = r * s; printf "%.1f %.1f\n", (n > 0 ? 1e6 * a / hz / n : 0), (n > 0 ? 1e6 * b / hz / n : 0) }')"
			case "$t" in edge-redis | redisrate) ;; *) rcpu=- ;; esac
			printf "round %d  %4d conns  %-10s  %8.0f req/s  p99 %7.3fms  %6.1f µs CPU a request%s  non-2xx %s  errors %s\n" "$round" "$c" "$t" "$rps" "$p99" "$cpu" "$([ "$rcpu" = - ] || echo " (Redis $rcpu µs)")" "$non" "$err" >&2
			echo "$round $c $t $rps $p99 $non $err $cpu $rcpu" >>"$results"
		done
	done
done

# The edges' decisions on the bench policy: every rule matched every
# request, none refused (the bench's premise).
declare -A metrics=()
want edge && metrics[edge]=$(curl -fsS "http://127.0.0.1:$edgeadmin/metrics" | grep '^edge_decisions_total' || true)
want edge-redis && metrics[edge-redis]=$(curl -fsS "http://127.0.0.1:$edgeredisadmin/metrics" | grep '^edge_decisions_total' || true)

# ---- the medians and ratios ---------------------------------------------------
echo
echo "bench/run.sh: $tool, GET /api/bench, $rounds rounds, $duration per run after a $warmup warm-up$([ "$redis" = 1 ] && echo ", edge-redis store budget $redisbudget")"
machine "$(cut -d' ' -f1-3 <<<"$load0")" "$([ "$redis" = 1 ] && echo "; $("$redisserver" --version | cut -d' ' -f1-3)")"
awk -v targets="${targets[*]}" -v levels="${levels//,/ }" "$median_awk"'
	{ rps[$2, $3, $1] = $4; p99[$2, $3, $1] = $5; non[$2, $3] += $6; err[$2, $3] += $7; cpu[$2, $3, $1] = $8; rcpu[$2, $3, $1] = $9; if ($1 > rounds) rounds = $1 }
	END {
		nt = split(targets, T, " "); nl = split(levels, L, " ")
		for (t = 1; t <= nt; t++) ran[T[t]] = 1
		for (l = 1; l <= nl; l++) {
			c = L[l]
			printf "\n%d connections        median req/s (min-max)   median p99 ms   CPU µs a request (Redis)   non-2xx   errors\n", c
			for (t = 1; t <= nt; t++) {
				lo = hi = rps[c, T[t], 1]
				for (r = 1; r <= rounds; r++) { a[r] = rps[c, T[t], r]; if (a[r] < lo) lo = a[r]; if (a[r] > hi) hi = a[r] }
				mr = median(a, rounds)
				for (r = 1; r <= rounds; r++) { a[r] = p99[c, T[t], r] }
				mp = median(a, rounds)
				for (r = 1; r <= rounds; r++) { a[r] = cpu[c, T[t], r] }
				mc = median(a, rounds)
				rc = ""
				if (rcpu[c, T[t], 1] != "-") { for (r = 1; r <= rounds; r++) { a[r] = rcpu[c, T[t], r] }; rc = sprintf(" (%.1f)", median(a, rounds)) }
				printf "  %-18s %8.0f (%.0f-%.0f)   %13.3f   %8.1f%-10s   %7d   %6d\n", T[t], mr, lo, hi, mp, mc, rc, non[c, T[t]], err[c, T[t]]
			}
			printf "  median of the rounds'"'"' ratios:\n"
			np = split("edge/nginx edge/minproxy edge/norules edge-redis/redisrate edge-redis/edge", P, " ")
			for (i = 1; i <= np; i++) {
				split(P[i], ab, "/")
				if (!(ab[1] in ran) || !(ab[2] in ran)) continue
				for (r = 1; r <= rounds; r++) { a[r] = rps[c, ab[2], r] > 0 ? rps[c, ab[1], r] / rps[c, ab[2], r] : 0 }
				printf "    %s ÷ %-9s %.2f×\n", ab[1], ab[2], median(a, rounds)
			}
			if ("origin" in ran) printf "  p99 added over the origin alone (median of the rounds):\n"
			for (t = 1; t <= nt; t++) {
				if (T[t] == "origin" || !("origin" in ran)) continue
				for (r = 1; r <= rounds; r++) { a[r] = p99[c, T[t], r] - p99[c, "origin", r] }
				printf "    %-9s %+.3fms\n", T[t], median(a, rounds)
			}
		}
	}' "$results"

bad=0
for e in edge edge-redis; do
	want "$e" || continue
	m=${metrics[$e]}
	echo
	echo "$e decisions on bench/policy.hcl, those not zero (every rule matched every request and allowed it):"
	echo "$m" | grep -v ' 0$' | sed 's/^/  /'
	for r in bench-per-ip bench-per-network bench-per-api-key bench-per-route bench-per-ip-shadow; do
		echo "$m" | grep -q "rule=\"$r\"" || { echo "run.sh: $e: rule $r decided nothing" >&2; bad=1; }
	done
	# A store_error decision (the Redis-backed edge past its budget, failing
	# open) forwarded a request its rules did not count: such a run is not
	# a capacity.
	if echo "$m" | grep -E 'decision="(deny|dry_run_deny|skip|store_error_[a-z]+|missing_identity|invalid_identity)"' | grep -qv ' 0$'; then
		echo "run.sh: $e did not allow every request by its rules (see its decisions above)" >&2
		bad=1
	fi
done
if awk '$6 > 0 || $7 > 0 { found = 1 } END { exit !found }' "$results"; then
	echo "run.sh: some runs had answers outside 2xx or errors (see the tables): those targets did not forward every request" >&2
	bad=1
fi
exit "$bad"
