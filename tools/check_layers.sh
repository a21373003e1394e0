#!/usr/bin/env bash
# Checks that the includes and the calls follow the architecture's layers:
#   examples, scenarios, tools, tests -> include/stackhouse/ -> core/ -> core/plat.h
#   <- backend-epoll/, backend-sim/
# and, within core/, net -> actor, sched, time -> mem, base (never the reverse).
# Rules (docs/internals.md, "Layering"):
#  1. core/ includes no header of backend-epoll/, backend-sim/, tools/,
#     scenarios/, tests/, bench/ or examples/, whether the include path reaches
#     it or it is only named (a backend header would then come from -I flags
#     outside core's own, which is exactly the arrow we forbid).
#  2. Core modules (a .c/.h pair, or a lone .h, in core/) form no include cycle
#     except within the one set docs/internals.md names on its line
#     "Allowed include cycle: a, b, c" (three modules at most; no line: none).
#  3. scenarios/, examples/, bench/ and http/ (a library module above the
#     core) include only the public headers (the scenario framework's among
#     them), system headers, and their own: bench/common/*.h, a suite's
#     bench/SUITE/common/*.h from within bench/SUITE/, http/*.h, scenarios/*.h
#     (helpers shared by scenarios, themselves held to this rule), the
#     headers of an example of several files from within its folder
#     (examples/NAME/*.h), and an example's own public header from a scenario
#     that runs it (examples/NAME/*.h but *_int.h).
#  4. core/ touches atomic words only through core/base/atomic.h: no
#     atomic_*() or atomic_*_explicit() operation of <stdatomic.h>
#     (atomic_init included) and no __atomic or __sync builtin elsewhere in
#     core/ (the types excepted), so that the simulator's memory model hears
#     of every shared access.
#  5. Calls, read from the library's objects with nm: a module (an object of
#     the object directory, named by its path there less ".o": actor/stack)
#     calls another when it uses a symbol the other defines (a call, or the
#     address of a function or an object: installing a hook counts, calling
#     through it does not). Modules form no call cycle except within the one
#     set docs/internals.md names on its line "Allowed call cycle: a, b, c"
#     (three modules at most; no line: none); no module of core/actor,
#     core/sched, core/time, core/base or core/mem calls one of core/net.
#     Every cycle found (a strongly connected component, with its members) is
#     printed, allowed or not.
# Includes resolve as the compiler would with the Makefile's INC_<dir> flags:
# a quoted include first in the including file's directory.
# Usage: tools/check_layers.sh [--objs DIR] [ROOT]
#        tools/check_layers.sh --self-test
#   ROOT: the tree (default: the repository of this script). DIR: the objects
#   of core/ (default: ROOT/build/release/obj/core, the release build's, which
#   `make all` leaves; with none there, rule 5 is skipped with a note on
#   stderr, while a DIR given without objects is an error). Objects whose
#   source ROOT/core/MODULE.c is gone (a stale build) are left out, unless no
#   object has one (another tree's objects, read for its call graph).
# Exit status 1 and one line per violation (and the call cycles found);
# otherwise the cycles and a summary. Only bash, find, sed, sort, awk and nm
# (and $CC, default cc, for the self-test): it must run on a bare build machine.
set -u

