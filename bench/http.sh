#!/usr/bin/env bash
# The HTTP plaintext benchmark: TechEmpower's /plaintext (a GET answered
# "Hello, World!" as text/plain) on four servers on the loopback, loaded by
# wrk, plain (one request at a time per connection) and pipelined (16
# requests per write, bench/http_pipeline.lua).
#
#   bash bench/http.sh [--seconds D] [--workers "1 2"] [--connections "64 256"]
#                      [--modes "plain pipeline"] [--threads T]
#                      [--servers "bare stackhouse nginx h2o"]
#                      [--quick] [--mallocs | --idle N]
#
# The servers, each on 127.0.0.1, a free port and W worker threads or
# processes:
#   bare        bench/http_bare.c: bare epoll, the limit
#   stackhouse  examples/http.c
#   nginx       nginx-light, `return 200 "Hello, World!"` in a location
#   h2o         h2o, a file "plaintext" of a file.dir
# nginx and h2o get a configuration generated in a temporary directory and
# run as the current user. wrk, nginx-light and h2o are Debian packages,
# installed when missing (as root, or through sudo -n); a server that cannot
# be installed or started, or answers /plaintext wrongly (checked once with
# curl before it is measured), shows FAILED or n/a and the others still run.
#
# For each worker count, each server in turn is started and measured at
# every connection count and mode: `wrk -t T -c C -d D --latency`. The
# table's figures are wrk's Requests/sec, responses per second (wrk parses
# each response, pipelined ones too). Then two ratios: stackhouse over the
# better of nginx and h2o, and stackhouse over bare.
#
# --seconds D per cell (default 5); --threads T wrk's threads (default 2:
# wrk shares the machine's CPUs with the server, and on a 2-core machine
# each side gets about one). --quick: one short pass, --seconds 2
# --workers 1 --connections 64, for a sanity check.
#
# --mallocs measures the stackhouse server's allocations instead: the http
# example linked with the malloc counter (build/release/bench/http_counted,
# SIGUSR1 prints its count), read before each wrk run, a second in, a second
# before its end and after it. Between the middle two reads is steady state:
# its mallocs over its share of the run's requests are the mallocs per
# request. D is at least 3.
#
# --idle N measures memory per idle keep-alive connection instead: for each
# server, its resident set (with its child processes) before N connections
# open, once they are open and once each has made one request
# (bench/http_idle.c).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The servers: a name, then the command ({port}, {workers} replaced; the
# run_ ones are functions below).
servers=(
  "bare build/release/bench/http_bare --port {port} --workers {workers}"
  "stackhouse build/release/examples/http --port {port} --workers {workers}"
  "nginx run_nginx {port} {workers}"
  "h2o run_h2o {port} {workers}"
)

seconds=5
threads=2
mode=table
idle=0
worker_counts="1 2"
connections="64 256"
modes="plain pipeline"
only="bare stackhouse nginx h2o"
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --workers) worker_counts=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --servers) only=$2; shift 2 ;;
    --quick) seconds=2; worker_counts=1; connections=64; shift ;;
    --mallocs) mode=mallocs; shift ;;
    --idle) mode=idle; idle=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "http.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

prog=http.sh
# shellcheck source=bench/common/servers.sh
source bench/common/servers.sh
# shellcheck source=bench/common/packages.sh
source bench/common/packages.sh
tmp=$(mktemp -d)
trap 'stop_server; rm -rf "$tmp"' EXIT
# Thousands of connections (--idle) need as many descriptors, here and in
# the servers started from here.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

ensure wrk || exit 1
ensure curl || exit 1
declare -A usable=() # server name -> 1 when it can be run
make --no-print-directory -j2 build/release/bench/http_bare build/release/bench/http_idle >/dev/null
usable[bare]=1
if make --no-print-directory -j2 build/release/examples/http >"$tmp/make.log" 2>&1; then
  usable[stackhouse]=1
