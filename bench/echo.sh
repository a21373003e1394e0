#!/usr/bin/env bash
# The echo benchmark: request/response round trips per second through a TCP
# echo server on the loopback, measured by bench/echo_load (one message out,
# its whole echo back, the next message) for 1, 16 and 256 connections and
# messages of 64 and 16384 bytes.
#
#   bash bench/echo.sh [--seconds T] [--workers W] [--threads N]
#                      [--connections "1 16 256"] [--sizes "64 16384"]
#                      [--check] [--mallocs | --idle N] [SERVER_CMD...]
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
# --mallocs measures the stackhouse server's allocations instead: the echo
# example linked with the malloc counter (build/release/bench/echo_counted,
# SIGUSR1 prints its count), read at each measurement's start, a second in,
# a second before its end, and after it. The window between the middle two
# reads is steady state (every connection open, echoing): its mallocs over
# the requests echoed in it (the run's, prorated) are the mallocs per
# message. The whole run's count adds what opening and closing the
# connections costs. T is at least 3.
#
# --idle N measures memory per idle connection instead: for every server
# of the table, its resident set before N connections open, once they are
# open, and once each has echoed one message (echo_load --idle).
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
mode=table
idle=0
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
    --mallocs) mode=mallocs; shift ;;
    --idle) mode=idle; idle=$2; shift 2 ;;
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
counted=build/release/bench/echo_counted
make --no-print-directory -j2 "$load" build/release/bench/echo_bare build/release/examples/echo "$counted" >/dev/null

prog=echo.sh
# shellcheck source=bench/common/servers.sh
source bench/common/servers.sh

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

# The value of KEY=value in echo_load's line $2.
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

table() {
  printf '%-12s %11s %6s %12s %10s %6s\n' server connections size 'req/s' 'MB/s' ratio
  for entry in "${servers[@]}"; do
    start_server "$entry" || { status=1; continue; }
    first=${first:-$name}
    for c in $connections; do
      for s in $sizes; do
        if out=$("$load" --port "$port" --connections "$c" --size "$s" --seconds "$seconds" \
                   ${load_opts[@]+"${load_opts[@]}"}); then
          row "$name" "$c" "$s" "$(field 'req\/s' "$out")" "$(field 'MB\/s' "$out")"
        else
          row "$name" "$c" "$s" FAILED -
          status=1
        fi
      done
    done
    stop_server
  done
}

mallocs() {
  ((seconds >= 3)) || { echo "echo.sh: --mallocs needs --seconds 3 or more" >&2; exit 2; }
  mlog=$(mktemp)
  start_server "stackhouse $counted --port {port} --workers {workers}" "$mlog" || { status=1; return; }
  printf '%11s %6s %10s %12s %10s %14s %10s\n' connections size requests 'run mallocs' \
    'per req' 'steady mallocs' 'per msg'
  local out r
  for c in $connections; do
    for s in $sizes; do
      out=$(mktemp)
      mallocs_around "$out" "$load" --port "$port" --connections "$c" --size "$s" --seconds "$seconds" \
        ${load_opts[@]+"${load_opts[@]}"} || status=1
      r=$(field requests "$(cat "$out")")
      rm -f "$out"
      awk -v c="$c" -v s="$s" -v r="${r:-0}" -v run=$((m3 - m0)) -v st=$((m2 - m1)) -v t="$seconds" \
        'BEGIN { w = r * (t - 2) / t; if (r == 0) r = 1; if (w == 0) w = 1;
                 printf "%11s %6s %10s %12s %10.4f %14s %10.4f\n", c, s, r, run, run / r, st, st / w }'
    done
  done
  stop_server
  rm -f "$mlog"
}

idle_conns() {
  for entry in "${servers[@]}"; do
    start_server "$entry" || { status=1; continue; }
    if out=$("$load" --port "$port" --idle --pid "$server_pid" --connections "$idle" \
               --size 64 --seconds 1); then
      printf '%-12s %s\n' "$name" "$out"
    else
      status=1
    fi
    stop_server
  done
}

status=0
case $mode in
  table) table ;;
  mallocs) mallocs ;;
  idle) idle_conns ;;
esac
exit $status