self_test() {
  local t rc out
  t=$(mktemp -d) || return 2
  trap 'rm -rf "$t"' RETURN
  mkdir -p "$t"/{core,backend-sim,scenarios,examples,bench/common,bench/s/common,include/stackhouse,docs}
  printf 'INC_DEFAULT := -Iinclude -Icore\nINC_scenarios := -Iinclude -Icore\n' > "$t/Makefile"
  printf 'INC_examples := -Iinclude\nINC_bench := -Ibench/common -Iinclude -Icore\n' >> "$t/Makefile"
  echo 'Allowed include cycle: a, b' > "$t/docs/internals.md"
  : > "$t/include/stackhouse/stackhouse.h"; : > "$t/backend-sim/sim.h"
  : > "$t/include/stackhouse/scenario.h"; : > "$t/bench/common/bench.h"; : > "$t/bench/s/common/h.h"
  # Broken tree: a 4-cycle a -> b -> c -> d -> a, a core file naming a
  # backend header, a scenario and an example reaching into core, a bench
  # outside suite s using its header (s's own program may).
  local m next=(b c d a) i=0
  for m in a b c d; do
    echo "#include \"${next[i]}.h\"" > "$t/core/$m.h"; echo "#include \"$m.h\"" > "$t/core/$m.c"; i=$((i+1))
  done
  echo '#include "sim.h"' >> "$t/core/c.c"
  echo 'int f(_Atomic int *p) { return atomic_load_explicit(p, memory_order_relaxed); }' >> "$t/core/b.c"
  printf '#include <stackhouse/scenario.h>\n#include "a.h"\n#include <stdio.h>\n' > "$t/scenarios/s.c"
  printf '#include <stackhouse/stackhouse.h>\n#include <b.h>\n' > "$t/examples/e.c"
  printf '#include "bench.h"\n#include <stackhouse/stackhouse.h>\n' > "$t/bench/p.c"
  echo '#include "common/h.h"' > "$t/bench/s/p.c"; echo '#include "s/common/h.h"' > "$t/bench/q.c"
  out=$("$0" "$t" 2>/dev/null); rc=$?
  local want
  for want in 'cycle of 4 modules.*a, b, c, d' 'core/c.c: .*"sim.h".*backend-sim' \
              'scenarios/s.c: .*"a.h"' 'examples/e.c: .*<b.h>' 'bench/q.c: .*"s/common/h.h"' \
              'core/b.c:2:.*atomic_load_explicit.*core/base/atomic.h'; do
    grep -q "$want" <<<"$out" || { echo "self-test: broken tree: no line matching '$want' in:"; echo "$out"; return 1; }
  done
  [ "$rc" -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 6 ] ||
    { echo "self-test: broken tree: want exit 1 and 6 lines, got $rc:"; echo "$out"; return 1; }
  # Fixed: d -> a becomes b -> a (the allowed pair), the strays go.
  echo '#include "a.h"' > "$t/core/b.c"; : > "$t/core/d.h"; : > "$t/core/c.c"
  echo '#include <stackhouse/scenario.h>' > "$t/scenarios/s.c"; echo '#include <stdio.h>' > "$t/examples/e.c"
  : > "$t/bench/q.c"
  out=$("$0" "$t" 2>/dev/null) || { echo "self-test: fixed tree failed:"; echo "$out"; return 1; }
  grep -q 'largest cycle: 2 modules (a, b)' <<<"$out" || { echo "self-test: fixed tree: bad summary: $out"; return 1; }
  # An allowed set of four modules is itself a violation.
  echo 'Allowed include cycle: a, b, c, d' > "$t/docs/internals.md"
  out=$("$0" "$t" 2>/dev/null) && { echo "self-test: a 4-module allowed set passed"; return 1; }
  calls_self_test "$t" || return 1
  echo "self-test passed"
}

