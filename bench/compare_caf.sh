#!/usr/bin/env bash
# Runs stackhouse's pingpong, notice and bounded_buffer benches and their
# CAF (C++ Actor Framework) twins on this machine, in the same run, and
# prints the figures side by side: medians of --reps runs and the ratio
# stackhouse / CAF.
#
#   bash bench/compare_caf.sh [--quick] [--verbose] [--workers K] [--reps R] [--burn N]
#                             [--pairs N] [--senders N] [--rounds R]
#                             [--producers N] [--consumers N] [--buffer B]
#                             [--prod-cost C] [--cons-cost C] [--only BENCH]
#
# It installs libcaf-dev (Debian) when missing, the way tools/deps.sh
# installs packages, builds the CAF benches with g++ -O2 into
# build/release/bench/caf/ (never part of `make all`: C++ and an extra
# package), builds ours with make, and runs them in turn. The CAF benches
# link the same bench/common/*.c, so both sides are measured by the same
# code: warm-up, then a measured phase, mallocs counted by interposition.
# --rounds applies to every bench (round trips, notices, items); --pairs
# to pingpong, --senders to notice, --producers .. --cons-cost to
# bounded_buffer; --only BENCH runs that bench alone (pingpong, notice or
# bounded_buffer).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---- options --------------------------------------------------------------
common=()    # for every bench
pp_only=()   # pingpong only
nt_only=()   # notice only
bb_only=()   # bounded_buffer only
benches=(pingpong notice bounded_buffer)
while (($#)); do
  case $1 in
    --quick|--verbose) common+=("$1"); shift ;;
    --workers|--reps|--rounds|--max-ms|--burn) common+=("$1" "$2"); shift 2 ;;
    --pairs) pp_only+=("$1" "$2"); shift 2 ;;
    --senders) nt_only+=("$1" "$2"); shift 2 ;;
    --producers|--consumers|--buffer|--prod-cost|--cons-cost) bb_only+=("$1" "$2"); shift 2 ;;
    --only)
      [[ " ${benches[*]} " == *" $2 "* ]] || { echo "compare_caf: no bench $2" >&2; exit 2; }
      benches=("$2"); shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_caf: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# ---- libcaf-dev -------------------------------------------------------------
installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true) == "install ok installed" ]]; }

