#!/usr/bin/env bash
# Mechanical mutants (docs/simulator.md, "Mechanical mutants"): mutants of
# core/ and http/ made by rule, not by hand, each built and fuzzed.
#
# Usage: tools/mutagen.sh generate
#        tools/mutagen.sh run [--shard I/N] [--budget SEEDS] [--sample K [--sample-seed S]]
#                             [--jobs J] [NAME...]
#        tools/mutagen.sh report
#        tools/mutagen.sh --self-test
#
# generate: the rules of tools/mutagen.awk over every .c/.h of core/ and
# http/ (core/base/atomic.h aside: the wrappers themselves), the
# statement-deletion rule over core/actor and core/sched only. Each mutant
# is a patch, build/mutagen/patches/NAME.patch (for git apply), named
# RULE-STEM-LINE[-N] (STEM: the file's name, a header's with _h); the list,
# build/mutagen/list.tsv, has name<TAB>rule<TAB>file:line<TAB>original
# <TAB>mutated.
# run: the mutants NAMEd (or all, or a sample of K: taken in turn from each
# rule, each rule's in the order of a hash of S and the name; or, with
# --shard I/N, every N-th of those from the I-th): first the unmutated
# tree, which must pass, then each mutant: its patch applied in one scratch
# tree, build/mutagen/src (tools/scratch.sh), its release shsim built there
# (a build that fails: "stillborn"), `shsim fuzz all` over seeds
# 1..SEEDS (default 200) in chunks of 100, stopping at the first chunk that
# fails ("killed"; a chunk past its timeout is killed too), or "survived".
# One file per mutant, build/mutagen/results/NAME: name, status, budget,
# seeds run, wall and CPU seconds, what killed it. Logs: build/mutagen/runs/.
# report: merges the results (of every shard): per rule generated, run,
# killed, survived, stillborn, equivalent; the score killed / (killed +
# survived), without the stillborn and the mutants of
# tools/mutagen-equivalent (name<TAB>why, judged by hand); the survivors.
set -u
cd "$(dirname "$0")/.." || exit 2
. tools/scratch.sh

MAKE=${MAKE:-make}
OUT=build/mutagen
EQUIV=tools/mutagen-equivalent
RULES="order cas recheck cmp del"
CHUNK=100
CHUNK_TIMEOUT_S=${MUTAGEN_CHUNK_TIMEOUT_S:-300}
RUN_TIMEOUT_S=60
AWK_PROG=$PWD/tools/mutagen.awk