else
  echo "$prog: build/release/examples/http does not build:" >&2
  tail -n 3 "$tmp/make.log" >&2
fi
ensure nginx-light && usable[nginx]=1
ensure h2o && usable[h2o]=1
[[ $mode != mallocs ]] || make --no-print-directory -j2 build/release/bench/http_counted >/dev/null

# nginx as a user would serve the route, in the foreground, everything it
# writes under one directory. keepalive_requests: nginx closes a keep-alive
# connection after that many requests (default 1000), which would cut
# wrk's connections every few milliseconds.
# shellcheck disable=SC2317 # run through the servers table
run_nginx() {
  local d=$tmp/nginx-$1 user=
  mkdir -p "$d"
  [[ $(id -u) -ne 0 ]] || user="user root;" # else its workers become nobody
  cat >"$d/nginx.conf" <<EOF
$user
worker_processes $2;
worker_rlimit_nofile 65536;
daemon off;
pid $d/nginx.pid;
error_log stderr;
events { worker_connections 65536; }
http {
  access_log off;
  keepalive_requests 1000000000;
  client_body_temp_path $d/body;
  proxy_temp_path $d/proxy;
  fastcgi_temp_path $d/fastcgi;
  uwsgi_temp_path $d/uwsgi;
  scgi_temp_path $d/scgi;
  server {
    listen 127.0.0.1:$1 backlog=4096;
    location = /plaintext {
      default_type text/plain;
      return 200 "Hello, World!";
    }
  }
}
EOF
  exec nginx -p "$d" -c "$d/nginx.conf"
}

# h2o the same way: /plaintext a file of its file.dir, served as text/plain
# (no extension: the default type); no access log. (Its mruby handler, the
# other way the package offers, answered 30-45 % fewer requests.)
# max-connections: its default, 1024, would refuse --idle's.
# shellcheck disable=SC2317 # run through the servers table
run_h2o() {
  local d=$tmp/h2o-$1 user=
  mkdir -p "$d/www"
  printf 'Hello, World!' >"$d/www/plaintext"
  [[ $(id -u) -ne 0 ]] || user="user: root" # else it refuses to run
  cat >"$d/h2o.conf" <<EOF
$user
num-threads: $2
max-connections: 65536
pid-file: $d/h2o.pid
file.mime.setdefaulttype: "text/plain"
listen:
  host: 127.0.0.1
  port: $1
hosts:
  default:
    paths:
      /:
        file.dir: $d/www
EOF
  exec h2o -c "$d/h2o.conf"
}

# Starts server $1 (a table entry) and checks its /plaintext once; false,
# with a note, when it cannot run, does not start or answers wrongly.
start_checked() {
  local entry=$1 n=${1%% *}
  [[ -n ${usable[$n]:-} ]] || { echo "$prog: $n is not available" >&2; return 1; }
  if ! start_server "$entry" "$tmp/$n.err"; then
    echo "$prog: $n did not start:" >&2
    tail -n 5 "$tmp/$n.err" >&2
    return 1
  fi
  local got
  got=$(curl -si --max-time 5 "http://127.0.0.1:$port/plaintext" | tr -d '\r' || true)
  if [[ $got != "HTTP/1.1 200"* || $got != *$'\n\nHello, World!' ]]; then
    echo "$prog: $n answers /plaintext wrongly:" >&2
    printf '%s\n' "$got" | head -n 12 >&2
    stop_server
    return 1
  fi
}

# wrk on the running server: connections $1, mode $2. Prints its output.
load() {
  local script=() depth=()
  [[ $2 == plain ]] || { script=(-s bench/http_pipeline.lua); depth=(-- 16); }
  timeout $((seconds + 30)) wrk -t "$threads" -c "$1" -d "${seconds}s" --latency \
    ${script[@]+"${script[@]}"} "http://127.0.0.1:$port/plaintext" ${depth[@]+"${depth[@]}"}
}

