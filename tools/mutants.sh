#!/usr/bin/env bash
# The planted-bug suite (docs/simulator.md, "Planted bugs").
#
# Usage: tools/mutants.sh [--budget N] [NAME...]   run the suite (make mutants)
#        tools/mutants.sh --build NAME             build one mutant (make mutant)
#        tools/mutants.sh --check                  the patches' check (make test)
#
# A mutant is a patch, tools/mutants/<name>.patch, listed in
# tools/mutants/list* (name<TAB>module<TAB>bug); no switch of it is left in
# the sources. --build copies the working tree's files into a scratch tree,
# build/mutants/<name>/src (a file is copied again only when it differs, so
# a rebuild recompiles what changed), applies the patch there, and builds
# its release shsim and the simulator's tests (build/mutants/<name>/bin and
# tests). The suite, for each mutant (or each NAME given): builds it, fuzzes
# every scenario over seeds 1..N in chunks of 100, in order, stopping at
# the first chunk with a failure (so the lowest failing seed is exact),
# shrinks that seed's first failure and counts the shrunk run's choices,
# then runs the simulator's tests of that build. An unmutated build runs
# the same fuzz first: the suite stops if it fails. The table goes to
# stdout and to build/mutants/table.md.
set -u
cd "$(dirname "$0")/.." || exit 2
. tools/scratch.sh

MAKE=${MAKE:-make}
CHUNK=100
TEST_TIMEOUT_S=120
SHRINK_TIMEOUT_S=1200
# Replays a shrink may spend: a failure with atomic points on has thousands
# of decisions, and each replay of it is a whole run.
SHRINK_TRIALS=10000
OUT=build/mutants

# Every listed mutant as `name<TAB>module<TAB>bug`, sorted by name.
listed() {
  cat tools/mutants/list* 2>/dev/null | grep -v '^#' | grep -v '^[[:space:]]*$' | sort
}