# gen_tree ROOT DEST: the mutants of ROOT's core/ and http/ into DEST
# (DEST/patches, DEST/list.tsv).
gen_tree() {
  local root=$1 dest=$2 f stem del
  rm -rf "$dest/patches" && mkdir -p "$dest/patches" || return 1
  dest=$(cd "$dest" && pwd)
  (
    cd "$root" || exit 1
    local dup
    dup=$(find core http -name '*.[ch]' | sed 's|.*/||; s|\.h$|_h|; s|\.c$||' | sort | uniq -d)
    [ -z "$dup" ] || { echo "mutagen: two files named $dup: names would clash" >&2; exit 1; }
    find core http -name '*.[ch]' ! -path core/base/atomic.h | LC_ALL=C sort | while read -r f; do
      stem=$(basename "$f"); stem=${stem%.c}; stem=${stem/%.h/_h}
      case $f in core/actor/* | core/sched/*) del=1 ;; *) del=0 ;; esac
      awk -f "$AWK_PROG" -v path="$f" -v stem="$stem" -v del="$del" -v out="$dest/patches" "$f" ||
        exit 1
    done
  ) > "$dest/list.tsv.new" || return 1
  mv -f "$dest/list.tsv.new" "$dest/list.tsv"
}

generate() {
  gen_tree . "$OUT" || { echo "mutagen: generate failed" >&2; return 1; }
  echo "mutagen: $(wc -l < "$OUT/list.tsv") mutants in $OUT/patches ($OUT/list.tsv):" \
    "$(per_rule "$OUT/list.tsv")"
}

# per_rule LIST: "rule N, ..." counted from LIST's second column.
per_rule() {
  awk -F'\t' -v rules="$RULES" '{ n[$2]++ }
    END { k = split(rules, r, " "); for (i = 1; i <= k; i++) printf "%s%s %d", (i > 1 ? ", " : ""), r[i], n[r[i]] }' "$1"
}

# select_names K SEED: K names of the list, taken in turn from each rule,
# each rule's in the order of a hash of SEED and the name (K 0: all, in
# the list's order).
select_names() {
  awk -F'\t' -v k="$1" -v seed="$2" -v rules="$RULES" '
    BEGIN { for (i = 32; i < 127; i++) ord[sprintf("%c", i)] = i }
    # Park and Miller: a multiply mod 2^31 - 1 after each character, and
    # twice more, so that names alike (del-x-45, del-x-46) fall far apart.
    function hash(s,   h, i) {
      h = 1
      for (i = 1; i <= length(s); i++) h = ((h + ord[substr(s, i, 1)]) * 48271) % 2147483647
      for (i = 0; i < 2; i++) h = (h * 48271) % 2147483647
      return h
    }
    { if (k == 0) { print $1; next }
      n[$2]++; name[$2, n[$2]] = $1; key[$2, n[$2]] = hash(seed ":" $1) }
    END {
      if (k == 0) exit
      nr = split(rules, r, " ")
      for (i = 1; i <= nr; i++)       # each rule by key: an insertion sort, a few thousand at most
        for (a = 2; a <= n[r[i]]; a++)
          for (b = a; b > 1 && key[r[i], b] < key[r[i], b - 1]; b--) {
            t = key[r[i], b]; key[r[i], b] = key[r[i], b - 1]; key[r[i], b - 1] = t
            t = name[r[i], b]; name[r[i], b] = name[r[i], b - 1]; name[r[i], b - 1] = t
          }
      for (taken = 0; taken < k; ) {  # bounded: each round takes one or stops
        got = 0; round++
        for (i = 1; i <= nr && taken < k; i++)
          if (round <= n[r[i]]) { print name[r[i], round]; taken++; got++ }
        if (!got) break
      }
    }' "$OUT/list.tsv"
}

# fuzz_chunks BIN BUDGET JOBS DIR: prints "killed<TAB>seeds<TAB>what" or
# "survived<TAB>seeds<TAB>-".
fuzz_chunks() {
  local bin=$1 budget=$2 jobs=$3 dir=$4 lo hi rc what
  for ((lo = 1; lo <= budget; lo += CHUNK)); do
    hi=$((lo + CHUNK - 1))
    ((hi > budget)) && hi=$budget
    timeout -k 10 "$CHUNK_TIMEOUT_S" "$bin" fuzz all --seeds "$lo..$hi" --jobs "$jobs" \
      --timeout-s "$RUN_TIMEOUT_S" --hang-after 5 > "$dir/fuzz.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && continue
    if [ $rc -eq 1 ]; then
      what=$(grep -m 1 -E '^ +[0-9]+ x .*FAIL:' "$dir/fuzz.log" | sed 's/^ *//')
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      # Stopped, shsim still prints the failures it found.
      what=$(grep -m 1 -E '^ +[0-9]+ x .*FAIL:' "$dir/fuzz.log" | sed 's/^ *//')
      what="timeout: seeds $lo..$hi past ${CHUNK_TIMEOUT_S} s${what:+; $what}"
    else
      what="shsim fuzz exited with status $rc"
    fi
    printf 'killed\t%s\t%s\n' "$hi" "${what:-a failure (fuzz.log)}"
    return
  done
  printf 'survived\t%s\t-\n' "$budget"
}

# build_scratch PATCH LOG: the scratch tree synced, PATCH applied (none if
# empty), its release shsim built. Status 3 if the patch does not apply.
build_scratch() {
  local patch=$1 log=$2
  scratch_sync "$OUT/src" || return 2
  if [ -n "$patch" ]; then git apply --directory="$OUT/src" "$patch" > "$log" 2>&1 || return 3; fi
  $MAKE -C "$OUT/src" --no-print-directory NO_DEPS=1 -j"$JOBS" build/release/bin/shsim >> "$log" 2>&1
}

# children_cpu FILE: the CPU seconds (user + system) of this shell's
# children, from the output of `times` in FILE.
children_cpu() {
  awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] }; print t }' "$1"
}

