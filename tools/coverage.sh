#!/usr/bin/env bash
# The lcov and gcovr side of `make coverage`, on the counters of the cov build
# (build/cov/**/*.gcda, which it leaves in place):
#   tools/coverage.sh capture OUT.info   the counters so far -> OUT.info
#   tools/coverage.sh report ALL.info [PART.info...]
#                                        ALL.info's library folders (core/, the
#                                        backends, http/) -> build/coverage/lcov.info,
#                                        the HTML next to it, and the same counters
#                                        as Cobertura XML (gcovr) in
#                                        build/coverage/cobertura.xml; lines hit
#                                        per folder, and core/ by each PART alone
# Counters only grow while programs run, so a capture taken after the tests
# and one taken after everything tell the tests' share from the whole
# without zeroing anything: the .gcda stay for a report of another kind.
# CC says which compiler built build/cov: clang's data is read with llvm-cov gcov.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=build/coverage
lcov=(lcov --quiet --config-file coverage/lcovrc)
# The library's folders: what the report (and a CI system) publishes.
LIB_DIRS=(core backend-epoll backend-sim http)

clang_cc() { ${CC:-cc} --version 2>/dev/null | grep -q clang; }

gcov_tool() {
  if clang_cc; then
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

# The library's folders of a tracefile; lcov merges the records of a source
# built twice (the simulation library's -DSH_SIM objects) and counts LF/LH.
library() {
  local d pats=()
  for d in "${LIB_DIRS[@]}"; do pats+=("*/$d/*"); done
  "${lcov[@]}" --extract "$1" "${pats[@]}" --output-file "$2"
}

# The same counters as Cobertura XML, by gcovr (which runs gcov itself on
# build/cov's .gcda, merging a source's two builds as lcov does).
cobertura() {
  local d filters=() exe=gcov
  for d in "${LIB_DIRS[@]}"; do filters+=(--filter "$d/"); done
  clang_cc && exe="llvm-cov gcov"
  gcovr --root . --object-directory build/cov --gcov-executable "$exe" "${filters[@]}" \
    --cobertura-pretty --cobertura "$out/cobertura.xml" build/cov
}

report() {
  local all=$1 part; shift
  library "$all" "$out/lcov.info"
  genhtml --quiet --config-file coverage/lcovrc --output-directory "$out/html" "$out/lcov.info"
  cobertura
  echo "== line coverage by folder (tracefile $out/lcov.info, HTML $out/html/index.html, Cobertura $out/cobertura.xml)"
  per_folder "$out/lcov.info" | while read -r d h t; do
    printf '  %-16s %6d / %-6d %s\n' "$d" "$h" "$t" "$(pct "$h" "$t")"
  done
  for part in "$@"; do
    library "$part" "${part%.info}.lib.info"
    echo "== core/: $(core_pct "${part%.info}.lib.info") by $(basename "$part" .info) alone, $(core_pct "$out/lcov.info") in all"
  done
}

case ${1:-} in
  capture) capture "${2:?usage: tools/coverage.sh capture OUT.info}" ;;
  report) shift; [ $# -gt 0 ] || { echo "usage: tools/coverage.sh report ALL.info [PART.info...]" >&2; exit 2; }; report "$@" ;;
  *) echo "usage: tools/coverage.sh capture OUT.info | report ALL.info [PART.info...]" >&2; exit 2 ;;
esac
