#!/usr/bin/env bash
# Runs the standard benchmark matrix (make bench-matrix) on loopback and
# prints one table:
#
#   scripts/bench.sh [OUT_DIR]
#
# A nameserver and a broker start on a temporary store (ASYNC_FLUSH), then:
# 1 KiB sync sends with 1, 4, 16 and 64 senders; the 16 senders again over
# TLS (tls-sync-w16: the nameserver and brokers run tls.server.mode=permissive
# with a CA and certificate made by openssl for the run, so plain and TLS
# clients share one port and one broker process); async sends; batched sends;
# consume catch-up of CATCHUP stored messages; publish-to-receive latency at
# 5,000 msgs/s. The broker is then restarted on a fresh store with
# aclEnable=true for 16 ACL-signed sync senders (acl-sync-w16, beside
# sync-w16's unsigned rate of the same run), and on a fresh SYNC_FLUSH store
# for 64 sync senders (group commit). Then replication, each on fresh stores with
# a slave (ASYNC_FLUSH both): 64 sync senders against a SYNC_MASTER
# (syncmaster-w64, beside sync-w64's ASYNC_MASTER rate of the same run)
# and against an ASYNC_MASTER with the slave attached (asyncmaster-w64);
# replication lag at 10,000 msgs/s to an ASYNC_MASTER (replag-10k: slave
# receive minus master receive by identical long-polling pullers, see
# mqbench replag; replag-prep, an unmeasured 1 s run, first waits until the
# slave copied the topic); a stopped slave catching up on REPL_MIB of commitlog
# (repl-fill fills the master, repl-catchup times the slave from its start
# until its max offset is the master's). Every run is bounded by `timeout`;
# the whole matrix takes about 17*DUR + 90 s (3 min 40 s at the default on
# the 2-core VM, of which the replicated cases about 1 min 30 s).
#
# Environment:
#   BIN       directory with mqnamesrv, mqbroker, mqbench (default: built
#             into a temporary directory from this checkout)
#   DUR       seconds per send run (default 10)
#   CATCHUP   messages for the catch-up run (default 1000000)
#   REPL_MIB  MiB of commitlog the slave catches up on (default 1024)
#   CASES     space-separated subset of case names to run (default: all)
#   MAX_SECONDS  the whole matrix's time budget (default 570): each run's
#             timeout is cut to what is left, and runs that no longer fit
#             are reported as SKIPPED
#   PPROF     1: start the broker with -pprof and take a CPU profile of each
#             run into OUT_DIR/profiles/<case>.pprof (the tool's own:
#             <case>.mqbench.pprof, a slave's: <case>.slave.pprof, served
#             on PPROF_PORT+1)
#   BROKER_CONF   extra broker.conf lines (key=value, newline-separated)
#   TLS       0: serve plain only and skip tls-sync-w16 (default 1; without
#             openssl the case is skipped too)
#   NAMESRV_PORT, BROKER_PORT, SLAVE_PORT, PPROF_PORT   loopback ports
#             (19876, 20911, 20921, 16060); a broker's HA port is its port + 1
# Logs, per-run outputs and table.txt go to OUT_DIR (default: a temp dir,
# printed at the end). Scratch stores are deleted on exit.
set -euo pipefail