# run_one NAME BUDGET: its result file, and a line on stdout.
run_one() {
  local name=$1 budget=$2 dir="$OUT/runs/$1" rc v t0 t1 wall cpu status seeds what
  mkdir -p "$dir"
  times > "$dir/times0"
  t0=$(date +%s.%N)
  build_scratch "$OUT/patches/$name.patch" "$dir/build.log"
  rc=$?
  if [ $rc -eq 0 ]; then
    v=$(fuzz_chunks "$OUT/src/build/release/bin/shsim" "$budget" "$JOBS" "$dir")
  elif [ $rc -eq 3 ]; then
    v=$(printf 'error\t0\tthe patch does not apply')
  else
    v=$(printf 'stillborn\t0\tbuild failed (%s)' "$dir/build.log")
  fi
  t1=$(date +%s.%N)
  times > "$dir/times1"
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  cpu=$(awk -v a="$(children_cpu "$dir/times0")" -v b="$(children_cpu "$dir/times1")" \
    'BEGIN { printf "%.1f", b - a }')
  IFS=$'\t' read -r status seeds what <<< "$v"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$budget" "$seeds" "$wall" "$cpu" "$what" \
    > "$OUT/results/$name"
  printf '%s: %s after %s seeds, %s s (CPU %s s) %s\n' "$name" "$status" "$seeds" "$wall" "$cpu" \
    "${what/#-/}"
}

baseline() {
  local budget=$1 dir="$OUT/runs/.baseline" v
  mkdir -p "$dir"
  echo "== baseline: the unmutated tree, seeds 1..$budget" >&2
  build_scratch "" "$dir/build.log" || { echo "mutagen: the unmutated tree does not build ($dir/build.log)" >&2; return 1; }
  v=$(fuzz_chunks "$OUT/src/build/release/bin/shsim" "$budget" "$JOBS" "$dir")
  [[ $v == survived* ]] || { echo "mutagen: the unmutated tree fails: $v" >&2; return 1; }
}

