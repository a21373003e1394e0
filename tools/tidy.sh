#!/usr/bin/env bash
# Keeps the limits of docs/style.md that a machine can count:
#  1. Library code (every .c/.h under core/, backend-epoll/, backend-sim/,
#     http/ and include/, at any depth): a function is at most 70 lines,
#     counted from the line of its opening brace to the line of its closing
#     one (a signature's own lines do not count); a line is at most 100
#     columns (a UTF-8 character is one column, a tab runs to the next
#     multiple of 8).
#  2. Every .c/.h file of the project (build/ and .git/ aside), tests,
#     scenarios, benches and tools included, is at most 500 lines.
#  3. Assertions per folder may only grow. The uses of SH_ASSERT,
#     SH_DEBUG_ASSERT, SH_INVARIANT, static_assert and _Static_assert in
#     the library code of each folder (not their #defines, not in comments
#     or strings) are at least the folder's count in tools/tidy-assertions
#     ("folder count" lines). A folder above its count gets a note (raise it:
#     --update-baseline); a folder missing from the file, or one listed there
#     that holds no library code any more, fails until the file is rewritten.
#  4. In the folders of ASSERT_DIRS (and below them), every function of more
#     than MIN_FN_ASSERT lines (counted as in 1) holds at least one of those
#     assertions in its body (docs/style.md: a precondition, postcondition
#     or invariant in every function that does something), but for the
#     files of TIDY_ASSERT_PENDING.
# Also measured, not enforced: assertions per function definition, per
# folder with --report (a table), for all the library code in the summary.
# How functions are found: comments, strings and character literals are set
# aside; a `{` at file scope opens a function when the text since the last
# `;`, `{` or `}` at file scope ends with `)` and has no `=` (attributes
# aside); extern "C" blocks are transparent; preprocessor lines are skipped,
# and each branch of an #if/#else is read from the brace depth at its #if
# (the branches must agree on the depth they leave: a file whose braces do
# not balance is reported).
# Usage: tools/tidy.sh [--report] [ROOT]   check ROOT (default: this script's repository)
#        tools/tidy.sh --update-baseline [ROOT]   rewrite ROOT/tools/tidy-assertions
#        tools/tidy.sh --self-test
# Exit status 1 and one line per violation (file:line: what); otherwise a
# one-line summary (after the notes). Only bash, coreutils, find, grep, sed
# and awk (mawk will do): it must run on a bare build machine, and quickly.
set -u

MAX_FN=70 MAX_COL=100 MAX_FILE=500
LIB='^(core|backend-epoll|backend-sim|http|include)/'
BASELINE=tools/tidy-assertions
# Rule 4: in these folders (and below), a function of more than
# MIN_FN_ASSERT lines holds an assertion.
ASSERT_DIRS="core/actor core/sched" MIN_FN_ASSERT=5
# Files of those folders that rule 4 skips while they are being rewritten
# (none now): a file leaves the list with its rewrite, and the list is
# meant to stay empty.
TIDY_ASSERT_PENDING=""
# The self-test's tree has its own pending file.
[ -n "${TIDY_SELF_TEST_PENDING:-}" ] && TIDY_ASSERT_PENDING=$TIDY_SELF_TEST_PENDING

# N lines of filler, to stdout.
lines() { local i; for ((i = 0; i < $1; i++)); do echo "  x++;"; done; }

