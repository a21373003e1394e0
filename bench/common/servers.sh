# shellcheck shell=bash disable=SC2154,SC2034  # prog, workers, mlog are the caller's; name, m0-m3 its results
# Starting and stopping the server under test on the loopback: sourced by
# bench/echo.sh and bench/http.sh. The caller sets `prog` (the prefix of its
# messages) and `workers` (what {workers} in a command becomes).
#
#   start_server "NAME COMMAND" [ERRFILE]   sets name, port and server_pid
#   stop_server                             (also run on exit)
#   count_mallocs                           a counted server's mallocs so far
#   mallocs_around OUT CMD...               the counts around a load

# A port nothing listens on (nor will, for a few seconds, with luck):
# connecting to it is refused. Below Linux's ephemeral ports (32768 up),
# which the load's connections use: a port one of them holds (or held, in
# TIME_WAIT) cannot be bound, though connecting to it is refused.
free_port() {
  local p
  for _ in {1..50}; do
    p=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo "$prog: no free port found" >&2
  exit 1
}

# Waits until the server (pid $1) accepts on port $2, for 10 s at most.
wait_listening() {
  for _ in {1..100}; do
    kill -0 "$1" 2>/dev/null || { echo "$prog: the server exited" >&2; return 1; }
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$prog: the server does not accept on port $2" >&2
  return 1
}

# Stops the server: SIGTERM, then SIGKILL if it lingers past 5 s (a server
# that does not stop must not hold the port and the CPUs of what follows).
server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    for _ in {1..50}; do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap stop_server EXIT
# Interrupted, the script exits, which runs the EXIT trap (bash skips it
# when a signal ends the shell).
trap 'exit 130' INT
trap 'exit 143' TERM

# Starts the server of table entry $1 ("name command") on a free port, its
# stderr to file $2 if given: sets name, port and server_pid. False when
# it does not come to accept. {port} and {workers} in the command become
# the port and $workers; the command may be a shell function that ends in
# exec, so that server_pid is the server's. (Not 2>/dev/stderr: when our
# stderr is a file, that opens it anew, truncated, and writes over what it
# held.)
start_server() {
  name=${1%% *}
  port=$(free_port)
  local cmd=${1#* }
  cmd=${cmd//\{port\}/$port}
  cmd=${cmd//\{workers\}/$workers}
  # Word splitting is wanted: the table's commands are plain words.
  # shellcheck disable=SC2086
  if [[ -n ${2:-} ]]; then $cmd >/dev/null 2>"$2" & else $cmd >/dev/null & fi
  server_pid=$!
  wait_listening "$server_pid" "$port" || { stop_server; return 1; }
}

# The counted server's allocations so far: SIGUSR1, then the line it
# writes to $mlog.
count_mallocs() {
  local lines
  lines=$(wc -l <"$mlog")
  kill -USR1 "$server_pid"
  for _ in {1..50}; do
    [[ $(wc -l <"$mlog") -gt $lines ]] && break
    sleep 0.1
  done
  tail -n 1 "$mlog" | sed -n 's/^mallocs=\([0-9]*\).*/\1/p'
}

# Runs the load CMD... (its output to file OUT; it runs $seconds, at least
# 3) against the counted server and reads the count before it (m0), a
# second in (m1), a second before its end (m2) and after it (m3): between
# m1 and m2 is steady state, every connection open and busy. False when
# the load failed.
mallocs_around() {
  local out=$1 lpid rc=0
  shift
  m0=$(count_mallocs)
  "$@" >"$out" 2>&1 &
  lpid=$!
  sleep 1
  m1=$(count_mallocs)
  sleep $((seconds - 2))
  m2=$(count_mallocs)
  wait "$lpid" || rc=1
  m3=$(count_mallocs)
  return $rc
}