DUR=${DUR:-10}
CATCHUP=${CATCHUP:-1000000}
REPL_MIB=${REPL_MIB:-1024}
NS_PORT=${NAMESRV_PORT:-19876}
BROKER_PORT=${BROKER_PORT:-20911}
SLAVE_PORT=${SLAVE_PORT:-20921}
PPROF_PORT=${PPROF_PORT:-16060}
PPROF=${PPROF:-0}
BUDGET_END=$((SECONDS + ${MAX_SECONDS:-570}))
CASES=${CASES:-"sync-w1 sync-w4 sync-w16 tls-sync-w16 sync-w64 async-w16 batch32-w16 catchup latency-5k acl-sync-w16 syncflush-w64 syncmaster-w64 asyncmaster-w64 replag-10k repl-catchup"}
OUT=${1:-$(mktemp -d /tmp/mqbench.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SCRATCH=$(mktemp -d /tmp/mqbench-store.XXXXXX)

if [[ -z "${BIN:-}" ]]; then
	BIN="$SCRATCH/bin"
	echo "bench.sh: building into $BIN" >&2
	(cd "$(dirname "$0")/.." && go build -o "$BIN/" ./cmd/mqnamesrv ./cmd/mqbroker ./cmd/mqbench)
fi
for b in mqnamesrv mqbroker mqbench; do
	[[ -x "$BIN/$b" ]] || { echo "bench.sh: $BIN/$b not found" >&2; exit 1; }
done

NS=127.0.0.1:$NS_PORT

# TLS: a throwaway CA and a certificate for 127.0.0.1; TLS_CONF holds the
# server keys every nameserver and broker of the run gets.
TLS_CONF=""
TLS_CA=""
if [[ "${TLS:-1}" == 1 ]] && [[ " $CASES " == *" tls-sync-w16 "* ]]; then
	if command -v openssl >/dev/null; then
		d="$SCRATCH/tls"
		mkdir -p "$d"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
			-subj /CN=bench-ca -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
			-keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
		printf 'subjectAltName=IP:127.0.0.1\n' >"$d/san.ext"
		openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
			-extfile "$d/san.ext" -out "$d/server.pem" 2>/dev/null
		TLS_CA="$d/ca.pem"
		TLS_CONF="tls.server.mode=permissive
tls.server.certPath=$d/server.pem
tls.server.keyPath=$d/server.key"
	else
		echo "bench.sh: no openssl, tls-sync-w16 is skipped" >&2
	fi
fi
TICK=$(getconf CLK_TCK)
ns_pid=""
broker_pid=""
slave_pid=""
sampler_pid=""

stop_pid() { # PID: SIGTERM, then wait up to 30 s, then SIGKILL
	local pid=$1
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}
cleanup() {
	stop_pid "$sampler_pid"
	stop_pid "$slave_pid"
	stop_pid "$broker_pid"
	stop_pid "$ns_pid"
	rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_port() { # PORT PID NAME
	for _ in $(seq 150); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		kill -0 "$2" 2>/dev/null || { echo "bench.sh: $3 exited during start (see $OUT/$3.log)" >&2; return 1; }
		sleep 0.1
	done
	echo "bench.sh: $3 not listening on 127.0.0.1:$1 after 15 s" >&2
	return 1
}

start_namesrv() {
	cat >"$SCRATCH/namesrv.conf" <<CONF
bindAddress=127.0.0.1
listenPort=$NS_PORT
kvConfigPath=$SCRATCH/namesrv/kvConfig.json
$TLS_CONF
CONF
	"$BIN/mqnamesrv" -c "$SCRATCH/namesrv.conf" -log-level warn >"$OUT/mqnamesrv.log" 2>&1 &
	ns_pid=$!
	wait_port "$NS_PORT" "$ns_pid" mqnamesrv
}

start_broker() { # FLUSH_DISK_TYPE [ROLE]: a fresh store each time
	local flush=$1 role=${2:-ASYNC_MASTER} store="$SCRATCH/store-$1" extra=()
	rm -rf "$store"
	cat >"$SCRATCH/broker.conf" <<CONF
brokerClusterName=BenchCluster
brokerName=bench-a
brokerId=0
brokerRole=$role
namesrvAddr=$NS
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$BROKER_PORT
storePathRootDir=$store
flushDiskType=$flush
autoCreateTopicEnable=true
defaultTopicQueueNums=8
$TLS_CONF
${BROKER_CONF:-}
CONF
	[[ "$PPROF" == 1 ]] && extra=(-pprof "127.0.0.1:$PPROF_PORT")
	"$BIN/mqbroker" -c "$SCRATCH/broker.conf" -log-level warn "${extra[@]}" >>"$OUT/mqbroker.log" 2>&1 &
	broker_pid=$!
	wait_port "$BROKER_PORT" "$broker_pid" mqbroker
}

start_slave() { # [keep]: the master's slave (ASYNC_FLUSH); a fresh store unless "keep"
	local store="$SCRATCH/store-slave"
	[[ "${1:-}" == keep ]] || rm -rf "$store"
	cat >"$SCRATCH/slave.conf" <<CONF
brokerClusterName=BenchCluster
brokerName=bench-a
brokerId=1
brokerRole=SLAVE
namesrvAddr=$NS
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$SLAVE_PORT
storePathRootDir=$store
flushDiskType=ASYNC_FLUSH
$TLS_CONF
${BROKER_CONF:-}
CONF
	local extra=()
	[[ "$PPROF" == 1 ]] && extra=(-pprof "127.0.0.1:$((PPROF_PORT + 1))")
	"$BIN/mqbroker" -c "$SCRATCH/slave.conf" -log-level warn "${extra[@]}" >>"$OUT/mqbroker-slave.log" 2>&1 &
	slave_pid=$!
}

# slave_caught_up: wait (60 s at most) until the slave is connected and at
# the master's max offset; prints the mqbench hacatchup line.
slave_caught_up() {
	"$BIN/mqbench" hacatchup --master "127.0.0.1:$BROKER_PORT" --slave "127.0.0.1:$SLAVE_PORT" -d 60s |
		grep '^\[Complete\]' || { echo "bench.sh: the slave did not catch up (see $OUT/mqbroker-slave.log)" >&2; return 1; }
}

machine_ticks() { # -> "total idle iowait" of all CPUs, from /proc/stat
	awk '/^cpu /{t=0; for (i = 2; i <= NF; i++) t += $i; print t, $5, $6}' /proc/stat
}

cpu_stall_us() { # -> microseconds some task waited for a CPU (PSI), 0 if unknown
	awk '/^some/{for (i = 1; i <= NF; i++) if ($i ~ /^total=/) {sub("total=", "", $i); print $i}}' /proc/pressure/cpu 2>/dev/null || echo 0
}

cpu_ticks() { # PID -> utime+stime in clock ticks
	awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# sample_rss PID FILE: the largest anonymous RSS (kB) seen, once a second.
# Mapped store files are page cache (RssFile), not the broker's own memory.
sample_rss() {
	local max=0 v
	while kill -0 "$1" 2>/dev/null; do
		v=$(awk '/^RssAnon:/{print $2}' "/proc/$1/status" 2>/dev/null || echo 0)
		((v > max)) && max=$v && echo "$max" >"$2"
		sleep 1
	done
}

ROWS=()
# run_case NAME TARGET MQBENCH_ARGS...: one bounded mqbench run, one table row.
run_case() {
	local name=$1 target=$2
	shift 2
	local log="$OUT/$name.out" t0 t1 m0 m1 s0 s1 w0 w1 prof_pid="" toolprof=()
	local left=$((BUDGET_END - SECONDS)) limit=$((DUR + 120))
	if ((left < 15)); then
		echo "== $name: skipped, the matrix's time budget is spent" >&2
		ROWS+=("$(printf "%-14s %10s" "$name" SKIPPED)")
		return 0
	fi
	((limit > left - 5)) && limit=$((left - 5))
	echo "== $name: mqbench $*" >&2
	echo 0 >"$SCRATCH/rss"
	sample_rss "$broker_pid" "$SCRATCH/rss" &
	sampler_pid=$!
	if [[ "$PPROF" == 1 && "$name" != catchup-fill && "$name" != replag-prep ]]; then
		mkdir -p "$OUT/profiles"
		local secs=$((DUR > 4 ? DUR - 2 : 2))
		(sleep 2; curl -s -o "$OUT/profiles/$name.pprof" \
			"http://127.0.0.1:$PPROF_PORT/debug/pprof/profile?seconds=$secs" &
			[[ -z "$slave_pid" ]] || curl -s -o "$OUT/profiles/$name.slave.pprof" \
				"http://127.0.0.1:$((PPROF_PORT + 1))/debug/pprof/profile?seconds=$secs"
			wait) &
		prof_pid=$!
		toolprof=(--cpuprofile "$OUT/profiles/$name.mqbench.pprof")
	fi
	t0=$(cpu_ticks "$broker_pid")
	u0=0
	[[ -n "$slave_pid" ]] && u0=$(cpu_ticks "$slave_pid")
	m0=$(machine_ticks)
	s0=$(cpu_stall_us)
	w0=$(date +%s.%N)
	timeout --signal=INT --kill-after=5 "$limit" "$BIN/mqbench" "$@" -n "$NS" "${toolprof[@]}" >"$log" 2>"$OUT/$name.err" || true
	w1=$(date +%s.%N)
	t1=$(cpu_ticks "$broker_pid")
	u1=0
	[[ -n "$slave_pid" ]] && u1=$(cpu_ticks "$slave_pid")
	m1=$(machine_ticks)
	s1=$(cpu_stall_us)
	[[ -n "$prof_pid" ]] && wait "$prof_pid" 2>/dev/null || true
	stop_pid "$sampler_pid"
	sampler_pid=""
	local bcpu scpu=- rss idle
	# Machine-wide idle and iowait over the run: with no idle CPU the cores
	# were the limit (other processes included), with high iowait the disk.
	idle=$(echo "$m0 $m1" | awk '{d = $4 - $1; if (d <= 0) d = 1; printf "%.0f/%.0f", ($5-$2)/d*100, ($6-$3)/d*100}')
	# CPU pressure: the share of the run during which some runnable task
	# waited for a core (Linux PSI); high values mean queueing on the CPUs.
	stall=$(awk -v a="${s0:-0}" -v b="${s1:-0}" -v w0="$w0" -v w1="$w1" 'BEGIN{printf "%.0f%%", (b-a)/1e6/(w1-w0)*100}')
	bcpu=$(awk -v a="$t0" -v b="$t1" -v t="$TICK" -v w0="$w0" -v w1="$w1" 'BEGIN{printf "%.0f", (b-a)/t/(w1-w0)*100}')
	# The slave's CPU over the run, when one runs (its process may have
	# started during the run: ticks from its start).
	[[ -n "$slave_pid" ]] && scpu=$(awk -v a="$u0" -v b="$u1" -v t="$TICK" -v w0="$w0" -v w1="$w1" 'BEGIN{printf "%.0f%%", (b-a)/t/(w1-w0)*100}')
	rss=$(awk '{printf "%.0f", $1/1024}' "$SCRATCH/rss")
	ROWS+=("$(awk -v name="$name" -v target="$target" -v bcpu="$bcpu" -v scpu="$scpu" -v rss="$rss" -v idle="$idle" -v stall="$stall" '
		/^\[Complete\] Send Total:/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "TPS:") tps = $(i+1)
				if ($i == "Average" && $(i+1) == "RT(ms):") avg = $(i+2)
				if ($i == "Failed:") fail += $(i+1)
			}
		}
		/^\[Complete\] Consume Total:/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "TPS:") tps = $(i+1)
				if ($i == "Average(S2C)") avg = $(i+2)
			}
			p99 = "-"; p999 = "-"
		}
		/^\[Complete\] Send Total:.*Receive Total:/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "Lost:") fail = $(i+1)
				if ($i == "Average" && $(i+1) == "E2E(ms):") avg = $(i+2)
			}
			tps = "-"
		}
		/^\[Complete\] Send Total:.*Replicated:/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "Missing:") fail = $(i+1)
				if ($i == "Average" && $(i+1) == "Lag(ms):") avg = $(i+2)
			}
			tps = "-"
		}
		/^\[Complete\] Catch-up:/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "MB/s") tps = $(i-1) "MB/s"
				if ($i == "in") avg = $(i+1) "s"
			}
			p99 = "-"; p999 = "-"
		}
		/^p50\/p99\/p999/ { p99 = $(NF-1); p999 = $NF }
		/^\[CPU\]/ { for (i = 1; i <= NF; i++) if ($i == "core,") tool = $(i-3) }
		END {
			if (tps == "") tps = "FAILED"
			printf "%-14s %10s %9s %9s %9s %7s %6s %7s %6s %7s %9s %6s  %s\n", name, tps, avg, p99, p999, fail+0, tool, bcpu "%", scpu, rss, idle, stall, target
		}' "$log")")
	tail -n 3 "$log" >&2
}

