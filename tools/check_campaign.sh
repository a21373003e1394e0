#!/usr/bin/env bash
# shsim's campaign commands end to end, as CI runs them (run by `make test`):
#   - --version and the help of each command (only its own options);
#   - the scenarios marked [net] (SH_SCN_NET, fuzz draws network weather for
#     them) are exactly those whose runs reach the network's fault points;
#   - --jobs defaults to the CPUs of the affinity mask;
#   - a fuzz stopped by SIGTERM, SIGINT or its time budget keeps its
#     findings: failures.jsonl (each failure with its replay file, which
#     replays it), summary.json, JUnit XML, and no child left behind;
#   - sweep writes its groups (lowest seed) as JSON and JUnit;
#   - four shards run under GNU parallel (I/N, and k8s/N from the
#     environment) merge to exactly the unsharded campaign: the same runs,
#     failures, groups and lowest seeds; merge refuses a shard given twice
#     and names the missing ones.
#
#   bash tools/check_campaign.sh [SHSIM]     (default build/bin/shsim)
set -euo pipefail

S=${1:-build/bin/shsim}
[[ -x $S ]] || { echo "check_campaign: no shsim at $S"; exit 1; }
for tool in parallel jq xmllint; do
  command -v "$tool" >/dev/null || { echo "check_campaign: $tool missing (bash tools/deps.sh)"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/check_campaign.XXXXXX")
trap 'rm -rf "$T"' EXIT

fail() { echo "check_campaign: FAIL: $*"; exit 1; }
step() { echo "-- $*"; }

# $(status CMD...): the exit status of CMD, its output to $T/out and $T/err.
status() { local rc=0; "$@" >"$T/out" 2>"$T/err" || rc=$?; echo "$rc"; }

step "version and help"
# The version as the public header states it (the Makefile reads it there too).
version=$(for p in MAJOR MINOR PATCH; do
  sed -n "s/^#define SH_VERSION_$p \([0-9]*\)$/\1/p" include/stackhouse/stackhouse.h
done | paste -sd.)
[[ $("$S" --version) == "shsim $version (binary 0x"* ]] || fail "--version: $("$S" --version)"
for cmd in list run sweep shrink replay fuzz merge; do
  "$S" "$cmd" --help >"$T/h1"
  "$S" help "$cmd" >"$T/h2"
  cmp -s "$T/h1" "$T/h2" || fail "shsim $cmd --help differs from shsim help $cmd"
  head -1 "$T/h1" | grep -q "^usage: shsim $cmd " || fail "shsim $cmd --help: $(head -1 "$T/h1")"
done
"$S" run --help >"$T/h1"
grep -q -- '--seed N' "$T/h1" || fail "run --help lacks --seed"
! grep -qE -- '--(seeds|jobs|junit|shard|max-trials)' "$T/h1" || fail "run --help shows other commands' options"
"$S" fuzz --help >"$T/h1"
{ grep -q -- '--junit' "$T/h1" && grep -q -- '--out DIR' "$T/h1"; } || fail "fuzz --help lacks --junit or --out"
! grep -qE -- '--(trace|record|strategy)' "$T/h1" || fail "fuzz --help shows run's options"
[[ $(status "$S" help nosuch) == 2 ]] || fail "help of no command: not a usage error"

step "network scenarios: [net] exactly where the network's fault points are reached"
while read -r name _; do
  "$S" run "$name" --seed 1 --faults 'sh/net/delay:0.5,sh/net/read:0.5' --record "$T/r" >/dev/null 2>&1 || true
  fired=no
  grep -Eq '^[0-9]+ fault ' "$T/r" && fired=yes
  marked=no
  "$S" list --all | grep -E "^$name " | grep -q '\[net\]' && marked=yes
  [[ $fired == "$marked" ]] || fail "$name: network faults fired: $fired, marked [net]: $marked"
done < <("$S" list --all)

step "--jobs from the affinity mask"
if command -v taskset >/dev/null && [[ $(nproc) -gt 1 ]]; then
  taskset -c 0 "$S" fuzz ask_reply --seeds 1..8 >"$T/out" 2>&1
  grep -q ', 1 job$' "$T/out" || fail "one CPU allowed, yet: $(head -1 "$T/out")"
fi

# A fuzz of test_race (some seeds fail) over a range it cannot finish,
# stopped by signal $1 once failures.jsonl has 3 lines. SIGINT goes to the
# whole process group, as a terminal's Ctrl-C does (setsid: shsim leads one).
stopped_fuzz() {
  local sig=$1 d=$T/out-$1
  setsid "$S" fuzz test_race --seeds 1..100000000 --jobs 2 --out "$d" --junit "$d.xml" --json "$d.json" \
    >"$T/fuzz.out" 2>&1 &
  local pid=$! i
  for ((i = 0; i < 300; i++)); do
    [[ -f $d/failures.jsonl && $(wc -l <"$d/failures.jsonl") -ge 3 ]] && break
    sleep 0.1
  done
  if [[ $sig == INT ]]; then
    # The children alone first: they leave a Ctrl-C to shsim (a child
    # killed by it would be a run failed by a crash).
    pkill -INT -P "$pid" || true
    sleep 0.5
    kill -INT -- -"$pid"
  else
    kill -"$sig" "$pid"
  fi
  local rc=0
  wait "$pid" || rc=$?
  local want=$((128 + $(kill -l "$sig")))
  [[ $rc == "$want" ]] || fail "fuzz stopped by SIG$sig: exit status $rc, want $want"
  ! pgrep -f -- "--out $d" >/dev/null || fail "children of the stopped fuzz are still running"
  grep -q "^stopped by SIG$sig: " "$T/fuzz.out" || fail "no 'stopped by SIG$sig' line"
  for f in "$d/summary.json" "$d.json"; do
    [[ $(jq -r .stopped "$f") == "SIG$sig" ]] || fail "$f: stopped is $(jq -r .stopped "$f")"
    [[ $(jq .failed "$f") == $(wc -l <"$d/failures.jsonl") ]] || fail "$f: failed != failures.jsonl lines"
  done
  # The runs the signal cut short are no failures (of test_race: invariant only).
  [[ $(jq -r .kind "$d/failures.jsonl" | sort -u) == invariant ]] || fail "SIG$sig: failures of other kinds"
  xmllint --noout "$d.xml" || fail "$d.xml is not XML"
  grep -q '<failure type="invariant"' "$d.xml" || fail "$d.xml has no failure"
  # Every failure's replay file is there and replays it.
  while read -r replay; do
    [[ -f $replay ]] || fail "no replay file $replay"
  done < <(jq -r .replay "$d/failures.jsonl")
  local first
  first=$(jq -rs ".[0].replay" "$d/failures.jsonl")
  "$S" replay "$first" >"$T/replay.out" 2>&1 || true
  grep -q '^replay matches the recording' "$T/replay.out" || fail "$first: $(cat "$T/replay.out")"
}
step "fuzz --out --junit --json stopped by SIGTERM"
stopped_fuzz TERM
step "the same stopped by SIGINT"
stopped_fuzz INT
step "the same stopped by its time budget"
rc=$(status "$S" fuzz test_race --seeds 1..100000000 --jobs 2 --time-budget 1 --out "$T/budget")
[[ $rc == 1 ]] || fail "fuzz with a time budget: exit status $rc"
[[ $(jq -r .stopped "$T/budget/summary.json") == "time budget" ]] || fail "budget: not marked stopped"

step "fuzz --faults --out: each replay file holds the fault rates its seed drew"
"$S" fuzz test_race --seeds 1..60 --jobs 2 --faults 'sh/pool/*:0.05' --out "$T/faults" >/dev/null 2>&1 || true
[[ $(wc -l <"$T/faults/failures.jsonl") -ge 1 ]] || fail "fuzz --faults found no failure"
while read -r replay; do
  "$S" replay "$replay" >"$T/replay.out" 2>&1 || true
  grep -q '^replay matches the recording' "$T/replay.out" || fail "fuzz --faults: $replay does not replay"
done < <(jq -r .replay "$T/faults/failures.jsonl")

step "sweep --json --junit --out: groups with their lowest seed, each failure kept"
rc=$(status "$S" sweep test_race --seeds 1..60 --jobs 2 --json "$T/sweep.json" --junit "$T/sweep.xml" \
  --out "$T/sweep-out")
[[ $rc == 1 ]] || fail "sweep of test_race: exit status $rc"
[[ $(wc -l <"$T/sweep-out/failures.jsonl") == $(jq .failed "$T/sweep.json") ]] ||
  fail "sweep: failures.jsonl does not list every failure"
while read -r replay; do
  "$S" replay "$replay" >"$T/replay.out" 2>&1 || true # exit status 1: the run fails again
  grep -q '^replay matches the recording' "$T/replay.out" || fail "sweep: $replay does not replay"
done < <(jq -r .replay "$T/sweep-out/failures.jsonl")
xmllint --noout "$T/sweep.xml" || fail "sweep.xml is not XML"
jq -e '.command == "sweep" and .format == 2 and (.groups | length) >= 1' "$T/sweep.json" >/dev/null ||
  fail "sweep.json: $(head -c 300 "$T/sweep.json")"
lowest=$(jq '[.failures[].seed] | min' "$T/sweep.json")
[[ $(jq '[.groups[].seed] | min' "$T/sweep.json") == "$lowest" ]] || fail "sweep groups: not the lowest seed"
# A failure with no replay file (the determinism check's: both runs passed)
# names none, and leaves no file of an earlier campaign under its name.
mkdir -p "$T/nondet-out" && echo stale >"$T/nondet-out/test_nondeterministic-1.replay"
rc=$(status "$S" sweep test_nondeterministic --seeds 1..2 --check-determinism --jobs 1 \
  --out "$T/nondet-out")
[[ $rc == 1 ]] || fail "sweep of test_nondeterministic: exit status $rc"
[[ $(jq -s 'map(has("replay")) | any' "$T/nondet-out/failures.jsonl") == false ]] ||
  fail "a failure with no replay file names one: $(cat "$T/nondet-out/failures.jsonl")"
[[ ! -e $T/nondet-out/test_nondeterministic-1.replay ]] || fail "a stale replay file is left"

"$S" sweep ask_reply --seeds 1..10 --shard 2/3 --json "$T/sweep-shard.json" >"$T/out" 2>&1 ||
  fail "sweep of a shard: $(cat "$T/out")"
jq -e '.seeds_run == 3 and .shard.index == 2 and .shard.count == 3' "$T/sweep-shard.json" >/dev/null ||
  fail "sweep --shard 2/3 of 1..10: $(head -c 300 "$T/sweep-shard.json")"

step "four shards under GNU parallel merge to the unsharded campaign"
seeds=1..400
"$S" fuzz test_race --seeds $seeds --jobs 2 --json "$T/full.json" >/dev/null 2>&1 || true
# A shard that finds a failure exits 1: parallel's own status says how many did.
parallel -j4 "$S" fuzz test_race --seeds $seeds --jobs 1 --shard {}/4 --json "$T/shard-{}.json" \
  '>/dev/null 2>&1' ::: 1 2 3 4 || true
parallel -j4 JOB_COMPLETION_INDEX={} "$S" fuzz test_race --seeds $seeds --jobs 1 --shard k8s/4 \
  --json "$T/k8s-{}.json" '>/dev/null 2>&1' ::: 0 1 2 3 || true
rc=$(status "$S" merge "$T"/shard-{1,2,3,4}.json --json "$T/merged.json" --junit "$T/merged.xml")
[[ $rc == 1 ]] || fail "merge of the shards: exit status $rc ($(cat "$T/err"))"
"$S" merge "$T"/k8s-{0,1,2,3}.json --json "$T/merged-k8s.json" >/dev/null 2>&1 || true
xmllint --noout "$T/merged.xml" || fail "merged.xml is not XML"
view='{runs: .seeds_run, failed, groups: [.groups[] | {scenario, kind, where, message, count, seed}],
       seeds: [.failures[].seed] | sort}'
