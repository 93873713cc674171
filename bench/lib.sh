# bench/lib.sh: what bench/run.sh, bench/goodput.sh and bench/refusal.sh
# share, sourced from their own directory (. "$(dirname "$0")/lib.sh")
# before their flags are read: the flags themselves, the repository's
# root to work from, a temporary directory and the processes to stop when
# the script ends, free loopback ports, waiting for a listener, NGINX
# (found, installed from Debian's nginx-light when missing, started on a
# template), CPU time, the machine a report ran on and the median the
# reports are made of.

# bench_flags SPEC... -- ARG... reads the script's flags ARG: each SPEC is
# -NAME=VAR, a flag whose value (the next argument) VAR takes, or
# -NAME=VAR=VALUE, a switch that sets VAR to VALUE. -h, -help and --help
# print the usage (the script's header comment, up to set -euo) and exit
# 0; any other argument is an error (exit 2).
bench_flags() {
	local -A _bf_takes=() _bf_sets=()
	local _bf_rest
	while [ "$1" != -- ]; do
		_bf_rest=${1#*=}
		case "$_bf_rest" in
		*=*) _bf_sets[${1%%=*}]=$_bf_rest ;;
		*) _bf_takes[${1%%=*}]=$_bf_rest ;;
		esac
		shift
	done
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		-h | -help | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
		-?*)
			if [ -n "${_bf_takes[$1]:-}" ]; then
				[ $# -ge 2 ] || { echo "$(basename "$0"): $1 needs a value (-h for usage)" >&2; exit 2; }
				printf -v "${_bf_takes[$1]}" '%s' "$2"
				shift 2
				continue
			fi
			if [ -n "${_bf_sets[$1]:-}" ]; then
				printf -v "${_bf_sets[$1]%%=*}" '%s' "${_bf_sets[$1]#*=}"
				shift
				continue
			fi
			;;
		esac
		echo "$(basename "$0"): unknown argument $1 (-h for usage)" >&2
		exit 2
	done
}

# bench_root moves to the repository's root, where the scripts build and
# name their files, with Go on PATH.
bench_root() {
	cd "$(dirname "$0")/.."
	export PATH="/usr/local/go/bin:$PATH"
}

# check_rounds NAME SMOKE refuses a -rounds that is not a number in
# [1, 50], and warns, naming NAME, when it is under SMOKE: a smoke run.
check_rounds() {
	case "$rounds" in '' | *[!0-9]*) echo "$1: -rounds must be a number" >&2; exit 2 ;; esac
	[ "$rounds" -ge 1 ] && [ "$rounds" -le 50 ] || { echo "$1: -rounds must be in [1, 50]" >&2; exit 2; }
	[ "$rounds" -ge "$2" ] || echo "$1: warning: $rounds rounds: a smoke run; the comparison needs at least $2" >&2
}

# machine LOAD [MORE] prints the report's machine line: CPUs, kernel, Go,
# NGINX when one ran ($nginx), MORE, and LOAD, the load average before.
machine() {
	echo "machine: $(nproc) CPUs ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(uname -sr); $(go version | cut -d' ' -f3)${nginx:+; $("$nginx" -v 2>&1 | sed 's/^nginx version: //')}${2:-}; load average before $1"
}

# median_awk is an awk function the reports' programs start with:
# median(a, n) sorts a[1..n] in place and returns its median.
median_awk='
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}'

# bench_setup makes $tmp and arranges for every PID in pids to be stopped
# and $tmp removed (kept with keep=1) when the script ends.
bench_setup() {
	tmp=$(mktemp -d /tmp/edge-bench.XXXXXX)
	pids=()
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}
bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ "${keep:-0}" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}

# freeport prints a loopback port nothing listens on now, below the
# kernel's ephemeral range (where an outgoing connection of this or
# another job may hold the port: bind would fail).
ephemeral=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$ephemeral" -gt 21000 ] || ephemeral=60000
used=" "
freeport() {
	local p
	while :; do
		p=$((20000 + RANDOM % (ephemeral - 20000)))
		case "$used" in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used="$used$p "
			echo "$p"
			return
		fi
	done
}

# waitport waits up to 10 s for 127.0.0.1:$1 to accept, or fails naming $2.
waitport() {
	local i
	for i in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "$(basename "$0"): $2 did not listen on 127.0.0.1:$1; its log:" >&2
	cat "$tmp/$2.log" >&2 || true
	exit 1
}