want() { [[ " $CASES " == *" $1 "* ]]; }

# replicated_case ROLE NAME TARGET ARGS...: run_case against a master of
# ROLE (ASYNC_FLUSH) and its slave, both on fresh stores, once the slave
# caught up; the slave stops after. Call it as a statement (in an if body,
# not after &&), so that a slave that never catches up stops the script;
# replicated_start likewise.
replicated_case() {
	local role=$1
	shift
	replicated_start "$role"
	run_case "$@"
	stop_pid "$slave_pid"
	slave_pid=""
}

# replicated_start ROLE: a master of ROLE (ASYNC_FLUSH) and its slave on
# fresh stores, once the slave caught up; the caller stops the slave.
replicated_start() {
	stop_pid "$broker_pid"
	start_broker ASYNC_FLUSH "$1"
	start_slave
	slave_caught_up >&2
}

start_namesrv
start_broker ASYNC_FLUSH
M=(producer -s 1024 -d "${DUR}s" --queues 8)
want sync-w1 && run_case sync-w1 ">=12000" "${M[@]}" -t BenchSync1 -w 1
want sync-w4 && run_case sync-w4 ">=35000" "${M[@]}" -t BenchSync4 -w 4
want sync-w16 && run_case sync-w16 ">=60000" "${M[@]}" -t BenchSync16 -w 16
if want tls-sync-w16; then
	if [[ -n "$TLS_CA" ]]; then
		run_case tls-sync-w16 ">=0.6*sync-w16" "${M[@]}" -t BenchTLS16 -w 16 --tls-ca "$TLS_CA"
	else
		ROWS+=("$(printf "%-14s %10s" tls-sync-w16 SKIPPED)")
	fi
