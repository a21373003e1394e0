#!/usr/bin/env bash
# Runs the Savina suite (bench/savina/) on stackhouse and its twins on CAF,
# Erlang and Go, interleaved: round 1 runs every benchmark on stackhouse,
# CAF, Erlang and Go in turn, then round 2, ... Then prints, per benchmark,
# the median over the rounds of each runtime's msgs/s and peak RSS, and the
# ratio of stackhouse's msgs/s to the best other runtime's.
#
#   bash bench/compare_savina.sh [--rounds R] [--quick] [--only NAME]
#                                [--reps N] [--workers W]
#
# --rounds R: rounds (default 5). --quick: each program's small parameters
# and a single run (no warm-up). --only NAME: that benchmark alone.
# --reps N: measured runs per program per round (default 1, after one
# warm-up run; the program reports their median). --workers W: the
# runtimes' threads (default 2: stackhouse workers, CAF scheduler threads,
# Erlang schedulers, GOMAXPROCS).
#
# The peers come from Debian packages, installed when missing (as root, or
# through sudo -n): libcaf-dev, erlang-base, golang-go. A peer that cannot
# be installed, built or run shows "n/a"; the others still run. Exit status
# 1 when a program failed or reported a wrong result.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_benches=(pingpong counting threadring fjthrput big chameneos fib fibpool)
runtimes=(sh caf erlang go)
rounds=5
prog_args=()
benches=("${all_benches[@]}")
reps=1
workers=2
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --quick) prog_args+=(--quick); shift ;;
    --reps) reps=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --only)
      [[ " ${all_benches[*]} " == *" $2 "* ]] || { echo "compare_savina: no benchmark $2" >&2; exit 2; }
      benches=("$2"); shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_savina: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ " ${prog_args[*]} " == *" --quick "* ]] || prog_args+=(--reps "$reps")
prog_args+=(--workers "$workers")

# ---- peers, installed on demand -------------------------------------------
prog=compare_savina
# shellcheck source=bench/common/packages.sh
source bench/common/packages.sh

# ---- build ------------------------------------------------------------------
out=build/release/bench/savina
declare -A have # runtime -> 1 when its programs built
make --no-print-directory -j2 "${benches[@]/#/$out/}" >/dev/null && have[sh]=1

build_caf() {
  ensure libcaf-dev || return 1
  mkdir -p "$out/caf/obj"
  local objs=() src obj b
  for src in bench/savina/common/savina.c bench/savina/common/specs.c bench/common/malloc_count.c; do
    obj=$out/caf/obj/$(basename "${src%.c}").o
    "${CC:-gcc}" -O2 -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -Ibench/common \
      -c "$src" -o "$obj" || return 1
    objs+=("$obj")
  done
  for b in "${benches[@]}"; do
    # A CAF program takes seconds to compile: only when a source changed.
    if [[ -x $out/caf/$b ]] && [[ -z $(find bench/savina/caf/ bench/savina/common/ -newer "$out/caf/$b") ]]; then
      continue
    fi
    "${CXX:-g++}" -O2 -std=c++17 -Wall -Wextra -Werror -pthread -Ibench/common -Ibench/savina \
      "bench/savina/caf/$b.cpp" "${objs[@]}" -lcaf_core -lm -o "$out/caf/$b" || return 1
  done
}

build_erlang() {
  ensure erlang-base || return 1
  mkdir -p "$out/erlang"
  erlc -Werror -o "$out/erlang" bench/savina/erlang/*.erl
}

build_go() {
  ensure golang-go || return 1
  mkdir -p "$out/go"
  local top=$PWD
  (cd bench/savina/go && GOCACHE=${GOCACHE:-$top/build/.gocache} go build -o "$top/$out/go/savina" .)
}

built() { # runtime, status of its build
  if (($2 == 0)); then have[$1]=1; else echo "compare_savina: $1: n/a (did not build)" >&2; fi
}
rc=0; build_caf || rc=1; built caf $rc
rc=0; build_erlang || rc=1; built erlang $rc
rc=0; build_go || rc=1; built go $rc

# ---- run --------------------------------------------------------------------
cmd() { # runtime, benchmark: the command line that runs it
  case $1 in
    sh) echo "$out/$2" ;;
    caf) echo "$out/caf/$2" ;;
    erlang) echo "erl -noshell +S $workers -pa $out/erlang -run savina main -extra $2" ;;
    go) echo "$out/go/savina --bench $2" ;;
  esac
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
status=0
echo "== uptime before: $(uptime)"
for ((r = 1; r <= rounds; r++)); do
  echo "== round $r of $rounds"
  for b in "${benches[@]}"; do
    for rt in "${runtimes[@]}"; do
      [[ -n ${have[$rt]:-} ]] || continue
      # shellcheck disable=SC2046 # the command line splits on purpose
      if line=$(ERL_CRASH_DUMP_SECONDS=0 timeout 600 $(cmd "$rt" "$b") "${prog_args[@]}" 2>&1 |
                grep -E '^savina |run failed'); then
        echo "$line"
      fi
      if [[ $line == *"check=ok"* ]]; then
        echo "$b $rt $line" >> "$results"
      else
        echo "compare_savina: $rt $b failed"
        status=1
      fi
    done
  done
done
echo "== uptime after: $(uptime)"
echo

# ---- the table ----------------------------------------------------------------
median() { sort -g | awk '{v[NR] = $1} END { if (NR == 0) print "n/a"; else print v[int((NR + 1) / 2)] }'; }
figure() { # benchmark, runtime, key: the median of that key over the rounds
  { grep "^$1 $2 " "$results" || true; } | tr ' ' '\n' | sed -n "s/^$3=//p" | median
}

caf_name=CAF
installed libcaf-dev && caf_name="CAF $(dpkg-query -W -f='${Version}' libcaf-dev | cut -d- -f1)"
echo "== medians over $rounds rounds; msgs/s (peak RSS MiB); ratio = stackhouse / best other."
echo "   The machine is shared: the figures are noisy."
printf '%-11s %20s %20s %20s %20s %7s\n' benchmark stackhouse "$caf_name" Erlang Go ratio
for b in "${benches[@]}"; do
  row=() best=0 ours=n/a
  for rt in "${runtimes[@]}"; do
    rate=$(figure "$b" "$rt" msgs_per_s)
    rss=$(figure "$b" "$rt" rss_mib)
    if [[ $rate == n/a ]]; then row+=(n/a); continue; fi
    row+=("$rate ($rss)")
    if [[ $rt == sh ]]; then ours=$rate
    else best=$(awk -v a="$rate" -v b="$best" 'BEGIN { print (a > b ? a : b) }'); fi
  done
  ratio=$(awk -v a="$ours" -v b="$best" 'BEGIN { if (a == "n/a" || b == 0) print "n/a"; else printf "%.2f", a / b }')
  printf '%-11s %20s %20s %20s %20s %7s\n' "$b" "${row[@]}" "$ratio"
done
exit $status