# Rule 5 on objects of tiny C files, in the default place (T/build/release/
# obj/core) of tree T, whose includes pass.
calls_self_test() {
  local t=$1 o=$1/build/release/obj/core out rc want
  printf 'Allowed include cycle: a, b\nAllowed call cycle: actor/a, actor/b\n' > "$t/docs/internals.md"
  mkdir -p "$t/src" "$o"/{actor,net,sched,time}
  # obj MODULE TEXT: compiles TEXT into the object of MODULE.
  obj() {
    printf '%s\n' "$2" > "$t/src/${1/\//_}.c" && "${CC:-cc}" -c -o "$o/$1.o" "$t/src/${1/\//_}.c"
  }
  # Broken: actor/p calls net/q (the actor core calling the network), and
  # actor/x -> time/y -> sched/z -> actor/x, a cycle the docs do not allow;
  # actor/a <-> actor/b, the allowed one, is only shown.
  obj actor/a 'int b(void); int a(int n) { return n ? b() : 0; }' &&
    obj actor/b 'int a(int); int b(void) { return a(0); }' &&
    obj actor/p 'int q(void); int p(void) { return q(); }' && obj net/q 'int q(void) { return 1; }' &&
    obj actor/x 'int y(void); int x(void) { return y(); }' &&
    obj time/y 'int z(void); int y(void) { return z(); }' &&
    obj sched/z 'int x(void); int z(void) { return x(); }' || { echo "self-test: cannot compile"; return 1; }
  out=$("$0" "$t"); rc=$?
  for want in 'calls: actor/p -> net/q (q): core/actor must not call core/net' \
              'core: call cycle of 3 modules not allowed by docs/internals.md: actor/x, sched/z, time/y; cycle: actor/x -> time/y -> sched/z -> actor/x' \
              'calls: cycle of 2 modules, allowed by docs/internals.md: actor/a, actor/b'; do
    grep -qxF "$want" <<<"$out" || { echo "self-test: broken calls: no line '$want' in:"; echo "$out"; return 1; }
  done
  [ "$rc" -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 4 ] ||
    { echo "self-test: broken calls: want exit 1 and 4 lines, got $rc:"; echo "$out"; return 1; }
  # Fixed: z and p call nothing. An object without a source in core/ is
  # kept: no object has one here (another tree's objects).
  obj sched/z 'int z(void) { return 0; }' && obj actor/p 'int p(void) { return 0; }' || return 1
  out=$("$0" "$t") || { echo "self-test: fixed calls failed:"; echo "$out"; return 1; }
  grep -qxF 'calls: 7 modules, 4 call edges (objects under build/release/obj/core), cycles: actor/a, actor/b' \
    <<<"$out" || { echo "self-test: fixed calls: bad summary: $out"; return 1; }
  # The same objects named with --objs; a directory named without objects
  # is an error, not a skip.
  out=$("$0" --objs "$o" "$t") || { echo "self-test: --objs failed: $out"; return 1; }
  mkdir -p "$t/empty"
  out=$("$0" --objs "$t/empty" "$t"); rc=$?
  [ "$rc" -eq 2 ] || { echo "self-test: --objs of no objects: want exit 2, got $rc: $out"; return 1; }
}