fi
want sync-w64 && run_case sync-w64 ">=60000" "${M[@]}" -t BenchSync64 -w 64
want async-w16 && run_case async-w16 ">=150000" "${M[@]}" -t BenchAsync -w 16 --mode async --inflight 2048
want batch32-w16 && run_case batch32-w16 ">=150000" "${M[@]}" -t BenchBatch -w 16 --batch 32
if want catchup; then
	run_case catchup-fill "(fill)" producer -s 1024 -d 180s --queues 8 -t BenchCatchup -w 8 --batch 64 --count "$CATCHUP"
	run_case catchup ">=400000" consumer -t BenchCatchup --from first --count "$CATCHUP" -d 120s --idle 10s
fi
want latency-5k && run_case latency-5k "p99<=2ms" latency -t BenchLatency --rate 5000 -d "${DUR}s"
# ACL: every request signed (HMAC-SHA1 over header and body) by mqbench and
# checked by the broker, permissions included (the account lists a topic,
# so the permission lookup runs too).
if want acl-sync-w16; then
	stop_pid "$broker_pid"
	cat >"$SCRATCH/plain_acl.yml" <<ACL
accounts:
  - accessKey: benchmark
    secretKey: benchmark-secret
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
    topicPerms:
      - BenchAcl16=PUB|SUB
