#!/usr/bin/env bash
# Runs a local nameserver and one broker in the foreground (make run).
#
#   scripts/run.sh [BIN_DIR] [DATA_DIR]
#
# Data goes under DATA_DIR (default ./data): the nameserver's KV config and
# the broker's store. Ctrl-C stops the broker first (it unregisters, flushes
# the store and persists offsets), then the nameserver. Ports come from
# NAMESRV_PORT (9876) and BROKER_PORT (10911); LOG_LEVEL sets both log levels.
set -euo pipefail
# Job control puts each server in its own process group, so Ctrl-C reaches
# only this script, which then stops them in order.
set -m

BIN=${1:-bin}
DATA=${2:-data}
NS_PORT=${NAMESRV_PORT:-9876}
BROKER_PORT=${BROKER_PORT:-10911}
LOG_LEVEL=${LOG_LEVEL:-info}
for b in mqnamesrv mqbroker; do
	[[ -x "$BIN/$b" ]] || { echo "run.sh: $BIN/$b not found; run 'make build' first" >&2; exit 1; }
done
mkdir -p "$DATA/namesrv" "$DATA/broker-a"
DATA=$(cd "$DATA" && pwd)

# The official Go client refuses host names such as localhost: always 127.0.0.1.
cat >"$DATA/namesrv.conf" <<CONF
# Written by scripts/run.sh on each start.
bindAddress=127.0.0.1
listenPort=$NS_PORT
kvConfigPath=$DATA/namesrv/kvConfig.json
CONF
cat >"$DATA/broker.conf" <<CONF
# Written by scripts/run.sh on each start.
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
namesrvAddr=127.0.0.1:$NS_PORT
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$BROKER_PORT
storePathRootDir=$DATA/broker-a
autoCreateTopicEnable=true
CONF

ns_pid=""
broker_pid=""
stop_all() {
	trap - INT TERM
	if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
		kill -TERM "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	if [[ -n "$ns_pid" ]] && kill -0 "$ns_pid" 2>/dev/null; then
		kill -TERM "$ns_pid" 2>/dev/null || true
		wait "$ns_pid" 2>/dev/null || true
	fi
}
trap 'echo; echo "stopping broker, then nameserver..."; stop_all; exit 0' INT TERM

# wait_port PORT PID NAME: up to 15 s for a listener, while PID lives.
wait_port() {
	for _ in $(seq 150); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || { echo "run.sh: $3 exited during start" >&2; return 1; }
		sleep 0.1
	done
	echo "run.sh: $3 is not listening on 127.0.0.1:$1 after 15 s" >&2
	return 1
}

"$BIN/mqnamesrv" -c "$DATA/namesrv.conf" -log-level "$LOG_LEVEL" &
ns_pid=$!
wait_port "$NS_PORT" "$ns_pid" mqnamesrv || { stop_all; exit 1; }
"$BIN/mqbroker" -c "$DATA/broker.conf" -log-level "$LOG_LEVEL" &
broker_pid=$!
wait_port "$BROKER_PORT" "$broker_pid" mqbroker || { stop_all; exit 1; }

cat <<MSG

  nameserver  127.0.0.1:$NS_PORT   (data: $DATA/namesrv)
  broker      127.0.0.1:$BROKER_PORT  broker-a of DefaultCluster (store: $DATA/broker-a)

  Send a first message with the official Go client (github.com/apache/rocketmq-client-go/v2);
  topics are created on first send:

    p, _ := rocketmq.NewProducer(producer.WithNameServer([]string{"127.0.0.1:$NS_PORT"}))
    _ = p.Start()
    res, err := p.SendSync(context.Background(), primitive.NewMessage("TopicTest", []byte("hello")))

  Use 127.0.0.1, not localhost: the Go client rejects host names. Or export
  NAMESRV_ADDR=127.0.0.1:$NS_PORT for tools that read it. Ctrl-C stops both servers.

MSG

# Either server stopping on its own ends the run.
set +e
wait -n "$ns_pid" "$broker_pid"
rc=$?
echo "run.sh: a server exited (status $rc); stopping the other" >&2
stop_all
exit "$rc"
