# bench/lib.sh: what bench/run.sh and bench/goodput.sh share, sourced
# from the repository's root: a temporary directory and the processes
# to stop when the script ends, free loopback ports, waiting for a
# listener, and NGINX (found, installed from Debian's nginx-light when
# missing, started on a template).

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