ACL
	BROKER_CONF="${BROKER_CONF:-}
aclEnable=true
aclPlainFile=$SCRATCH/plain_acl.yml" start_broker ASYNC_FLUSH
	run_case acl-sync-w16 ">=0.8*sync-w16" "${M[@]}" -t BenchAcl16 -w 16 -ak benchmark -sk benchmark-secret
fi
if want syncflush-w64; then
	stop_pid "$broker_pid"
	start_broker SYNC_FLUSH
	run_case syncflush-w64 ">=15000" "${M[@]}" -t BenchSyncFlush -w 64
fi
# Replication: a master (port BROKER_PORT, HA port +1) and its slave on fresh stores.
if want syncmaster-w64; then
	replicated_case SYNC_MASTER syncmaster-w64 ">=0.6*sync-w64" "${M[@]}" -t BenchSyncMaster -w 64
fi
# The same 64 senders against an ASYNC_MASTER with its slave attached: the
# slave's CPU is spent on the same two cores, so syncmaster-w64 over this
# is what waiting for the slave's ack costs, and sync-w64 over this what
# hosting a slave on the machine costs.
if want asyncmaster-w64; then
	replicated_case ASYNC_MASTER asyncmaster-w64 "(slave attached)" "${M[@]}" -t BenchAsyncMaster -w 64
