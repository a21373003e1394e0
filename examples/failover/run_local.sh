#!/usr/bin/env bash
# examples/failover/ on loopback, as separate processes: three nodes and a
# client that must get its requests served; then the primary is killed
# with SIGKILL (no FIN from its process: the kernel's resets only) and a
# second client must still be served, by another node, in a higher epoch;
# then the killed node comes back (it grants nothing for a lease after
# boot: it may have promised before it died), the new primary is killed,
# and a third client must be served by the two left. About 3 seconds with
# the short lease used here (300 ms, heartbeat 30 ms). Not part of
# `make test` (test_e2e_failover runs the same cluster in one process).
#
#   bash examples/failover/run_local.sh         # builds the programs first (make)
#   KEEP=1 bash examples/failover/run_local.sh  # keep the logs (nodes run --verbose)
#
# Exit status 0 when every client was served and the epochs grew; else 1,
# with the logs. Needs bash, and python3 for free ports (else random ones).
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s build/release/examples/failover/node build/release/examples/failover/client || exit 2
BIN=build/release/examples/failover
LEASE=300 HEARTBEAT=30
dir=$(mktemp -d)
declare -A pid=()

cleanup() {
  for n in "${!pid[@]}"; do kill -9 "${pid[$n]}" 2>/dev/null; done
  wait 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "logs in $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

fail() {
  echo "run_local: FAIL: $*"
  for f in "$dir"/*.log; do echo "== $f"; tail -n 40 "$f"; done
  exit 1
}

# Three ports nobody listens on now (held together, so they differ).
ports=$(python3 -c 'import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))' 2>/dev/null) ||
  ports="$((20000 + RANDOM % 20000)) $((40000 + RANDOM % 10000)) $((50000 + RANDOM % 10000))"
read -r -a port <<<"$ports"
addr() { echo "127.0.0.1:${port[$1 - 1]}"; }

start_node() {
  local id=$1
  local args=(--id "$id" --listen "$(addr "$id")" --lease-ms $LEASE --heartbeat-ms $HEARTBEAT
              --verbose)
  for p in 1 2 3; do [ "$p" = "$id" ] || args+=(--peer "$p=$(addr "$p")"); done
  "$BIN/node" "${args[@]}" 2>>"$dir/node$id.log" &
  pid[$id]=$!
}

# run_client NAME: a client of 20 requests; sets `last` (the node that
# served the last one) and `epoch` (the highest epoch it saw).
run_client() {
  local out rc
  out=$(timeout 30 "$BIN/client" --server "$(addr 1)" --server "$(addr 2)" --server "$(addr 3)" \
        --requests 20 --interval-ms 10 --timeout-ms 300 --max-ms 15000 2>>"$dir/$1.log")
  rc=$?
  echo "$1: $out"
  [ $rc -eq 0 ] || fail "$1 exited with $rc"
  last=$(sed -n 's/.*last by node \([0-9]*\);.*/\1/p' <<<"$out")
  epoch=$(sed -n 's/.*(epochs [0-9]*\.\.\([0-9]*\)).*/\1/p' <<<"$out")
  [ -n "$last" ] && [ -n "$epoch" ] || fail "$1: cannot read its summary"
}

for n in 1 2 3; do start_node "$n"; done
run_client client1
first=$last epoch1=$epoch

kill -9 "${pid[$first]}"; wait "${pid[$first]}" 2>/dev/null; unset "pid[$first]"
echo "run_local: killed node $first (the primary) with SIGKILL"
run_client client2
[ "$last" != "$first" ] || fail "client2 was served by the killed node $first"
[ "$epoch" -gt "$epoch1" ] || fail "epoch did not grow: $epoch after $epoch1"
second=$last epoch2=$epoch

start_node "$first"
echo "run_local: restarted node $first"
sleep 1 # its quiet period (a lease), and a connection to each peer
kill -9 "${pid[$second]}"; wait "${pid[$second]}" 2>/dev/null; unset "pid[$second]"
echo "run_local: killed node $second (the primary) with SIGKILL"
run_client client3
[ "$last" != "$second" ] || fail "client3 was served by the killed node $second"
[ "$epoch" -gt "$epoch2" ] || fail "epoch did not grow: $epoch after $epoch2"
echo "run_local: PASS (primaries: node $first, node $second, node $last)"
