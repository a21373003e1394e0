#!/usr/bin/env bash
# The echo benchmark: request/response round trips per second through a TCP
# echo server on the loopback, measured by bench/echo_load (one message out,
# its whole echo back, the next message) for 1, 16 and 256 connections and
# messages of 64 and 16384 bytes.
#
#   bash bench/echo.sh [--seconds T] [--workers W] [--threads N]
#                      [--connections "1 16 256"] [--sizes "64 16384"]
#                      [--check] [SERVER_CMD...]
#
# With no SERVER_CMD it measures every server of the `servers` table below
# in turn, the bare epoll server (bench/echo_bare.c, the limit) first, then
# the stackhouse one (examples/echo.c), and prints one table of them all;
# each row after the first server's has its ratio to the first server's row
# of the same connections and size (req/s; MB/s follows, the size being
# the same). With SERVER_CMD it measures that command
# alone: {port} and {workers} in its words are replaced by the port and the
# worker count, and a command without {port} gets `--port P` appended.
# Each server is started on a free port, measured, and stopped.
#
# --seconds T per measurement (default 3); --workers W server threads
# (default: the CPU count); --threads N load threads (default: echo_load's,
# the CPU count); --check has echo_load verify every byte echoed.
#
# The load client runs on the same machine as the server and competes with
# it for the CPUs: the figures compare servers measured the same way on the
# same machine, not what one server could take from remote clients.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The servers compared when no SERVER_CMD is given: a name, then the
# command. To compare one more server, add a line.
servers=(
  "bare build/release/bench/echo_bare --port {port} --workers {workers}"
  "stackhouse build/release/examples/echo --port {port} --workers {workers}"
)

seconds=3
workers=$(nproc 2>/dev/null || echo 1)
connections="1 16 256"
sizes="64 16384"
load_opts=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --threads) load_opts+=(--threads "$2"); shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --check) load_opts+=(--check); shift ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) echo "echo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if (($#)); then
  cmd="$*"
  [[ $cmd == *"{port}"* ]] || cmd+=" --port {port}"
  servers=("$(basename "$1") $cmd")
fi

load=build/release/bench/echo_load
make --no-print-directory -j2 "$load" build/release/bench/echo_bare build/release/examples/echo >/dev/null

# A port nothing listens on (nor will, for a few seconds, with luck):
# connecting to it is refused.
free_port() {
  local p
  for _ in {1..50}; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo "echo.sh: no free port found" >&2
  exit 1
}

# Waits until the server (pid $1) accepts on port $2, for 10 s at most.
wait_listening() {
  for _ in {1..100}; do
    kill -0 "$1" 2>/dev/null || { echo "echo.sh: the server exited" >&2; return 1; }
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "echo.sh: the server does not accept on port $2" >&2
  return 1
}

server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap stop_server EXIT

# The first server's req/s by "connections/size": the ratios' denominators.
declare -A first_rps=()
first=

# One row of the table: server, connections, size, req/s, MB/s, and the
# ratio to the first server's row when there is one.
row() {
  local ratio=
  if [[ $1 == "$first" ]]; then
    first_rps[$2/$3]=$4
  elif [[ -n ${first_rps[$2/$3]:-} && $4 != FAILED ]]; then
    ratio=$(awk -v a="$4" -v b="${first_rps[$2/$3]}" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
  fi
  printf '%-12s %11s %6s %12s %10s %6s\n' "$1" "$2" "$3" "$4" "$5" "$ratio"
}

status=0
printf '%-12s %11s %6s %12s %10s %6s\n' server connections size 'req/s' 'MB/s' ratio
for entry in "${servers[@]}"; do
  name=${entry%% *}
  first=${first:-$name}
  port=$(free_port)
  cmd=${entry#* }
  cmd=${cmd//\{port\}/$port}
  cmd=${cmd//\{workers\}/$workers}
  # Word splitting is wanted: the table's commands are plain words.
  # shellcheck disable=SC2086
  $cmd >/dev/null &
  server_pid=$!
  if ! wait_listening "$server_pid" "$port"; then
    stop_server
    status=1
    continue
  fi
  for c in $connections; do
    for s in $sizes; do
      if out=$("$load" --port "$port" --connections "$c" --size "$s" --seconds "$seconds" \
                 ${load_opts[@]+"${load_opts[@]}"}); then
        rps=$(sed -n 's/.*req\/s=\([0-9.]*\).*/\1/p' <<<"$out")
        mbs=$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$out")
        row "$name" "$c" "$s" "$rps" "$mbs"
      else
        row "$name" "$c" "$s" FAILED -
        status=1
      fi
    done
  done
  stop_server
done
exit $status