# Names of the patches in tools/mutants/.
planted() {
  local p
  for p in tools/mutants/*.patch; do
    [ -e "$p" ] && basename "$p" .patch
  done | sort -u
}

# The library's sources: where no switch of a planted bug may be left.
LIB_DIRS=(core backend-epoll backend-sim http include)

check() {
  local bad=0 name module desc extra
  while IFS=$'\t' read -r name module desc extra; do
    if ! [[ $name =~ ^[a-z][a-z0-9_]*$ ]] || [ -z "$module" ] || [ -z "$desc" ] || [ -n "$extra" ]; then
      echo "tools/mutants/list*: malformed line for '$name' (name<TAB>module<TAB>description)"
      bad=1
    fi
  done < <(listed)
  local dup
  dup=$(listed | cut -f1 | uniq -d)
  [ -z "$dup" ] || { echo "listed twice: $dup"; bad=1; }
  local f
  for f in tools/mutants/list*; do
    [ -e "$f" ] || continue
    grep -v '^#' "$f" | cut -f1 | sort -c 2>/dev/null || { echo "$f: not sorted by name"; bad=1; }
  done
  local n
  for n in $(comm -23 <(listed | cut -f1 | sort -u) <(planted)); do
    echo "listed but no patch: tools/mutants/$n.patch"
    bad=1
  done
  for n in $(comm -13 <(listed | cut -f1 | sort -u) <(planted)); do
    echo "a patch not listed in tools/mutants/list*: tools/mutants/$n.patch"
    bad=1
  done
  # Each patch applies to the tree as it is: a stale one fails here, at
  # once, not in the next run of the suite.
  local p out
  for p in tools/mutants/*.patch; do
    [ -e "$p" ] || continue
    n=$(basename "$p" .patch)
    head -n 1 "$p" | grep -q "^Planted bug $n " ||
      { echo "$p: its first line must say \"Planted bug $n (module): the bug\""; bad=1; }
    out=$(git apply --check "$p" 2>&1) || { echo "$p: does not apply: $out"; bad=1; }
  done
  local left
  left=$(grep -rlE 'SH_MUTANT_' "${LIB_DIRS[@]}" 2>/dev/null)
  [ -z "$left" ] || { echo "a planted bug's switch in the sources (a mutant is a patch):" $left; bad=1; }
  [ $bad -eq 0 ] && echo "mutants: $(listed | wc -l) listed, each a patch that applies, none unlisted"
  return $bad
}

# scratch NAME: build/mutants/src, the working tree's files with NAME's
# patch applied. One scratch tree serves every mutant (tools/scratch.sh).
scratch() {
  scratch_sync "$OUT/src" || return 1
  git apply --directory="$OUT/src" "tools/mutants/$1.patch"
}

# build_one NAME: the mutant's release shsim and simulator tests, built in
# the scratch tree and linked (or copied) to build/mutants/NAME/bin and
# tests, where they stay when the next mutant is built. One build at a
# time: the scratch tree is locked meanwhile.
build_one() {
  local name=$1 t d
  [ -f "tools/mutants/$name.patch" ] || { echo "mutants: no tools/mutants/$name.patch" >&2; return 2; }
  git rev-parse --git-dir > /dev/null 2>&1 ||
    { echo "mutants: a mutant is built from a git checkout (git ls-files, git apply)" >&2; return 2; }
  mkdir -p "$OUT/$name"
  exec 9> "$OUT/src.lock"
  command -v flock > /dev/null && flock 9
  scratch "$name" || { echo "mutants: $name: the patch does not apply" >&2; return 1; }
  local -a tests=()
  for t in tests/test_sim_*.c; do tests+=("build/release/tests/$(basename "$t" .c)"); done
  $MAKE -C "$OUT/src" --no-print-directory NO_DEPS=1 -j2 build/release/bin/shsim "${tests[@]}" || return 1
  rm -rf "$OUT/$name/bin" "$OUT/$name/tests"
  mkdir -p "$OUT/$name/bin" "$OUT/$name/tests"
  for t in "$OUT/src/build/release/bin/shsim" "${tests[@]/#/$OUT/src/}"; do
    case $t in */bin/*) d=bin;; *) d=tests;; esac
    cp -l "$t" "$OUT/$name/$d/" 2>/dev/null || cp "$t" "$OUT/$name/$d/" || return 1
  done
  exec 9>&-
}

# fuzz BIN LO HI JSON: fuzz every scenario over seeds LO..HI.
fuzz() {
  "$1" fuzz all --seeds "$2..$3" --json "$4" > "$4.log" 2>&1
  local rc=$?
  [ $rc -le 1 ] || { echo "mutants: $1 fuzz $2..$3 could not run (status $rc, $4.log)" >&2; return 2; }
  return $rc
}

# first_failure BIN BUDGET DIR: fuzz in chunks until one fails; prints
# `seed<TAB>kind<TAB>scenario<TAB>command` of its lowest seed's first
# failure (nothing when none failed). Status 2 if shsim could not run.
first_failure() {
  local bin=$1 budget=$2 dir=$3 lo hi rc
  for ((lo = 1; lo <= budget; lo += CHUNK)); do
    hi=$((lo + CHUNK - 1))
    ((hi > budget)) && hi=$budget
    fuzz "$bin" "$lo" "$hi" "$dir/fuzz.json"
    rc=$?
    [ $rc -eq 2 ] && return 2
    if [ $rc -eq 1 ]; then
      jq -r '.failures | sort_by(.seed, .scenario) | .[0] | [.seed, .kind, .scenario, .command] | @tsv' \
        "$dir/fuzz.json"
      return 0
    fi
  done
  return 0
}

# shrunk_len BIN COMMAND DIR: shrinks the failure that COMMAND (a `shsim run`
# line) replays; prints the choices left (switches, faults, stale reads and
# values drawn), or `-` if the shrink failed.
shrunk_len() {
  local bin=$1 cmd=$2 dir=$3
  local -a words
  # The line quotes its fault spec ('a:0.1,b:0.2'): split it as the shell
  # would (xargs honours the quotes), not on blanks alone.
  mapfile -t words < <(xargs -n 1 printf '%s\n' <<< "$cmd")
  # words: SHSIM run SCENARIO --seed N [options]
  local file="$dir/shrunk.replay"
  rm -f "$file"
  timeout -k 10 $SHRINK_TIMEOUT_S "$bin" shrink "${words[@]:2}" --max-trials $SHRINK_TRIALS \
    --out "$file" > "$dir/shrink.log" 2>&1
  # The file holds the whole shrunk run; shrink's summary line counts the
  # choices the failure needs.
  if [ -f "$file" ]; then
    sed -n 's/^shsim: [0-9]* -> \([0-9]*\) choices.*/\1/p' "$dir/shrink.log"
  else
    echo "-"
  fi
}