if [ "${1:-}" = --self-test ]; then self_test; exit; fi
objs=
if [ "${1:-}" = --objs ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 [--objs DIR] [ROOT] | --self-test" >&2; exit 2; }
  objs=$(cd "$2" 2>/dev/null && pwd) || { echo "check_layers: --objs $2: no such directory" >&2; exit 2; }
  shift 2
fi
cd "${1:-$(dirname "$0")/..}" || exit 2

# The graph of modules mods[1..nmod] (ismod[]) and edges edge[a, b], for
# rules 2 and 5.
graph_awk='
# Reachability r[i, j] by transitive closure (about 60 modules: 216k steps);
# two modules share a component when each reaches the other.
function closure(   i, j, k) {
  for (i = 1; i <= nmod; i++) for (j = 1; j <= nmod; j++) if ((mods[i], mods[j]) in edge) r[i, j] = 1
  for (k = 1; k <= nmod; k++) for (i = 1; i <= nmod; i++) if ((i, k) in r)
    for (j = 1; j <= nmod; j++) if ((k, j) in r) r[i, j] = 1
}
# The set the docs allow a cycle of `what` (include, call) among: inallowed[].
function allow(allowed, what,   na, al, i) {
  gsub(/^[ \t]+|[ \t]+$/, "", allowed); na = split(allowed, al, /[ \t]*,[ \t]*/)
  for (i = 1; i <= na; i++) { if (al[i] == "") continue; inallowed[al[i]] = 1
    if (!(al[i] in ismod)) { print "docs/internals.md: allowed " what " cycle names " al[i] ", not a module of core/"; nbad++ } }
  if (na > 3) { print "docs/internals.md: allowed " what " cycle has " na " modules (" allowed "); at most 3 may be"; nbad++ }
}
# Every component of more than one module is a cycle: a violation unless
# the docs allow all its members; with `show`, an allowed one is printed
# too. Sets comp[], maxsize and maxnames (the largest), and cycles (the
# members of each, "; " between cycles).
function components(what, show,   i, j, size, names, out) {
  for (i = 1; i <= nmod; i++) {
    if (mods[i] in comp) continue
    comp[mods[i]] = i; size = 1; names = mods[i]; out = !(mods[i] in inallowed)
    for (j = i + 1; j <= nmod; j++) if ((i, j) in r && (j, i) in r) {
      comp[mods[j]] = i; size++; names = names ", " mods[j]; if (!(mods[j] in inallowed)) out = 1
    }
    if (size > maxsize) { maxsize = size; maxnames = names }
    if (size < 2) continue
    cycles = cycles (cycles == "" ? "" : "; ") names
    if (out) { print "core: " what " cycle of " size " modules not allowed by docs/internals.md: " names "; cycle: " walk(mods[i], i); nbad++ }
    else if (show) print what "s: cycle of " size " modules, allowed by docs/internals.md: " names
  }
}
# The path of a closed walk from s through every member of component c, each
# leg a shortest path (breadth-first) inside the component to the next
# member it has not passed yet.
function walk(s, c,   path, cur, i) {
  split("", passed); passed[s] = 1; path = s; cur = s
  for (i = 1; i <= nmod; i++)
    if (comp[mods[i]] == c && !(mods[i] in passed)) { path = path leg(cur, mods[i], c); cur = mods[i] }
  return path leg(cur, s, c)
}
function leg(from, to, c,   q, h, t, prev, u, i, v, p) {
  h = 1; t = 1; q[1] = from; split("", prev); prev[from] = ""
  while (h <= t) {
    u = q[h++]
    for (i = 1; i <= nmod; i++) { v = mods[i]
      if (comp[v] == c && (u, v) in edge && !(v in prev)) { prev[v] = u; q[++t] = v }
      if (v == to && (u, v) in edge) {
        p = " -> " to; passed[to] = 1
        while (u != from) { p = " -> " u p; passed[u] = 1; u = prev[u] }
        return p
      }
    }
  }
}
'

# Every C file of the project, then the -I flags per top-level directory
# ("DIR -Ia -Ib" lines, DEFAULT for the others), then the allowed cycle.
files=$(find . -path ./build -prune -o -path ./.git -prune -o -type f -name '*.[ch]' -print |
        sed 's|^\./||' | LC_ALL=C sort)
incs=$(sed -n 's/^INC_\([A-Za-z0-9_-]*\)[[:space:]]*:*=[[:space:]]*/\1 /p' Makefile 2>/dev/null)
allowed=$(sed -n 's/^Allowed include cycle:[[:space:]]*//p' docs/internals.md 2>/dev/null | head -n 1)

out=$(LC_ALL=C awk -v files="$files" -v incs="$incs" -v allowed="$allowed" "$graph_awk"'
function top(p) { return substr(p, 1, index(p, "/") - 1) }
function dir(p) { sub(/\/[^\/]*$/, "", p); return p }
# Folds "." and ".." so that a "../x.h" names the file the compiler opens.
function norm(p,   n, a, i, out, k, o) {
  n = split(p, a, "/"); k = 0
  for (i = 1; i <= n; i++) {
    if (a[i] == "." || a[i] == "") continue
    if (a[i] == ".." && k > 0 && o[k] != "..") { k--; continue }
    o[++k] = a[i]
  }
  out = o[1]; for (i = 2; i <= k; i++) out = out "/" o[i]
  return out
}
# The project file an include opens, or "" (a system header, or a name the
# include path does not reach).
function resolve(f, quoted, name,   t, n, a, i, p) {
  if (quoted) { p = norm(dir(f) "/" name); if (p in known) return p }
  t = top(f); if (!(t in flags)) t = "DEFAULT"
  n = split(flags[t], a, " ")
  for (i = 1; i <= n; i++)
    if (a[i] ~ /^-I/) { p = norm(substr(a[i], 3) "/" name); if (p in known) return p }
  return ""
}
# A project header whose path ends in /name: what an unresolved include names.
function named(name,   h) {
  for (h in known)
    if (h ~ /\.h$/ && length(h) > length(name) && substr("/" h, length(h) - length(name) + 1) == "/" name) return h
  return ""
}
function bad(f, inc, rule) { print f ": includes " inc ": " rule; nbad++ }
function module(p) { sub(/^core\//, "", p); sub(/\.[ch]$/, "", p); return p }
# Rule 1, and the module graph.
function check_core(f, inc, p,   h) {
  h = p != "" ? p : named(substr(inc, 2, length(inc) - 2))
  if (top(h) ~ /^(backend-epoll|backend-sim|tools|scenarios|tests|bench|examples|http)$/)
    bad(f, inc, "core must not include headers of " top(h) "/ (" h ")")
  else if (p ~ /^core\/.*\.h$/ && module(p) != module(f) && !((module(f), module(p)) in edge)) {
    edge[module(f), module(p)] = 1; nedges++
  }
}
# Whether p is a header of the suite of bench/SUITE/ that f is in: bench/SUITE/common/*.h.
function suite_header(f, p,   s) {
  if (!match(f, /^bench\/[^\/]+\//)) return 0
  s = substr(f, 1, RLENGTH) "common/"
  return index(p, s) == 1 && substr(p, length(s) + 1) ~ /^[^\/]*\.h$/
}
# Rule 3.
function check_client(f, inc, p, quoted,   t, h) {
  t = top(f)
  if (p ~ /^include\/stackhouse\// || ((t == "http" || t == "scenarios") && p ~ ("^" t "\\/[^\\/]*\\.h$")) ||
      (t == "examples" && dir(f) != "examples" && dir(p) == dir(f)) ||
      (t == "scenarios" && p ~ /^examples\/[^\/]+\/[^\/]+\.h$/ && p !~ /_int\.h$/) ||
      (t == "bench" && (p ~ /^bench\/common\/[^\/]*\.h$/ || suite_header(f, p)))) return
  if (p != "") { bad(f, inc, t "/ may include only the public headers" \
                     (t == "bench" ? ", bench/common/ and bench/SUITE/common/ within SUITE" : "") " (" p ")"); return }
  h = named(substr(inc, 2, length(inc) - 2))
  if (quoted || h != "") bad(f, inc, t "/ may include only allowed files (" (h != "" ? h " is not on its include path" : "no such file") ")")
}
BEGIN {
  n = split(files, fl, "\n"); for (i = 1; i <= n; i++) known[fl[i]] = 1
  m = split(incs, il, "\n"); for (i = 1; i <= m; i++) { t = il[i]; sub(/ .*/, "", t); flags[t] = substr(il[i], length(t) + 2) }
  if (!("DEFAULT" in flags)) flags["DEFAULT"] = "-Iinclude -Icore"
  for (i = 1; i <= n; i++) {
    f = fl[i]; t = top(f)
    if (t == "core") { mod = module(f); if (!(mod in ismod)) { ismod[mod] = 1; mods[++nmod] = mod } }
    if (t !~ /^(core|scenarios|examples|bench|http)$/) continue
    while ((getline line < f) > 0) {
      if (line !~ /^[ \t]*#[ \t]*include[ \t]*["<]/) continue
      sub(/^[ \t]*#[ \t]*include[ \t]*/, "", line)
      quoted = substr(line, 1, 1) == "\""
      if (!match(line, quoted ? "^\"[^\"]*\"" : "^<[^>]*>")) continue
      inc = substr(line, 1, RLENGTH)
      p = resolve(f, quoted, substr(inc, 2, RLENGTH - 2))
      if (t == "core") check_core(f, inc, p); else check_client(f, inc, p, quoted)
    }
    close(f)
  }
  # Rule 2.
  closure(); allow(allowed, "include"); components("include", 0)
  if (nbad) exit 1
  printf "layers: %d core modules, %d include edges, largest cycle: %s\n", nmod, nedges,
         (maxsize > 1 ? maxsize " modules (" maxnames ")" : "none")
}'); rc=$?

# Rule 5: the objects of DIR (given: $2 non-empty) whose source is in core/,
# their symbols (nm -A -P -g: "actor/stack.o: sh_stack_new T 0 40", "U" for
# a use), the module calling graph; status 2 when it cannot be read.
calls_rule() {
  local dir=$1 given=$2 list srcs shown
  case $dir in "$PWD"/*) shown=${dir#"$PWD"/} ;; *) shown=$dir ;; esac
  list=$(cd "$dir" 2>/dev/null && find . -name '*.o' | sed 's|^\./||' | LC_ALL=C sort)
  if [ -z "$list" ]; then
    [ -n "$given" ] && { echo "check_layers: no objects under $shown"; return 2; }
    echo "calls: not checked: no objects under $shown (make all, or --objs DIR)" >&2
    return 0
  fi
  command -v nm > /dev/null || { echo "check_layers: no nm to read the objects with"; return 2; }
  srcs=$(while read -r o; do [ -e "core/${o%.o}.c" ] && echo "$o"; done <<<"$list")
  if [ -n "$srcs" ] && [ "$srcs" != "$list" ]; then
    echo "calls: objects under $shown left out, their source not in core/ (a stale build):" \
         "$(grep -cvxF -f <(echo "$srcs") <<<"$list")" >&2
    list=$srcs
  fi
  # shellcheck disable=SC2086 # the list is words: paths under DIR, no blanks
  (cd "$dir" && nm -A -P -g $list) | LC_ALL=C awk -v objs="$list" -v allowed="$allowed_calls" \
    -v dir="$shown" "$graph_awk"'
function folder(m) { return index(m, "/") ? substr(m, 1, index(m, "/") - 1) : "" }
BEGIN {
  n = split(objs, ol, "\n")
  for (i = 1; i <= n; i++) { m = ol[i]; sub(/\.o$/, "", m); mods[++nmod] = m; ismod[m] = 1 }
}
{ f = $1; sub(/\.o:$/, "", f)
  if ($3 == "U") { nu++; user[nu] = f; used[nu] = $2 }
  else if ($3 ~ /^[A-TV-Z]$/ && !($2 in def)) def[$2] = f }
END {
  for (i = 1; i <= nu; i++) {
    if (!(used[i] in def) || def[used[i]] == user[i]) continue
    e = user[i] SUBSEP def[used[i]]
    if (e in edge) syms[e] = syms[e] ", " used[i]
    else { edge[e] = 1; nedges++; syms[e] = used[i] }
  }
  for (i = 1; i <= nmod; i++) if (folder(mods[i]) ~ /^(actor|sched|time|base|mem)$/)
    for (j = 1; j <= nmod; j++) if (folder(mods[j]) == "net" && (mods[i], mods[j]) in edge) {
      print "calls: " mods[i] " -> " mods[j] " (" syms[mods[i], mods[j]] "): core/" folder(mods[i]) \
            " must not call core/net"; nbad++
    }
  closure(); allow(allowed, "call"); components("call", 1)
  if (nbad) exit 1
  printf "calls: %d modules, %d call edges (objects under %s), cycles: %s\n", nmod, nedges, dir,
         (cycles == "" ? "none" : cycles)
}'
}
allowed_calls=$(sed -n 's/^Allowed call cycle:[[:space:]]*//p' docs/internals.md 2>/dev/null | head -n 1)
calls=$(calls_rule "${objs:-$PWD/build/release/obj/core}" "$objs"); crc=$?
out=$(printf '%s\n%s' "$out" "$calls" | sed '/^$/d')
[ $crc -gt $rc ] && rc=$crc

# Rule 4: grep, line by line; a comment naming an operation is no use of it.
ops='\b(atomic_(load|store|exchange|fetch_[a-z]+|compare_exchange_[a-z]+|flag_[a-z_]+|thread_fence|signal_fence|init)(_explicit)?|__atomic_[a-z_]+|__sync_[a-z_]+)[ \t]*\('
for f in $(grep -rlE "$ops" core --include="*.[ch]" 2>/dev/null); do
  [ "$f" = core/base/atomic.h ] && continue
  bad=$(grep -nE "$ops" "$f" | grep -vE '^[0-9]+:[ \t]*(/?\*|//)' | sed "s|^|$f:|; s|\$| : an atomic operation outside core/base/atomic.h (use its sh_atomic_* wrapper)|")
  [ -n "$bad" ] && { out=$(printf '%s\n%s' "$bad" "$out" | sed '/^$/d'); [ $rc -eq 0 ] && rc=1; }
done
echo "$out"
exit $rc