self_test() {
  local t rc out want
  t=$(mktemp -d) || return 2
  trap 'rm -rf "$t"' RETURN
  export TIDY_SELF_TEST_PENDING=core/sched/pend.c
  mkdir -p "$t"/{core/base,core/mem,core/actor,core/actorx,core/sched/sub,http,include/stackhouse}
  mkdir -p "$t"/{tests,tools,build}
  # core/base/a.c: f71 is 71 lines from its brace; g has a three-line
  # signature and 70 lines from its brace (72 from its name), braces in a
  # comment, a string and a character, and an #if whose branches each open
  # a brace; a long initializer at file scope is no function.
  { printf 'int f71(void) {\n'; lines 69; printf '}\n'
    printf 'static int g(int a,\n             int b,\n             int c) {\n'
    printf '  /* { */ char o = \047"\047, p = \047{\047; const char *s = "}{\\""; if (o) { // {\n  }\n'
    printf '#ifdef SH_X\n  if (a) {\n#else\n  if (b) {\n#endif\n  }\n'
    lines 58
    printf '  SH_ASSERT(a); /* SH_ASSERT(b) */ (void)"SH_INVARIANT(c)";\n  return a;\n}\n'
    printf 'static const int table[] = {\n'; lines 80; printf '};\n'
  } > "$t/core/base/a.c"
  # core/mem/b.h (a folder two deep): a line of 101 columns, one of 100
  # columns in 104 bytes, the #define of an assertion macro (no use of it),
  # two uses in an inline function inside extern "C", and a macro over two
  # lines whose brace is no code, with a use.
  { printf '#define SH_DEBUG_ASSERT(c) SH_ASSERT(c)\n#ifdef __cplusplus\nextern "C" {\n#endif\n'
    printf 'static inline int h(int x) { SH_ASSERT(x); static_assert(1, ""); return x; }\n'
    printf '/* %s */\n' "$(printf '%095d' 0)"
    printf '/* %s\xe2\x80\x94\xe2\x80\x94 */\n' "$(printf '%092d' 0)"
    printf '#ifdef __cplusplus\n}\n#endif\n#define SH_OPEN(x) \\\n  { SH_ASSERT(x);\n'
  } > "$t/core/mem/b.h"
  # http/c.c: a folder the baseline lacks. tests/t.c: 501 lines, with a long
  # line and a long function, neither limited there. build/ is not read.
  printf 'void k(void) { SH_INVARIANT(1); }\n' > "$t/http/c.c"
  { printf 'void t(void) { /* %s */\n' "$(printf '%0110d' 0)"; lines 499; printf '}\n'; } > "$t/tests/t.c"
  lines 600 > "$t/build/big.c"
  : > "$t/include/stackhouse/api.h"
  # Rule 4 (core/actor, core/sched and below): big, 6 lines, has only an
  # assertion in a comment; small has 5 lines; g is one folder down; the
  # same function in core/actorx (another folder) and in the pending file
  # passes.
  { printf 'int big(int x) {\n  /* SH_ASSERT(x) */\n'; lines 3; printf '}\n'
    printf 'int small(int x) {\n'; lines 3; printf '}\n'; } > "$t/core/actor/d.c"
  sed 's/big/g/; /small/,$d' "$t/core/actor/d.c" > "$t/core/sched/sub/f.c"
  cp "$t/core/sched/sub/f.c" "$t/core/actorx/e.c"; cp "$t/core/actorx/e.c" "$t/core/sched/pend.c"
  # The baseline: core/base had 2 (has 1), core/mem had 1 (has 3: a note),
  # core/gone is gone, http is missing.
  { printf '# comment\ncore/base 2\ncore/mem 1\ncore/gone 3\ninclude/stackhouse 0\n'
    printf 'core/actor 0\ncore/actorx 0\ncore/sched 0\ncore/sched/sub 0\n'; } > "$t/$BASELINE"
  out=$(bash "$0" "$t"); rc=$?
  for want in '^core/base/a.c:1: function f71 is 71 lines' '^core/mem/b.h:6: 101 columns' \
              '^tests/t.c:501: 501 lines' \
              '^tools/tidy-assertions:2: core/base: 1 assertions.*baseline 2' \
              '^tools/tidy-assertions:4: core/gone: no library code' \
              '^tools/tidy-assertions:10: http: not in' \
              '^tools/tidy-assertions:3: note: core/mem: 3 assertions, baseline 1' \
              '^core/actor/d.c:1: function big has no assertion' \
              '^core/sched/sub/f.c:1: function g has no assertion'; do
    grep -q "$want" <<<"$out" ||
      { echo "self-test: broken tree: no line matching '$want' in:"; echo "$out"; return 1; }
  done
  [ "$rc" -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 9 ] ||
    { echo "self-test: broken tree: want exit 1 and 9 lines, got $rc:"; echo "$out"; return 1; }
  # Braces that do not balance are reported, not measured wrong.
  printf 'void u(void) {\n#if A\n  {\n#else\n  {{\n#endif\n}\n' > "$t/core/mem/u.c"
  out=$(bash "$0" "$t"); grep -q '^core/mem/u.c:7: braces do not balance' <<<"$out" ||
    { echo "self-test: unbalanced braces not reported:"; echo "$out"; return 1; }
  # The fixed tree: f71 a line shorter, the long line a column narrower, t.c
  # a line shorter, the baseline rewritten; --report gives each folder.
  rm "$t/core/mem/u.c"; sed -i '2d' "$t/core/base/a.c"; sed -i '6s/0 \*\//\*\//' "$t/core/mem/b.h"
  sed -i '$d' "$t/tests/t.c"; sed -i '$s/^  x++;$/}/' "$t/tests/t.c"
  sed -i '2s/.*/  SH_ASSERT(x);/' "$t/core/actor/d.c" "$t/core/sched/sub/f.c"
  out=$(bash "$0" --update-baseline "$t") ||
    { echo "self-test: --update-baseline failed: $out"; return 1; }
  want='core/actor 1 core/actorx 0 core/base 1 core/mem 3 core/sched 0 core/sched/sub 1 http 1 '
  [ "$(grep -v '^#' "$t/$BASELINE" | tr '\n' ' ')" = "${want}include/stackhouse 0 " ] ||
    { echo "self-test: bad baseline written:"; cat "$t/$BASELINE"; return 1; }
  out=$(bash "$0" --report "$t") || { echo "self-test: fixed tree failed:"; echo "$out"; return 1; }
  for want in '^core/base +1 +2 +1 +0\.50 +1$' '^core/mem +1 +1 +3 +3\.00 +3$' \
              '^include/stackhouse +1 +0 +0 +- +0$' '^all +8 +9 +7 +0\.78 +7$' \
              '^tidy: 8 library files, 9 functions \(longest 70 lines\), widest line 100 columns; ' \
              '; 9 C files \(largest 500 lines\); 7 assertions in 8 folders \(0\.78 per function\)'; do
    grep -Eq "$want" <<<"$out" ||
      { echo "self-test: fixed tree: no line matching '$want' in:"; echo "$out"; return 1; }
  done
  # A line of the baseline that is not "folder count" fails.
  echo 'core/base' >> "$t/$BASELINE"
  out=$(bash "$0" "$t") && { echo "self-test: a malformed baseline passed"; return 1; }
  grep -q '^tools/tidy-assertions:11: not a line "folder count"' <<<"$out" ||
    { echo "self-test: malformed baseline: $out"; return 1; }
  echo "self-test passed"
}