# Requests/sec of wrk's output $1, FAILED if none or if it saw errors.
rate() {
  local r
  r=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' <<<"$1")
  if [[ -z $r ]] || grep -q 'Non-2xx\|Socket errors' <<<"$1"; then
    grep 'Non-2xx\|Socket errors' <<<"$1" | sed "s/^ */$prog: $name: /" >&2 || true
    echo FAILED
  else
    printf '%.0f' "$r"
  fi
}

# a / b to two places, empty when either is not a number.
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b }'
}

table_row() { printf '%-7s %5s %-8s %9s %10s %9s %9s %9s %9s\n' "$@"; }

table() {
  declare -A rps=()
  local out c m entry n
  for workers in $worker_counts; do
    for entry in "${servers[@]}"; do
      n=${entry%% *}
      [[ " $only " == *" $n "* ]] || continue
      start_checked "$entry" || { status=1; continue; }
      for c in $connections; do
        for m in $modes; do
          out=$(load "$c" "$m" 2>&1) || true
          rps[$n/$workers/$c/$m]=$(rate "$out")
          echo "$prog: $n, $workers workers, $c connections, $m: ${rps[$n/$workers/$c/$m]}" >&2
        done
      done
      stop_server
    done
  done
  local best nx h2 sh
  table_row workers conns mode bare stackhouse nginx h2o sh/best sh/bare
  for workers in $worker_counts; do
    for c in $connections; do
      for m in $modes; do
        sh=${rps[stackhouse/$workers/$c/$m]:-n/a}
        nx=${rps[nginx/$workers/$c/$m]:-n/a}
        h2=${rps[h2o/$workers/$c/$m]:-n/a}
        best=$(awk -v a="$nx" -v b="$h2" 'BEGIN { a += 0; b += 0; print (a > b ? a : b) }')
        table_row "$workers" "$c" "$m" "${rps[bare/$workers/$c/$m]:-n/a}" "$sh" "$nx" "$h2" \
          "$(ratio "$sh" "$best")" "$(ratio "$sh" "${rps[bare/$workers/$c/$m]:-}")"
      done
    done
  done
}

# Requests wrk completed, from its "N requests in Ts" line.
completed() { sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' <<<"$1"; }

mallocs() {
  ((seconds >= 3)) || { echo "$prog: --mallocs needs --seconds 3 or more" >&2; exit 2; }
  mlog=$tmp/mallocs.log
  usable[stackhouse_counted]=1
  printf '%7s %5s %-8s %10s %12s %10s %14s %10s\n' workers conns mode requests 'run mallocs' \
    'per req' 'steady mallocs' 'per req'
  for workers in $worker_counts; do
    start_checked "stackhouse_counted build/release/bench/http_counted --port {port} --workers {workers}" ||
      { status=1; continue; }
    mv "$tmp/stackhouse_counted.err" "$mlog"
    local c m r
    for c in $connections; do
      for m in $modes; do
        mallocs_around "$tmp/wrk.out" load "$c" "$m" || status=1
        r=$(completed "$(cat "$tmp/wrk.out")")
        awk -v w="$workers" -v c="$c" -v m="$m" -v r="${r:-0}" -v run=$((m3 - m0)) -v st=$((m2 - m1)) \
          -v t="$seconds" 'BEGIN { s = r * (t - 2) / t; if (r == 0) r = 1; if (s == 0) s = 1;
            printf "%7s %5s %-8s %10s %12s %10.4f %14s %10.4f\n", w, c, m, r, run, run / r, st, st / s }'
      done
    done
    stop_server
  done
}

idle_conns() {
  local entry n
  workers=${worker_counts%% *}
  for entry in "${servers[@]}"; do
    n=${entry%% *}
    [[ " $only " == *" $n "* ]] || continue
    start_checked "$entry" || { status=1; continue; }
    if out=$(build/release/bench/http_idle --port "$port" --pid "$server_pid" --connections "$idle"); then
      printf '%-11s %s\n' "$n" "$out"
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
