#!/bin/sh
# start-redis.sh starts the Redis servers rules/redisstore's tests run
# against, idempotently, and prints the environment that points the tests at
# them:
#
#	a standalone redis-server on 127.0.0.1:6390 (EDGE_REDIS_ADDR)
#	a three-master Redis Cluster on 127.0.0.1:7001-7003 (EDGE_REDIS_CLUSTER_ADDRS)
#
# Nothing is persisted (--save '' --appendonly no). A server already
# answering on its port is left alone, and the cluster is created only when
# it is not up yet. "start-redis.sh stop" stops exactly these servers, by the
# PIDs they wrote, and removes the cluster's node files.
#
#	eval "$(rules/redisstore/testdata/start-redis.sh)"
#	go test -race ./rules/...
#	rules/redisstore/testdata/start-redis.sh stop
set -eu

dir=${EDGE_REDIS_DIR:-/tmp/edge-redis}
standalone=6390
cluster="7001 7002 7003"

ping() { redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; }

wait_up() {
	i=0
	until ping "$1"; do
		i=$((i + 1))
		if [ "$i" -gt 50 ]; then
			echo "start-redis.sh: redis-server on port $1 did not come up" >&2
			exit 1
		fi
		sleep 0.1
	done
}

start() {
	port=$1
	shift
	if ping "$port"; then
		return
	fi
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$dir" --pidfile "$dir/redis-$port.pid" --logfile "$dir/redis-$port.log" \
		--daemonize yes "$@"
	wait_up "$port"
}

stop() {
	for port in $standalone $cluster; do
		pidfile="$dir/redis-$port.pid"
		if [ -f "$pidfile" ]; then
			pid=$(cat "$pidfile")
			if kill "$pid" 2>/dev/null; then
				i=0
				while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do
					i=$((i + 1))
					sleep 0.1
				done
			fi
			rm -f "$pidfile"
		fi
		rm -f "$dir/nodes-$port.conf"
	done
}

if [ "${1:-}" = stop ]; then
	stop
	exit 0
fi

mkdir -p "$dir"
start $standalone
addrs=""
for port in $cluster; do
	start "$port" --cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" --cluster-node-timeout 5000
	addrs="$addrs${addrs:+,}127.0.0.1:$port"
done

if ! redis-cli -p 7001 cluster info | grep -q 'cluster_state:ok'; then
	# shellcheck disable=SC2086 # one argument per node
	redis-cli --cluster create $(echo "$addrs" | tr ',' ' ') --cluster-replicas 0 --cluster-yes >"$dir/cluster-create.log"
	i=0
	until redis-cli -p 7001 cluster info | grep -q 'cluster_state:ok'; do
		i=$((i + 1))
		if [ "$i" -gt 100 ]; then
			echo "start-redis.sh: the cluster did not reach cluster_state:ok; see $dir" >&2
			exit 1
		fi
		sleep 0.1
	done
fi

echo "export EDGE_REDIS_ADDR=127.0.0.1:$standalone"
echo "export EDGE_REDIS_CLUSTER_ADDRS=$addrs"
