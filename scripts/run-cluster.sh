#!/usr/bin/env bash
# Runs a two-master, two-slave cluster on loopback in the foreground
# (make run-cluster LAYOUT=2m-2s-sync): two nameservers and the four brokers
# of conf/$LAYOUT/, each with its own port and store directory (set in its
# properties file; the HA port is listenPort+1).
#
#   scripts/run-cluster.sh [BIN_DIR] [LAYOUT]
#
# LAYOUT is 2m-2s-sync (SYNC_MASTER: a send is answered once a slave has it)
# or 2m-2s-async (ASYNC_MASTER). Stores go under data/$LAYOUT/ in the
# directory this is started from. Nameserver ports come from NAMESRV_PORT
# (9876) and the next one; LOG_LEVEL sets every log level. Ctrl-C stops the
# slaves, then the masters, then the nameservers.
#
# LAYOUT=controller runs controller mode instead: three nameservers
# (9876, 9886, 9896), each with a member of the controller group (Raft on
# 9878, 9888, 9898), and two groups of three replicas (broker-a on 10911,
# 10921, 10931; broker-b on 10941, 10951, 10961), all from conf/controller/.
# The controllers pick each group's master; kill one and another replica
# takes over within a few seconds.
set -euo pipefail
set -m # each server in its own process group: Ctrl-C reaches only this script

BIN=${1:-bin}
LAYOUT=${2:-2m-2s-sync}
NS_PORT=${NAMESRV_PORT:-9876}
NS2_PORT=$((NS_PORT + 1))
LOG_LEVEL=${LOG_LEVEL:-info}
# The controller layout's nameservers (fixed by conf/controller/namesrv-n*.conf).
CTL_NAMESRV="127.0.0.1:9876;127.0.0.1:9886;127.0.0.1:9896"
CONF_DIR="$(cd "$(dirname "$0")/.." && pwd)/conf/$LAYOUT"
[[ -d "$CONF_DIR" ]] || { echo "run-cluster.sh: no layout $CONF_DIR (try 2m-2s-sync, 2m-2s-async or controller)" >&2; exit 1; }
for b in mqnamesrv mqbroker; do
	[[ -x "$BIN/$b" ]] || { echo "run-cluster.sh: $BIN/$b not found; run 'make build' first" >&2; exit 1; }
done
DATA="data/$LAYOUT"
mkdir -p "$DATA"

pids=()   # started servers, in start order
names=()
stop_all() {
	trap - INT TERM
	# Reverse start order: slaves, masters, then nameservers.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		local p=${pids[$i]}
		if kill -0 "$p" 2>/dev/null; then
			kill -TERM "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
}
trap 'echo; echo "stopping slaves, masters, nameservers..."; stop_all; exit 0' INT TERM

# wait_port PORT PID NAME: up to 15 s for a listener, while PID lives.
wait_port() {
	for _ in $(seq 150); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || { echo "run-cluster.sh: $3 exited during start" >&2; return 1; }
		sleep 0.1
	done
	echo "run-cluster.sh: $3 is not listening on 127.0.0.1:$1 after 15 s" >&2
	return 1
}

# start NAME PORT COMMAND...: runs a server in the background and waits for its port.
start() {
	local name=$1 port=$2
	shift 2
	"$@" -log-level "$LOG_LEVEL" > >(sed -u "s/^/[$name] /") 2>&1 &
	local pid=$!
	pids+=("$pid")
	names+=("$name")
	wait_port "$port" "$pid" "$name" || { stop_all; exit 1; }
}

# loopback_conf SRC DST: the layout file plus what only a loopback run needs.
loopback_conf() {
	{
		cat "$1"
		echo
		echo "# Added by scripts/run-cluster.sh for a run on loopback."
		echo "bindAddress=127.0.0.1"
		if [[ $1 == *.properties ]]; then
			echo "brokerIP1=127.0.0.1"
			echo "autoCreateTopicEnable=true"
		fi
	} >"$2"
}