# tests_pass NAME: the simulator's tests of build/mutants/NAME.
tests_pass() {
  local t log status=yes
  for t in build/mutants/"$1"/tests/test_sim_*; do
    [[ $t == *.log ]] && continue
    log="$t.log"
    if ! timeout -k 10 $TEST_TIMEOUT_S "$t" > "$log" 2>&1; then
      status=no
    fi
  done
  echo "$status"
}

build() {
  build_one "$1" > "$OUT/$1.build.log" 2>&1
}

# One row of the table for mutant NAME of MODULE.
row() {
  local name=$1 module=$2 budget=$3 dir="$OUT/$1" ff seed kind scn cmd shrunk tests detected
  mkdir -p "$dir"
  if ! build "$name"; then
    printf '| %s | %s | build failed | - | - | - | - |\n' "$name" "$module"
    return
  fi
  ff=$(first_failure "$dir/bin/shsim" "$budget" "$dir") || ff=
  if [ -n "$ff" ]; then
    IFS=$'\t' read -r seed kind scn cmd <<< "$ff"
    detected=yes
    shrunk=$(shrunk_len "$dir/bin/shsim" "$cmd" "$dir")
    kind="$kind ($scn)"
  else
    detected=no seed=- kind=- shrunk=-
  fi
  # "detected by the tests": a test failed (or timed out).
  if [ "$(tests_pass "$name")" = yes ]; then tests=no; else tests=yes; fi
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$module" "$detected" "$seed" "$kind" \
    "$shrunk" "$tests"
}

baseline() {
  local budget=$1 dir="$OUT/baseline" ff
  mkdir -p "$dir"
  echo "== baseline: the unmutated release shsim, seeds 1..$budget" >&2
  $MAKE --no-print-directory -j2 build/release/bin/shsim > "$dir/build.log" 2>&1 ||
    { echo "mutants: the unmutated shsim does not build ($dir/build.log)" >&2; return 1; }
  ff=$(first_failure build/release/bin/shsim "$budget" "$dir") ||
    { echo "mutants: the unmutated shsim could not fuzz" >&2; return 1; }
  [ -z "$ff" ] || { echo "mutants: the unmutated build fails: $ff" >&2; return 1; }
  echo "baseline: 0 failures" >&2
}

main() {
  local budget=2000
  if [ "${1:-}" = --budget ]; then budget=$2; shift 2; fi
  [[ $budget =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [--budget N] [NAME...]" >&2; exit 2; }
  check >&2 || exit 1
  mkdir -p "$OUT"
  local -a names=("$@")
  [ ${#names[@]} -gt 0 ] || mapfile -t names < <(listed | cut -f1)
  baseline "$budget" || exit 1
  local table="$OUT/table.md" name module detected=0 total=0 r
  {
    echo "| mutant | module | detected by the simulator | seed of the first failure | failure kind (scenario) | shrunk schedule (decisions) | detected by the tests |"
    echo "|---|---|---|---|---|---|---|"
  } > "$table"
  cat "$table"
  for name in "${names[@]}"; do
    module=$(listed | awk -F'\t' -v n="$name" '$1 == n { print $2 }')
    [ -n "$module" ] || { echo "mutants: $name is not listed" >&2; exit 2; }
    echo "== mutant $name" >&2
    r=$(row "$name" "$module" "$budget")
    echo "$r" | tee -a "$table"
    total=$((total + 1))
    [[ $r == *"| yes | "[0-9]* ]] && detected=$((detected + 1))
  done
  echo "" | tee -a "$table"
  echo "$detected of $total detected by the simulator within $budget seeds" | tee -a "$table"
}

if [ "${1:-}" = --check ]; then
  check
  exit
fi
if [ "${1:-}" = --build ]; then
  [ $# -eq 2 ] && [[ $2 =~ ^[a-z][a-z0-9_]*$ ]] || { echo "usage: $0 --build NAME" >&2; exit 2; }
  mkdir -p "$OUT"
  build_one "$2"
  exit
fi
main "$@"