jq -S "$view" "$T/full.json" >"$T/full.view"
for m in merged merged-k8s; do
  jq -S "$view" "$T/$m.json" >"$T/$m.view"
  diff "$T/full.view" "$T/$m.view" || fail "$m differs from the unsharded campaign"
done
[[ $(jq .failed "$T/full.json") -ge 1 ]] || fail "test_race failed on no seed of $seeds"
rc=$(status "$S" merge "$T/shard-1.json" "$T/shard-2.json" "$T/shard-1.json")
{ [[ $rc == 2 ]] && grep -q 'same shard (1/4)' "$T/err"; } || fail "a shard given twice: status $rc"
rc=$(status "$S" merge "$T/shard-1.json" "$T/shard-3.json" --json "$T/part.json")
grep -q '^shards missing: 2/4, 4/4 ' "$T/out" || fail "missing shards not named: $(cat "$T/out")"
{ [[ $rc == 1 ]] && jq -e '.shards_missing | startswith("2/4, 4/4")' "$T/part.json" >/dev/null; } ||
  fail "missing shards: status $rc, or not in the JSON"
# A summary claiming 10^11 shards: the missing ones are counted, not walked.
sed 's/"count": 4/"count": 100000000000/' "$T/shard-1.json" >"$T/huge.json"
rc=$(status timeout 20 "$S" merge "$T/huge.json")
{ [[ $rc == 1 ]] && grep -q '(99999999999 missing in all)' "$T/out"; } ||
  fail "merge of a summary of 10^11 shards: status $rc: $(head -c 300 "$T/out")"
echo "check_campaign: all passed"