run_controller_layout() {
	for n in n0 n1 n2; do
		loopback_conf "$CONF_DIR/namesrv-$n.conf" "$DATA/namesrv-$n.conf"
		port=$(sed -n 's/^listenPort=//p' "$CONF_DIR/namesrv-$n.conf")
		start "namesrv-$n" "$port" "$BIN/mqnamesrv" -c "$DATA/namesrv-$n.conf"
	done
	for broker in broker-a-1 broker-a-2 broker-a-3 broker-b-1 broker-b-2 broker-b-3; do
		loopback_conf "$CONF_DIR/$broker.properties" "$DATA/$broker.conf"
		port=$(sed -n 's/^listenPort=//p' "$CONF_DIR/$broker.properties")
		start "$broker" "$port" "$BIN/mqbroker" -c "$DATA/$broker.conf" -n "$CTL_NAMESRV"
	done
	cat <<MSG

  controller-mode cluster on 127.0.0.1 (data under $DATA):
    nameservers + controllers  127.0.0.1:9876  127.0.0.1:9886  127.0.0.1:9896
    broker-a replicas 1-3      127.0.0.1:10911 127.0.0.1:10921 127.0.0.1:10931
    broker-b replicas 1-3      127.0.0.1:10941 127.0.0.1:10951 127.0.0.1:10961

  The controllers elect a master per group; it registers as brokerId 0.
    bin/mqadmin getControllerMetaData -a 127.0.0.1:9876
    bin/mqadmin getSyncStateSet -a 127.0.0.1:9876 -b broker-a
    bin/mqadmin getBrokerEpoch -n 127.0.0.1:9876 -b broker-a
    bin/mqadmin electMaster -a 127.0.0.1:9876 -bn broker-a -b 2
  kill -9 a master: an in-sync replica takes over within a few seconds; this
  script goes on and prints how to start the killed broker again.
  Ctrl-C stops everything.

MSG
}

run_master_slave_layout() {
for port in "$NS_PORT" "$NS2_PORT"; do
	mkdir -p "$DATA/namesrv-$port"
	cat >"$DATA/namesrv-$port.conf" <<CONF
# Written by scripts/run-cluster.sh on each start.
bindAddress=127.0.0.1
listenPort=$port
kvConfigPath=$DATA/namesrv-$port/kvConfig.json
CONF
	start "namesrv-$port" "$port" "$BIN/mqnamesrv" -c "$DATA/namesrv-$port.conf"
done

NAMESRV="127.0.0.1:$NS_PORT;127.0.0.1:$NS2_PORT"
for broker in broker-a broker-b broker-a-s broker-b-s; do
	# The layout file, plus what only a loopback run needs.
	{
		cat "$CONF_DIR/$broker.properties"
		echo
		echo "# Added by scripts/run-cluster.sh for a run on loopback."
		echo "brokerIP1=127.0.0.1"
		echo "bindAddress=127.0.0.1"
		echo "autoCreateTopicEnable=true"
	} >"$DATA/$broker.conf"
	port=$(sed -n 's/^listenPort=//p' "$CONF_DIR/$broker.properties")
	start "$broker" "$port" "$BIN/mqbroker" -c "$DATA/$broker.conf" -n "$NAMESRV"
done

cat <<MSG

  $LAYOUT cluster on 127.0.0.1 (data under $DATA):
    nameservers  127.0.0.1:$NS_PORT  127.0.0.1:$NS2_PORT
    broker-a     master 127.0.0.1:10911 (HA 10912), slave 127.0.0.1:10921
    broker-b     master 127.0.0.1:10931 (HA 10932), slave 127.0.0.1:10941

  Point clients at both nameservers, e.g. the official Go client:
    rocketmq.NewProducer(producer.WithNameServer([]string{"127.0.0.1:$NS_PORT", "127.0.0.1:$NS2_PORT"}))
  bin/mqadmin clusterList -n 127.0.0.1:$NS_PORT shows the roles and replication;
  bin/mqadmin haStatus -n 127.0.0.1:$NS_PORT -b 127.0.0.1:10911 the slaves of broker-a.
  Ctrl-C stops everything.

MSG

}

if [[ $LAYOUT == controller ]]; then
	run_controller_layout
else
	run_master_slave_layout
fi

set +e
if [[ $LAYOUT == controller ]]; then
	# Servers are meant to die here (kill -9 a master to see the failover):
	# say which one and how to start it again, and go on until Ctrl-C or
	# until none is left.
	waiting=("${pids[@]}")
	while ((${#waiting[@]} > 0)); do
		done_pid=
		wait -n -p done_pid "${waiting[@]}"
		rc=$?
		[[ -n $done_pid ]] || continue
		rest=()
		for p in "${waiting[@]}"; do
			[[ $p == "$done_pid" ]] || rest+=("$p")
		done
		waiting=("${rest[@]}")
		for i in "${!pids[@]}"; do
			if [[ ${pids[$i]} == "$done_pid" ]]; then
				n=${names[$i]}
				echo "run-cluster.sh: $n exited (status $rc); the others go on. Start it again with:" >&2
				if [[ $n == namesrv-* ]]; then
					echo "    $BIN/mqnamesrv -c $DATA/$n.conf" >&2
				else
					echo "    $BIN/mqbroker -c $DATA/$n.conf -n '$CTL_NAMESRV'" >&2
				fi
			fi
		done
	done
	exit 0
fi
# Any server stopping on its own ends the run.
wait -n "${pids[@]}"
rc=$?
echo "run-cluster.sh: a server exited (status $rc); stopping the others" >&2
stop_all
exit "$rc"