if ! installed libcaf-dev; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "compare_caf: libcaf-dev is missing and there is no apt-get: install CAF 0.17 by hand" >&2
    exit 1
  fi
  if [[ $(id -u) -eq 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    as_root=(sudo -n)
  else
    echo "compare_caf: libcaf-dev is missing; as root run:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends libcaf-dev" >&2
    exit 1
  fi
  echo "compare_caf: installing libcaf-dev"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends libcaf-dev
  installed libcaf-dev || { echo "compare_caf: libcaf-dev did not install" >&2; exit 1; }
fi
caf_version=$(dpkg-query -W -f='${Version}' libcaf-dev)
caf_version=${caf_version%%-*} # upstream version only

# ---- build ------------------------------------------------------------------
out=build/release/bench/caf
mkdir -p "$out/obj"
CC=${CC:-gcc}
CXX=${CXX:-g++}
common_objs=()
for src in bench/common/*.c; do
  obj=$out/obj/$(basename "${src%.c}").o
  "$CC" -O2 -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -Ibench/common \
    -c "$src" -o "$obj"
  common_objs+=("$obj")
done
for b in "${benches[@]}"; do
  "$CXX" -O2 -std=c++17 -Wall -Wextra -Werror -pthread -Ibench/common \
    "bench/caf/$b.cpp" "${common_objs[@]}" -lcaf_core -o "$out/$b"
done
make --no-print-directory "${benches[@]/#/build/release/bench/}" >/dev/null

# ---- run --------------------------------------------------------------------
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

status=0
run() { # name, program, args...: a failed bench is reported, the others still run
  local name=$1; shift
  echo "== $name: $*"
  if ! "$@" | tee "$logs/$name"; then
    echo "compare_caf: $name failed"
    status=1
  fi
  echo
}

selected() { [[ " ${benches[*]} " == *" $1 "* ]]; }

echo "== uptime before: $(uptime)"
if selected pingpong; then
  run sh_pingpong build/release/bench/pingpong "${common[@]}" "${pp_only[@]}"
  run caf_pingpong "$out/pingpong" "${common[@]}" "${pp_only[@]}"
fi
if selected notice; then
  run sh_notice build/release/bench/notice "${common[@]}" "${nt_only[@]}"
  run caf_notice "$out/notice" "${common[@]}" "${nt_only[@]}"
fi
if selected bounded_buffer; then
  run sh_bounded_buffer build/release/bench/bounded_buffer "${common[@]}" "${bb_only[@]}"
  run caf_bounded_buffer "$out/bounded_buffer" "${common[@]}" "${bb_only[@]}"
fi
echo "== uptime after: $(uptime)"
echo

# ---- side by side -----------------------------------------------------------
# Rows: "<log> <id>". Figures start at column 50 (bench_run_case): median,
# min, max, mallocs/msg, mallocs, ...
field() { # log, id, n: the n-th figure of row id in log ("-" when absent)
  local v
  v=$(awk -v id="$2" '$1 == id' "$logs/$1" | cut -c50- | awk -v n="$3" '{print $n}')
  [[ -n $v && $v != SAMPLE ]] && echo "$v" || echo "-"
}

side() { # label, our log, our id, CAF log, CAF id[, n: also the n-th figure of each]
  local ours caf ratio
  ours=$(field "$2" "$3" 1)
  caf=$(field "$4" "$5" 1)
  ratio=$(awk -v a="$ours" -v b="$caf" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
  printf '%-36s %14s %14s %8s %14s %12s' "$1" "$ours" "$caf" "$ratio" \
    "$(field "$2" "$3" 4)" "$(field "$4" "$5" 4)"
  [[ -n ${6:-} ]] && printf ' %10s %10s' "$(field "$2" "$3" "$6")" "$(field "$4" "$5" "$6")"
  printf '\n'
}

header() { # label[, label of the extra figure pair]
  printf '%-36s %14s %14s %8s %14s %12s' "$1" "stackhouse" "CAF $caf_version" "ratio" \
    "mallocs/msg sh" "CAF"
  [[ -n ${2:-} ]] && printf ' %10s %10s' "$2 sh" "CAF"
  printf '\n'
}

echo "== side by side: medians; ratio = stackhouse / CAF. CAF cannot pin actors:"
echo "   its figure per pair count is set against both of our placements."
if selected pingpong; then
  header "pingpong (round trips/s)"
  side "1 pair, default placement" sh_pingpong 1pair caf_pingpong 1pair
  side "1 pair, same worker" sh_pingpong 1pair-same caf_pingpong 1pair
  side "1 pair, across workers" sh_pingpong 1pair-cross caf_pingpong 1pair
  side "N pairs, default placement" sh_pingpong Npairs caf_pingpong Npairs
  side "N pairs, same worker" sh_pingpong Npairs-same caf_pingpong Npairs
  side "N pairs, across workers" sh_pingpong Npairs-cross caf_pingpong Npairs
fi
if selected notice; then
  header "notice (notices/s)"
  side "1 sender -> 1" sh_notice 1sender caf_notice 1sender
  side "N senders -> 1" sh_notice Nsenders caf_notice Nsenders
  side "N senders -> 1, our batch receiver" sh_notice Nsenders-b caf_notice Nsenders
fi
if selected bounded_buffer; then
  # mallocs/msg is per item here; the 6th figure is the peak RSS in MiB.
  header "bounded_buffer (items/s; mallocs/item)" "RSS MiB"
  side "savina: P producers, C consumers" sh_bounded_buffer savina caf_bounded_buffer savina 6
  side "N producers, N consumers" sh_bounded_buffer Npairs caf_bounded_buffer Npairs 6
fi
exit $status