# need_nginx sets nginx to NGINX's binary, installing Debian's nginx-light
# when it is missing.
need_nginx() {
	nginx=$(command -v nginx || true)
	[ -z "$nginx" ] && [ -x /usr/sbin/nginx ] && nginx=/usr/sbin/nginx
	if [ -z "$nginx" ]; then
		echo "nginx is missing: installing Debian's nginx-light" >&2
		sudo=""
		[ "$(id -u)" = 0 ] || sudo="sudo -n"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx-light >/dev/null
		nginx=/usr/sbin/nginx
	fi
}

# start_nginx TEMPLATE PORT UPSTREAM_PORT starts NGINX on the template
# (bench/nginx.conf's @USER@, @LISTEN@ and @UPSTREAM@ filled in) in the
# prefix $tmp/nginx, listening on 127.0.0.1:PORT, its PID in pids.
start_nginx() {
	rm -rf "$tmp/nginx"
	mkdir -p "$tmp/nginx"
	user=""
	[ "$(id -u)" = 0 ] && user="user root;"
	sed -e "s/@USER@/$user/" -e "s/@LISTEN@/127.0.0.1:$2/" -e "s/@UPSTREAM@/127.0.0.1:$3/" "$1" >"$tmp/nginx/nginx.conf"
	"$nginx" -t -q -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log"
	"$nginx" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" -g "daemon off;" >"$tmp/nginx.log" 2>&1 &
	pids+=($!)
}

# cpu_ticks PID prints the CPU time, user and system, in clock ticks
# (getconf CLK_TCK a second), that PID and its child processes (NGINX's
# workers) have used so far: /proc/PID/stat's utime and stime, every
# thread included (proc(5)).
cpu_ticks() {
	local p total=0 f
	for p in "$1" $(pgrep -P "$1" || true); do
		f=$(cut -d')' -f2- "/proc/$p/stat" 2>/dev/null) || continue
		# After "pid (comm)": state is field 1, utime field 12, stime field 13.
		total=$((total + $(awk '{ print $12 + $13 }' <<<"$f")))
	done
	echo "$total"
}

# pair_setup NAME POLICY NGINXCONF is what refusal.sh and goodput.sh (NAME)
# share once their flags are read ($rounds, $only: edge,nginx): it checks
# them, builds the edge and the load tool into $tmp, and starts on free
# loopback ports the demo origin, the edge on POLICY (memory store) and,
# when wanted, NGINX on NGINXCONF; it sets targets, want, port[edge|nginx],
# pid[edge|nginx] (NGINX's master) and origin, the origin's port.
pair_setup() {
	local name=$1 policy=$2 conf=$3 t
	check_rounds "$name" 7
	targets=()
	for t in ${only//,/ }; do
		case "$t" in edge | nginx) targets+=("$t") ;; *) echo "$name: -targets: no target $t (edge, nginx)" >&2; exit 2 ;; esac
	done
	want() { case " ${targets[*]} " in *" $1 "*) return 0 ;; esac; return 1; }
	bench_setup
	nginx=""
	want nginx && need_nginx
	echo "building edge and loadtest into $tmp" >&2
	go build -o "$tmp/edge" ./cmd/edge
	go build -o "$tmp/loadtest" ./loadtest
	local edge edgeadmin nginxport
	origin=$(freeport) edge=$(freeport) edgeadmin=$(freeport) nginxport=$(freeport)
	"$tmp/edge" demo-origin -listen "127.0.0.1:$origin" >"$tmp/origin.log" 2>&1 &
	pids+=($!)
	waitport "$origin" origin
	"$tmp/edge" serve -config "$policy" -store memory -log-level warn \
		-listen "127.0.0.1:$edge" -admin "127.0.0.1:$edgeadmin" -upstream "http://127.0.0.1:$origin" >"$tmp/edge.log" 2>&1 &
	pids+=($!)
	declare -gA pid=([edge]=$!) port=([edge]=$edge [nginx]=$nginxport)
	waitport "$edge" edge
	if want nginx; then
		start_nginx "$conf" "$nginxport" "$origin"
		pid[nginx]=${pids[-1]}
		waitport "$nginxport" nginx
	fi
}
