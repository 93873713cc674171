#!/bin/sh
# cpu-per-request.sh: run one single-level throughput run of the load tool
# and print the CPU time (user + system, from /proc/PID/stat) each listed
# process and the load tool itself spent per answered request, in µs.
# Linux only. The processes are named by PID; run it on a machine where
# nothing else is busy, and more than once (the figures move with it).
#
#	loadtest/scripts/cpu-per-request.sh "$(pgrep -f 'edge -demo')" "$(pgrep redis-server)" -- \
#	    -scenario throughput -target http://127.0.0.1:18081 -path /trace/gcra \
#	    -clients 100000 -connections 64 -duration 4s -warmup 0s
#
# Use -warmup 0s: the CPU is counted over the whole run and divided by the
# measured requests only.
set -eu

pids=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	pids="$pids $1"
	shift
done
[ $# -gt 0 ] && shift
[ -n "$pids" ] || { echo "usage: $0 PID... -- LOADTEST-ARGS..." >&2; exit 2; }

hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

bin=${LOADTEST:-}
if [ -z "$bin" ]; then
	bin=$(mktemp -d)/loadtest
	(cd "$(dirname "$0")/.." && go build -o "$bin" .)
fi

before=""
for p in $pids; do before="$before $(ticks "$p")"; done
out=$(mktemp)
# The load tool's own CPU: the shell's waited-for children's time.
t0=$(awk '{print $16 + $17}' /proc/$$/stat)
"$bin" "$@" >"$out" 2>&1 || { cat "$out"; exit 1; }
t1=$(awk '{print $16 + $17}' /proc/$$/stat)
cat "$out"
# The answered requests: the throughput scenario's table, or the result
# line of the others (plain, bench/run.sh's load).
n=$(awk -F'|' '/^\| http/ {gsub(/ /, "", $3); print $3; exit}' "$out")
[ -n "$n" ] || n=$(awk '/^result: / {for (i = 2; i <= NF; i++) if ($i ~ /^requests=/) {sub(/^requests=/, "", $i); print $i; exit}}' "$out")
[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "no requests in the report" >&2; exit 1; }
echo
echo "CPU per answered request ($n requests):"
i=1
for p in $pids; do
	b=$(echo "$before" | awk -v i=$i '{print $i}')
	a=$(ticks "$p")
	name=$(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-60)
	awk -v d=$((a - b)) -v hz="$hz" -v n="$n" -v name="$name" -v p="$p" \
		'BEGIN {printf "  %8.1f µs  pid %s  %s\n", d * 1e6 / hz / n, p, name}'
	i=$((i + 1))
done
awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN {printf "  %8.1f µs  the load tool\n", d * 1e6 / hz / n}'