fi
if want replag-10k; then
	# The slave copies a new topic from its master within 10 s, and replag
	# waits for that before it sends. A short unmeasured run first creates
	# the topic and waits, so the measured run's window (the CPU, idle and
	# stall columns) is its sending, not that wait.
	REPLAG=(replag -t BenchRepLag -w 64 --master "127.0.0.1:$BROKER_PORT" --slave "127.0.0.1:$SLAVE_PORT")
	replicated_start ASYNC_MASTER
	run_case replag-prep "(prep)" "${REPLAG[@]}" --rate 1000 -d 1s
	run_case replag-10k "p99<=5ms" "${REPLAG[@]}" --rate 10000 -d "${DUR}s"
	stop_pid "$slave_pid"
	slave_pid=""
fi
if want repl-catchup; then
	stop_pid "$broker_pid"
	start_broker ASYNC_FLUSH
	start_slave
	# One record first, copied while the slave runs: stopped and started
	# again, the slave resumes from its own offset and copies everything
	# after it (an empty slave would start at the master's newest file).
	timeout 60 "$BIN/mqbench" producer -n "$NS" -t BenchReplCatchup --queues 8 -w 1 --count 1 -d 30s >/dev/null
	from=$(slave_caught_up | sed -n 's/.* to \([0-9]*\) in .*/\1/p')
	stop_pid "$slave_pid"
	slave_pid=""
	# About 1190 commitlog bytes per 1 KiB message of this topic.
	run_case repl-fill "(fill)" producer -s 1024 -d 300s -t BenchReplCatchup -w 8 --batch 64 --count $((REPL_MIB * 1048576 / 1190))
	start_slave keep
	run_case repl-catchup ">=300MB/s" hacatchup --master "127.0.0.1:$BROKER_PORT" --slave "127.0.0.1:$SLAVE_PORT" \
		--from-offset "${from:--1}" -d 300s
	stop_pid "$slave_pid"
	slave_pid=""
fi

{
	echo "mqbench matrix: $(date -u '+%Y-%m-%d %H:%M:%S') UTC, $(nproc) cores, ${DUR}s per send run, 1 KiB bodies"
	printf "%-14s %10s %9s %9s %9s %7s %6s %7s %6s %7s %9s %6s  %s\n" case "msgs/s" "avg(ms)" "p99(ms)" "p999(ms)" failed "tool%" broker% slave% "rssMiB" "idle/io%" "stall" target
	printf '%s\n' "${ROWS[@]}"
	echo "avg = send RT (sync/async/batch), store-to-consume (catchup), publish-to-receive (latency);"
	echo "tool% = mqbench CPU as % of one core; broker% (slave%) = the (slave) broker's CPU as % of one core; rssMiB = broker peak RssAnon;"
	echo "idle/io% = whole machine idle and iowait % over the run (other processes share it);"
	echo "stall = share of the run some runnable task waited for a CPU (/proc/pressure/cpu)"
	printf '%s\n' "${ROWS[@]}" | awk '$1 == "sync-w64" {a = $2} $1 == "syncmaster-w64" {s = $2}
		END {if (a > 0 && s > 0) printf "syncmaster-w64 / sync-w64 = %.2f (target >= 0.6)\n", s / a}'
	printf '%s\n' "${ROWS[@]}" | awk '$1 == "asyncmaster-w64" {a = $2} $1 == "syncmaster-w64" {s = $2} $1 == "sync-w64" {u = $2}
		END {if (a > 0 && s > 0) printf "syncmaster-w64 / asyncmaster-w64 = %.2f (both with a slave; the ack wait alone)\n", s / a
			if (a > 0 && u > 0) printf "asyncmaster-w64 / sync-w64 = %.2f (the slave process on the same cores)\n", a / u}'
	printf '%s\n' "${ROWS[@]}" | awk '$1 == "sync-w16" {a = $2} $1 == "tls-sync-w16" {s = $2}
		END {if (a > 0 && s > 0) printf "tls-sync-w16 / sync-w16 = %.2f (target >= 0.6)\n", s / a}'
	printf '%s\n' "${ROWS[@]}" | awk '$1 == "sync-w16" {u = $2} $1 == "acl-sync-w16" {s = $2}
		END {if (u > 0 && s > 0) printf "acl-sync-w16 / sync-w16 = %.2f (target >= 0.8)\n", s / u}'
	echo "replag avg/p99/p999 = slave acked - master stored, per message (ms; see replag-10k.out); repl-catchup: MB/s (1e6 bytes) and seconds"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/table.txt"
echo "bench.sh: outputs in $OUT" >&2
