#!/usr/bin/env bash
# Measures automatic failover in a controller-mode cluster of real
# processes (make failover-bench KILLS=20): three nameservers with
# controllers and three replicas of broker-a (SYNC_MASTER, default
# controller timings) under a steady stream of sync sends from 4 senders.
# KILLS times the master is kill -9ed; for each kill it prints the time
# from the kill to the first SEND_OK on the group's new master, then the
# median and worst, and how many acknowledged messages were lost (every
# SEND_OK is looked for in the final master's queues).
#
#   scripts/failover-bench.sh [KILLS] [OUT_FILE]
#
# The driver is e2e's TestControllerFailoverBench (it builds mqnamesrv and
# mqbroker itself, without -race). OUT_FILE (default
# failover-bench.txt) receives the per-kill lines and the summary,
# OUT_FILE.log the whole test output.
set -euo pipefail
cd "$(dirname "$0")/.."
KILLS=${1:-20}
OUT=${2:-failover-bench.txt}
case $OUT in /*) ;; *) OUT="$PWD/$OUT" ;; esac
# Each kill takes a few seconds plus the restart of the killed broker.
timeout=$((KILLS * 60 + 300))
rm -f "$OUT"
set +e
# The whole test output (server logs of a failure included) goes to OUT.log.
FAILOVER_BENCH_KILLS=$KILLS FAILOVER_BENCH_OUT=$OUT \
	go test -count=1 -v -timeout "${timeout}s" -run '^TestControllerFailoverBench$' ./e2e/ 2>&1 |
	tee "$OUT.log" | grep -E 'controller_bench_test.go|^(--- |ok|FAIL|PASS)'
rc=${PIPESTATUS[0]}
set -e
if [[ $rc -ne 0 || ! -s $OUT ]]; then
	echo "failover-bench.sh: the run failed (status $rc); see $OUT.log" >&2
	exit 1
fi
echo
echo "figures in $OUT:"
cat "$OUT"
