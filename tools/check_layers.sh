#!/usr/bin/env bash
# Checks that the includes follow the architecture's layers:
#   examples, scenarios, tools, tests -> include/stackhouse/ -> core/ -> core/plat.h
#   <- backend-epoll/, backend-sim/
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
#     (helpers shared by scenarios, themselves held to this rule).
#  4. core/ touches atomic words only through core/base/atomic.h: no
#     atomic_*() or atomic_*_explicit() operation of <stdatomic.h>
#     (atomic_init included) and no __atomic or __sync builtin elsewhere in
#     core/ (the types excepted), so that the simulator's memory model hears
#     of every shared access.
# Includes resolve as the compiler would with the Makefile's INC_<dir> flags:
# a quoted include first in the including file's directory.
# Usage: tools/check_layers.sh [ROOT]   (default: the repository of this script)
#        tools/check_layers.sh --self-test
# Exit status 1 and one line per violation; otherwise a one-line summary.
# Only bash, find, sed, sort and awk: it must run on a bare build machine.
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
  out=$("$0" "$t"); rc=$?
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
  out=$("$0" "$t") || { echo "self-test: fixed tree failed:"; echo "$out"; return 1; }
  grep -q 'largest cycle: 2 modules (a, b)' <<<"$out" || { echo "self-test: fixed tree: bad summary: $out"; return 1; }
  # An allowed set of four modules is itself a violation.
  echo 'Allowed include cycle: a, b, c, d' > "$t/docs/internals.md"
  out=$("$0" "$t") && { echo "self-test: a 4-module allowed set passed"; return 1; }
  echo "self-test passed"
}

if [ "${1:-}" = --self-test ]; then self_test; exit; fi
cd "${1:-$(dirname "$0")/..}" || exit 2

# Every C file of the project, then the -I flags per top-level directory
# ("DIR -Ia -Ib" lines, DEFAULT for the others), then the allowed cycle.
files=$(find . -path ./build -prune -o -path ./.git -prune -o -type f -name '*.[ch]' -print |
        sed 's|^\./||' | LC_ALL=C sort)
incs=$(sed -n 's/^INC_\([A-Za-z0-9_-]*\)[[:space:]]*:*=[[:space:]]*/\1 /p' Makefile 2>/dev/null)
allowed=$(sed -n 's/^Allowed include cycle:[[:space:]]*//p' docs/internals.md 2>/dev/null | head -n 1)

out=$(LC_ALL=C awk -v files="$files" -v incs="$incs" -v allowed="$allowed" '
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
      (t == "bench" && (p ~ /^bench\/common\/[^\/]*\.h$/ || suite_header(f, p)))) return
  if (p != "") { bad(f, inc, t "/ may include only the public headers" \
                     (t == "bench" ? ", bench/common/ and bench/SUITE/common/ within SUITE" : "") " (" p ")"); return }
  h = named(substr(inc, 2, length(inc) - 2))
  if (quoted || h != "") bad(f, inc, t "/ may include only allowed files (" (h != "" ? h " is not on its include path" : "no such file") ")")
}
# The path of a closed walk from s through every member of component c, each
# leg a shortest path (breadth-first) inside the component.
function walk(s, c,   path, cur, i, goal) {
  path = s; cur = s
  for (i = 1; i <= nmod; i++) if (comp[mods[i]] == c && mods[i] != s) { path = path leg(cur, mods[i], c); cur = mods[i] }
  return path leg(cur, s, c)
}
function leg(from, to, c,   q, h, t, prev, u, i, v, p) {
  h = 1; t = 1; q[1] = from; split("", prev); prev[from] = ""
  while (h <= t) {
    u = q[h++]
    for (i = 1; i <= nmod; i++) { v = mods[i]
      if (comp[v] == c && (u, v) in edge && !(v in prev)) { prev[v] = u; q[++t] = v }
      if (v == to && (u, v) in edge) { p = " -> " to; while (u != from) { p = " -> " u p; u = prev[u] }; return p }
    }
  }
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
  # Rule 2: reachability by transitive closure (about 30 modules: 27k steps);
  # two modules share a component when each reaches the other.
  for (i = 1; i <= nmod; i++) for (j = 1; j <= nmod; j++) if ((mods[i], mods[j]) in edge) r[i, j] = 1
  for (k = 1; k <= nmod; k++) for (i = 1; i <= nmod; i++) if ((i, k) in r)
    for (j = 1; j <= nmod; j++) if ((k, j) in r) r[i, j] = 1
  gsub(/^[ \t]+|[ \t]+$/, "", allowed); na = split(allowed, al, /[ \t]*,[ \t]*/)
  for (i = 1; i <= na; i++) { if (al[i] == "") continue; inallowed[al[i]] = 1
    if (!(al[i] in ismod)) { print "docs/internals.md: allowed include cycle names " al[i] ", not a module of core/"; nbad++ } }
  if (na > 3) { print "docs/internals.md: allowed include cycle has " na " modules (" allowed "); at most 3 may be"; nbad++ }
  for (i = 1; i <= nmod; i++) {
    if (mods[i] in comp) continue
    comp[mods[i]] = i; size = 1; names = mods[i]; out = !(mods[i] in inallowed)
    for (j = i + 1; j <= nmod; j++) if ((i, j) in r && (j, i) in r) {
      comp[mods[j]] = i; size++; names = names ", " mods[j]; if (!(mods[j] in inallowed)) out = 1
    }
    if (size > maxsize) { maxsize = size; maxnames = names }
    if (size > 1 && out) {
      print "core: include cycle of " size " modules not allowed by docs/internals.md: " names "; cycle: " walk(mods[i], i); nbad++
    }
  }
  if (nbad) exit 1
  printf "layers: %d core modules, %d include edges, largest cycle: %s\n", nmod, nedges,
         (maxsize > 1 ? maxsize " modules (" maxnames ")" : "none")
}'); rc=$?

# Rule 4: grep, line by line; a comment naming an operation is no use of it.
ops='\b(atomic_(load|store|exchange|fetch_[a-z]+|compare_exchange_[a-z]+|flag_[a-z_]+|thread_fence|signal_fence|init)(_explicit)?|__atomic_[a-z_]+|__sync_[a-z_]+)[ \t]*\('
for f in $(grep -rlE "$ops" core --include="*.[ch]" 2>/dev/null); do
  [ "$f" = core/base/atomic.h ] && continue
  bad=$(grep -nE "$ops" "$f" | grep -vE '^[0-9]+:[ \t]*(/?\*|//)' | sed "s|^|$f:|; s|\$| : an atomic operation outside core/base/atomic.h (use its sh_atomic_* wrapper)|")
  [ -n "$bad" ] && { out=$(printf '%s\n%s' "$bad" "$out" | sed '/^$/d'); rc=1; }
done
echo "$out"
exit $rc
