#!/usr/bin/env bash
# The lcov side of `make coverage`, on the counters of the cov build:
#   tools/coverage.sh capture OUT.info   counters so far -> OUT.info, then zeroed
#                                        (so that the next capture holds only
#                                        what ran after this one)
#   tools/coverage.sh report A.info...   merged into build/coverage/lcov.info
#                                        (core/ and backends: what CI publishes),
#                                        the HTML next to it, lines hit per folder
# CC says which compiler built build/cov: clang's data is read with llvm-cov gcov.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=build/coverage
lcov=(lcov --quiet --config-file coverage/lcovrc)

gcov_tool() {
  if ${CC:-cc} --version 2>/dev/null | grep -q clang; then
    command -v llvm-cov >/dev/null || echo "coverage: clang's data needs llvm-cov (apt-get install llvm)" >&2
    printf '#!/bin/sh\nexec llvm-cov gcov "$@"\n' > "$out/llvm-gcov"
    chmod +x "$out/llvm-gcov"
    echo "$PWD/$out/llvm-gcov"
  else
    echo gcov
  fi
}

capture() {
  local info=$1 tool
  mkdir -p "$out"
  tool=$(gcov_tool)
  # lcov 1.x on newer Perl repeats this warning once per file.
  "${lcov[@]}" --gcov-tool "$tool" --capture --directory build/cov --output-file "$info" \
    2>&1 | { grep -v '^Subroutine .* redefined at' || true; }
  [ "${PIPESTATUS[0]}" -eq 0 ]
  "${lcov[@]}" --zerocounters --directory build/cov
}

# Lines hit/total of each top-level folder of a tracefile: "folder hit total".
per_folder() {
  awk -v root="$PWD/" '
    /^SF:/ { f = substr($0, 4); if (index(f, root) == 1) f = substr(f, length(root) + 1)
             d = f; sub("/.*", "/", d) }
    /^LF:/ { lf[d] += substr($0, 4) }
    /^LH:/ { lh[d] += substr($0, 4) }
    END    { for (d in lf) print d, lh[d], lf[d] }' "$1" | sort
}

pct() { awk -v h="$1" -v t="$2" 'BEGIN { printf "%.1f%%", t ? 100 * h / t : 0 }'; }

core_pct() { per_folder "$1" | awk '$1 == "core/" { print $2, $3 }' | { read -r h t && pct "$h" "$t"; }; }

# core/ and the backends of a tracefile; lcov merges the records of a source
# built twice (the simulation library's -DSH_SIM objects) and counts LF/LH.
library() { "${lcov[@]}" --extract "$1" '*/core/*' '*/backend-*/*' --output-file "$2"; }

report() {
  local args=() i
  for i in "$@"; do
    library "$i" "${i%.info}.lib.info"
    args+=(--add-tracefile "${i%.info}.lib.info")
  done
  "${lcov[@]}" "${args[@]}" --output-file "$out/lcov.info"
  genhtml --quiet --config-file coverage/lcovrc --output-directory "$out/html" "$out/lcov.info"
  echo "== line coverage by folder (tracefile $out/lcov.info, HTML $out/html/index.html)"
  per_folder "$out/lcov.info" | while read -r d h t; do
    printf '  %-16s %6d / %-6d %s\n' "$d" "$h" "$t" "$(pct "$h" "$t")"
  done
  echo "== core/: $(core_pct "${1%.info}.lib.info") by $(basename "$1" .info) alone, $(core_pct "$out/lcov.info") in all"
}

case ${1:-} in
  capture) capture "${2:?usage: tools/coverage.sh capture OUT.info}" ;;
  report) shift; [ $# -gt 0 ] || { echo "usage: tools/coverage.sh report A.info..." >&2; exit 2; }; report "$@" ;;
  *) echo "usage: tools/coverage.sh capture OUT.info | report A.info..." >&2; exit 2 ;;
esac