mode=check report=0
case "${1:-}" in
  --self-test) self_test; exit ;;
  --update-baseline) mode=update; shift ;;
  --report) report=1; shift ;;
  -*) echo "usage: $0 [--report | --update-baseline] [ROOT] | --self-test"; exit 2 ;;
esac
cd "${1:-$(dirname "$0")/..}" || exit 2

files=$(find . -path ./build -prune -o -path ./.git -prune -o -type f -name '*.[ch]' -print |
        sed 's|^\./||' | LC_ALL=C sort)

out=$(LC_ALL=C awk -v files="$files" -v lib="$LIB" -v maxfn=$MAX_FN -v maxcol=$MAX_COL \
      -v maxfile=$MAX_FILE -v base="$BASELINE" -v mode=$mode -v report=$report \
      -v adirs="$ASSERT_DIRS" -v minfn=$MIN_FN_ASSERT -v pending="$TIDY_ASSERT_PENDING" '
# The code of a line: comments dropped (incomment carries a /* */ over
# lines), strings and character literals emptied.
function strip(s,   out, c) {
  out = ""
  while (s != "") {
    if (incomment) {
      if (!(c = index(s, "*/"))) return out
      s = substr(s, c + 2); incomment = 0; out = out " "; continue
    }
    if (!match(s, /["\047\/]/)) return out s
    out = out substr(s, 1, RSTART - 1); c = substr(s, RSTART, 1); s = substr(s, RSTART + 1)
    if (c == "/") {
      if (substr(s, 1, 1) == "*") { incomment = 1; s = substr(s, 2); continue }
      if (substr(s, 1, 1) == "/") return out
      out = out "/"; continue
    }
    if (c == "\"" && match(s, /^([^"\\]|\\.)*"/)) {
      s = substr(s, RLENGTH + 1); out = out "\"\""; continue
    }
    if (c == "\047" && match(s, /^([^\047\\]|\\.)*\047/)) {
      s = substr(s, RLENGTH + 1); out = out "00"; continue
    }
    return out  # an unterminated literal (an apostrophe in an #error): not code
  }
  return out
}
function width(s,   w, i, n, c) {
  if (!index(s, "\t")) { gsub(/[\200-\277]/, "", s); return length(s) }
  n = length(s); w = 0
  for (i = 1; i <= n; i++) {
    c = substr(s, i, 1)
    if (c == "\t") w += 8 - w % 8; else if (c !~ /[\200-\277]/) w++
  }
  return w
}
# Text with __attribute__((...)), _Alignas(...) and alignas(...) taken out.
function noattr(p,   i, d, n, c) {
  while (match(p, /(__attribute__|_Alignas|alignas)[ \t]*\(/)) {
    i = RSTART + RLENGTH; d = 1; n = length(p)
    for (; i <= n && d > 0; i++) { c = substr(p, i, 1); if (c == "(") d++; else if (c == ")") d-- }
    p = substr(p, 1, RSTART - 1) " " substr(p, i)
  }
  return p
}
function isfunc(p) {
  p = noattr(p); gsub(/^[ \t]+|[ \t]+$/, "", p)
  return p ~ /\)$/ && !index(p, "=") && p ~ /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/
}
function fname(p) {
  p = noattr(p)
  if (!match(p, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) return "?"
  p = substr(p, RSTART, RLENGTH); sub(/[ \t]*\($/, "", p); return p
}
# A violation, kept until its file is done: they are printed by line.
function bad(f, n, what) {
  if (mode == "update") return
  vl[++nv] = n; vt[nv] = f ":" n ": " what; nbad++
}
function flush(   i, j, t) {
  for (i = 2; i <= nv; i++)
    for (j = i; j > 1 && vl[j - 1] > vl[j]; j--) {
      t = vl[j]; vl[j] = vl[j - 1]; vl[j - 1] = t; t = vt[j]; vt[j] = vt[j - 1]; vt[j - 1] = t
    }
  for (i = 1; i <= nv; i++) print vt[i]
  nv = 0
}
function add(s) {
  if (pending !~ /[^ \t]/ && s ~ /[^ \t]/) pline = ln
  pending = pending " " s
}
# Braces of one line of code (file scope is depth 0).
function braces(s, f,   c) {
  while (match(s, /[{};]/)) {
    c = substr(s, RSTART, 1)
    if (depth == 0) add(substr(s, 1, RSTART - 1))
    s = substr(s, RSTART + 1)
    if (c == "{") {
      if (depth == 0 && pending ~ /extern[ \t]*""[ \t]*$/) externc++
      else if (depth++ == 0 && isfunc(pending)) {
        infn = 1; fopen = ln; fline = pline; fn = fname(pending); fstart = filas - lineas
      }
    } else if (c == "}") {
      if (depth == 0) { if (externc > 0) externc--; else unbal = unbal ? unbal : ln }
      else if (--depth == 0 && infn) {
        infn = 0; nfn[dir]++; nfuncs++; len = ln - fopen + 1
        if (len > longest) longest = len
        if (len > maxfn) bad(f, fline, "function " fn " is " len " lines (at most " maxfn ")")
        if (len > minfn && mustassert && filas == fstart) bad(f, fline, "function " fn " has no assertion")
      }
    }
    if (depth == 0) pending = ""
  }
  if (depth == 0) add(s)
}
# Uses of the assertion macros in a line of code.
function asserts(s,   n) {
  n = 0
  while (match(s, "(^|[^A-Za-z0-9_])(" amacros "|_Static_assert)[ \t]*\\(")) {
    n++; s = substr(s, RSTART + RLENGTH)
  }
  return n
}
function scan(f, islib,   line, code, d, cont, defassert, i) {
  ln = 0; incomment = 0; depth = 0; npp = 0; externc = 0; pending = ""; infn = 0; unbal = 0
  cont = 0; defassert = 0; dir = f; sub(/\/[^\/]*$/, "", dir); filas = 0
  mustassert = 0
  for (i = 1; i <= nadir; i++) if (dir == adir[i] || index(dir, adir[i] "/") == 1) mustassert = 1
  if (f in pend) mustassert = 0
  if (islib) { nlib++; nfiles[dir]++; nfn[dir] += 0; nas[dir] += 0 }
  while ((getline line < f) > 0) {
    ln++
    if (!islib) continue
    if ((d = width(line)) > maxcol) bad(f, ln, d " columns (at most " maxcol ")")
    if (d > widest) widest = d
    code = strip(line)
    if (cont || code ~ /^[ \t]*#/) {  # a preprocessor line, or one it continues
      if (!cont) {
        d = code; sub(/^[ \t]*#[ \t]*/, "", d); sub(/[^a-z].*/, "", d)
        defassert = code ~ ("^[ \t]*#[ \t]*define[ \t]+(" amacros ")([^A-Za-z0-9_]|$)")
        if (d ~ /^if/) { ppd[++npp] = depth; ppelse[npp] = 0 }
        else if ((d == "else" || d == "elif") && npp > 0) {
          if (!ppelse[npp]) { ppend[npp] = depth; ppelse[npp] = 1 }
          depth = ppd[npp]
        } else if (d == "endif" && npp > 0) { if (ppelse[npp]) depth = ppend[npp]; npp-- }
      }
      if (!defassert) { lineas = asserts(code); nas[dir] += lineas; filas += lineas }
      cont = line ~ /\\$/
      continue
    }
    lineas = asserts(code); nas[dir] += lineas; filas += lineas
    braces(code, f)
  }
  close(f)
  if (ln > maxfile) bad(f, maxfile + 1, ln " lines (at most " maxfile "): split it by subject")
  if (ln > biggest) biggest = ln
  if (islib && (depth != 0 || unbal || externc != 0))
    bad(f, unbal ? unbal : ln, "braces do not balance (depth " depth " at the end): " \
        "tidy.sh cannot measure its functions")
  flush()
}
function ratio(a, n) { return n ? sprintf("%.2f", a / n) : "-" }
BEGIN {
  amacros = "SH_ASSERT|SH_DEBUG_ASSERT|SH_INVARIANT|static_assert"
  nadir = split(adirs, adir, " ")
  np = split(pending, pl, /[ \t\n]+/)
  for (i = 1; i <= np; i++) if (pl[i] != "") pend[pl[i]] = 1
  n = split(files, fl, "\n")
  for (i = 1; i <= n; i++) scan(fl[i], fl[i] ~ lib)
  for (d in nas) { dirs[++nd] = d; nasserts += nas[d] }
  for (i = 2; i <= nd; i++)
    for (j = i; j > 1 && dirs[j - 1] > dirs[j]; j--) { t = dirs[j]; dirs[j] = dirs[j - 1]; dirs[j - 1] = t }
  if (mode == "update") {
    print "# Assertions per folder of library code, which may only grow: tools/tidy.sh" > base
    print "# counts them (docs/style.md); tools/tidy.sh --update-baseline rewrites this." > base
    for (i = 1; i <= nd; i++) print dirs[i], nas[dirs[i]] > base
    printf "tidy: %s rewritten: %d folders, %d assertions\n", base, nd, nasserts
    exit 0
  }
  nb = 0; upd = "tools/tidy.sh --update-baseline"
  while ((r = getline line < base) > 0) {
    nb++
    if (line ~ /^[ \t]*(#|$)/) continue
    if (split(line, w, " ") != 2 || w[2] !~ /^[0-9]+$/) { bad(base, nb, "not a line \"folder count\""); continue }
    d = w[1]; known[d] = w[2]; bsum += w[2]
    if (!(d in nas)) bad(base, nb, d ": no library code left (baseline " w[2] "): " upd)
    else if (nas[d] < w[2] + 0)
      bad(base, nb, d ": " nas[d] " assertions, fewer than the baseline " w[2] " (they may only grow)")
    else if (nas[d] > w[2] + 0)
      notes = notes sprintf("%s:%d: note: %s: %d assertions, baseline %d: raise it with %s\n",
                            base, nb, d, nas[d], w[2], upd)
  }
  if (r < 0) bad(base, 1, "missing: " upd " writes it")
  for (i = 1; i <= nd; i++) if (!((d = dirs[i]) in known))
    bad(base, nb + 1, d ": not in the baseline (" nas[d] " assertions): " upd)
  if (report) {
    fmt = "%-20s %5s %9s %10s %12s %8s\n"
    printf fmt, "folder", "files", "functions", "assertions", "per function", "baseline"
    for (i = 1; i <= nd; i++) { d = dirs[i]
      printf fmt, d, nfiles[d], nfn[d], nas[d], ratio(nas[d], nfn[d]), (d in known ? known[d] : "-")
    }
    printf fmt, "all", nlib, nfuncs, nasserts, ratio(nasserts, nfuncs), bsum + 0
  }
  flush(); printf "%s", notes
  if (nbad) exit 1
  printf "tidy: %d library files, %d functions (longest %d lines), widest line %d columns; ", nlib, nfuncs,
         longest, widest
  printf "%d C files (largest %d lines); %d assertions in %d folders (%s per function), none below the baseline\n",
         n, biggest, nasserts, nd, ratio(nasserts, nfuncs)
}'); rc=$?
[ -n "$out" ] && echo "$out"
exit $rc