run() {
  local budget=200 sample=0 seed=1 shard=1/1 i n k=0 name
  JOBS=2
  local -a names=()
  while [ $# -gt 0 ]; do
    case $1 in
      --budget) budget=$2; shift 2 ;;
      --sample) sample=$2; shift 2 ;;
      --sample-seed) seed=$2; shift 2 ;;
      --shard) shard=$2; shift 2 ;;
      --jobs) JOBS=$2; shift 2 ;;
      -*) echo "mutagen: unknown option $1" >&2; return 2 ;;
      *) names+=("$1"); shift ;;
    esac
  done
  [[ $budget =~ ^[1-9][0-9]*$ && $sample =~ ^[0-9]+$ && $seed =~ ^[0-9]+$ && $JOBS =~ ^[1-9][0-9]*$ ]] ||
    { echo "mutagen: --budget, --sample, --sample-seed and --jobs take numbers" >&2; return 2; }
  [[ $shard =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] && i=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]} && ((i <= n)) ||
    { echo "mutagen: --shard I/N, 1 <= I <= N" >&2; return 2; }
  git rev-parse --git-dir > /dev/null 2>&1 || { echo "mutagen: run from a git checkout" >&2; return 2; }
  generate > /dev/null || return 1
  [ ${#names[@]} -gt 0 ] || mapfile -t names < <(select_names "$sample" "$seed")
  for name in "${names[@]}"; do
    [ -f "$OUT/patches/$name.patch" ] || { echo "mutagen: no mutant $name" >&2; return 2; }
  done
  mkdir -p "$OUT/results"
  exec 9> "$OUT/src.lock"
  command -v flock > /dev/null && flock 9
  baseline "$budget" || return 1
  for name in "${names[@]}"; do
    k=$((k + 1))
    (((k - 1) % n == i - 1)) || continue
    run_one "$name" "$budget"
  done
}

report() {
  [ -f "$OUT/list.tsv" ] || { echo "mutagen: no $OUT/list.tsv: tools/mutagen.sh generate" >&2; return 1; }
  local eq=/dev/null
  [ -f "$EQUIV" ] && eq=$EQUIV
  find "$OUT/results" -type f 2> /dev/null | LC_ALL=C sort | xargs -r cat |
    awk -F'\t' -v rules="$RULES" -v list="$OUT/list.tsv" -v eqf="$eq" '
    BEGIN {
      while ((getline l < list) > 0) {
        split(l, f, "\t"); rule[f[1]] = f[2]; site[f[1]] = f[3]; was[f[1]] = f[4]; now[f[1]] = f[5]
        blind[f[1]] = f[6] == "blind"
        gen[f[2]]++; total++
      }
      while ((getline l < eqf) > 0) {
        if (l ~ /^#/ || l ~ /^[ \t]*$/) continue
        split(l, f, "\t"); why[f[1]] = f[2]
      }
    }
    !($1 in rule) { stale++; next }
    {
      r = rule[$1]; st[$1] = $2; run[r]++; runs++; wall += $5; cpu += $6; budgets[$3]++
      if ($1 in why && $2 != "stillborn") { c = "equivalent"; if ($2 == "killed") wrong = wrong " " $1 }
      else c = $2
      n[r, c]++; n["all", c]++
      if (blind[$1]) nb[c]++
    }
    END {
      nr = split(rules, rl, " "); rl[++nr] = "all"; gen["all"] = total; run["all"] = runs
      b = ""; for (x in budgets) b = b (b == "" ? "" : ", ") x
      printf "mechanical mutants: %d generated, %d run (budget: %s seeds)\n\n", total, runs, b
      printf "%-8s %9s %5s %6s %8s %9s %10s %6s\n", "rule", "generated", "run", "killed", "survived", \
        "stillborn", "equivalent", "score"
      for (i = 1; i <= nr; i++) {
        r = rl[i]; k = n[r, "killed"]; s = n[r, "survived"]
        printf "%-8s %9d %5d %6d %8d %9d %10d %6s\n", r, gen[r], run[r], k, s, n[r, "stillborn"], \
          n[r, "equivalent"], (k + s ? sprintf("%.0f%%", 100 * k / (k + s)) : "-")
      }
      k = n["all", "killed"]; s = n["all", "survived"]
      if (k + s) printf "\nscore: %d / (%d + %d) = %.1f%% (stillborn and equivalent excluded)\n", k, k, s, 100 * k / (k + s)
      if (nb["killed"] + nb["survived"]) {
        printf "blind to the memory model (a store order, an order whose acquire is unchanged, plain <stdatomic.h>):"
        printf " %d killed, %d survived;", nb["killed"], nb["survived"]
        k -= nb["killed"]; s -= nb["survived"]
        if (k + s) printf " score without them: %d / (%d + %d) = %.1f%%", k, k, s, 100 * k / (k + s)
        printf "\n"; s += nb["survived"]
      }
      if (runs) printf "time per mutant: %.1f s wall, %.1f s CPU (mean of %d)\n", wall / runs, cpu / runs, runs
      if (n["all", "error"]) printf "errors (a patch that did not apply): %d\n", n["all", "error"]
      if (stale) printf "results of mutants no longer generated, left aside: %d\n", stale
      if (wrong != "") printf "marked equivalent in tools/mutagen-equivalent but killed:%s\n", wrong
      printf "\nsurvivors (%d):\n", s
      for (m in st) if (st[m] == "survived" && !(m in why)) print "  " m (blind[m] ? " [blind]" : "") "  " site[m] ": " was[m] "  =>  " now[m] | "sort | cut -c 1-200"
      close("sort | cut -c 1-200")
      printf "\nequivalent (tools/mutagen-equivalent), run: %d\n", n["all", "equivalent"]
      for (m in st) if (m in why && st[m] != "stillborn") print "  " m ": " why[m] | "sort"
      close("sort")
    }'
}

. tools/mutagen-selftest.sh

case ${1:-} in
  generate) generate ;;
  run) shift; run "$@" ;;
  report) report ;;
  --self-test) self_test ;;
  *) sed -n '4,9p' "$0" | sed 's/^# //' >&2; exit 2 ;;
esac
