#!/usr/bin/env bash
# Checks that a shared library exports exactly the API its public headers
# declare: a symbol exported but not declared is an internal function any
# program can link against (and then breaks when it changes); one declared
# but not exported is a link error waiting for the first program to use it.
# Usage (from the repository root; CC names the compiler, default cc):
#   tools/check_exports.sh LIB.so HEADER...
#   tools/check_exports.sh --self-test
# Exported: `nm -D --defined-only`, functions and data (T/D/R/B and their
# weak or small-data kinds), without the linker's own (_init, _end, ...).
# Declared: the headers after `$CC -E -Iinclude`, at file scope, in files
# under include/stackhouse/: functions that are not static and extern
# objects (e.g. `extern const sh_msg_type sh_args_type` from
# SH_MSG_DECLARE). Bodies (static inline functions, struct definitions) and
# typedefs declare nothing the library exports.
set -u -o pipefail

exported() {
  nm -D --defined-only "$1" | awk '$2 ~ /^[TDRBGSVWiu]$/ { sub(/@.*/, "", $3); print $3 }' |
    { grep -vxE '_init|_fini|_edata|_end|_etext|__bss_start|__data_start'; [ $? -le 1 ]; } | LC_ALL=C sort -u
}

# Reads the preprocessed headers character by character, keeping only the
# text at brace depth 0 (a body is kept as "{}"); each `;` at depth 0 ends a
# declaration, and so does the `}` of a function definition.
declared() {
  "${CC:-cc}" -E -Iinclude "$@" | awk '
    function strip_attributes(s,   i, j, d) {
      while ((i = index(s, "__attribute__")) > 0) {
        j = i + 13; d = 0
        while (j <= length(s)) { c = substr(s, j, 1); j++
          if (c == "(") d++; else if (c == ")" && --d == 0) break }
        s = substr(s, 1, i - 1) " " substr(s, j)
      }
      return s
    }
    # Prints the names a file-scope declaration gives the linker, if any.
    function declaration(s,   p, n, parts, i, name) {
      s = strip_attributes(s)
      gsub(/__extension__|__asm__[ \t]*\([^)]*\)/, " ", s)
      if (s ~ /^[ \t]*(typedef|static|_Static_assert)[^A-Za-z0-9_]/) return
      if ((p = index(s, "(")) > 0 && substr(s, p) !~ /^\([ \t]*\*/) {
        # A function: the name just before the first parenthesis.
        name = substr(s, 1, p - 1); sub(/[ \t]+$/, "", name); sub(/.*[^A-Za-z0-9_]/, "", name)
        if (name != "") print name
        return
      }
      if (s !~ /^[ \t]*extern[^A-Za-z0-9_]/) return
      # Objects, one per declarator: the last name before any array bounds
      # or initialiser; a pointer to function `(*name)(...)` names its own.
      n = split(s, parts, ",")
      for (i = 1; i <= n; i++) {
        name = parts[i]
        if (match(name, /\([ \t]*\*[ \t]*[A-Za-z_][A-Za-z0-9_]*/)) name = substr(name, RSTART, RLENGTH)
        sub(/[=[].*/, "", name); sub(/[ \t]+$/, "", name); sub(/.*[^A-Za-z0-9_]/, "", name)
        if (name != "") print name
      }
    }
    /^# [0-9]+ "/ { ours = $0 ~ /"([^"]*\/)?include\/stackhouse\/[^"]*"/; next }
    !ours { next }
    {
      line = $0 " "
      gsub(/"([^"\\]|\\.)*"/, "\"\"", line); gsub(/\047([^\047\\]|\\.)*\047/, "0", line)
      for (k = 1; k <= length(line); k++) {
        c = substr(line, k, 1)
        if (c == "{") { if (depth++ == 0) stmt = stmt "{" }
        else if (c == "}") {
          # A definition (static inline) declares nothing the library exports.
          if (--depth == 0) { stmt = stmt "}"; if (stmt ~ /\)[ \t]*\{\}$/) stmt = "" }
        }
        else if (depth == 0) { if (c == ";") { declaration(stmt); stmt = "" } else stmt = stmt c }
      }
    }' | LC_ALL=C sort -u
}

check() {
  local lib=$1 exp dec extra missing; shift
  [ -f "$lib" ] || { echo "check_exports: no library $lib"; return 2; }
  exp=$(exported "$lib") && dec=$(declared "$@") || { echo "check_exports: nm or ${CC:-cc} -E failed"; return 2; }
  extra=$(LC_ALL=C comm -23 <(echo "$exp") <(echo "$dec") | grep .)
  missing=$(LC_ALL=C comm -13 <(echo "$exp") <(echo "$dec") | grep .)
  echo "exports: $(grep -c . <<<"$exp") symbols exported by $lib, $(grep -c . <<<"$dec") declared by $*"
  [ -z "$extra" ] || { echo "exported but not declared ($(wc -l <<<"$extra")):"; sed 's/^/  /' <<<"$extra"; }
  [ -z "$missing" ] || { echo "declared but not exported ($(wc -l <<<"$missing")):"; sed 's/^/  /' <<<"$missing"; }
  [ -z "$extra$missing" ]
}

# A tiny library whose header has each kind of declaration the parser must
# tell apart; built broken (t_extra exported, t_ok missing) and then fixed.
self_test() {
  local t out
  t=$(mktemp -d) || return 2
  trap 'rm -rf "$t"' RETURN
  mkdir -p "$t/include/stackhouse"
  cat > "$t/include/stackhouse/t.h" <<'EOF'
#include <stdbool.h>
typedef struct t_type { const char *name; void (*drop)(void *p); } t_type;
#define T_DECLARE(T) extern const t_type T##_type
T_DECLARE(t_args);
int t_open(const char *name, void (*cb)(int fd));
__attribute__((warn_unused_result)) bool t_ok(void);
extern int (*t_hook)(int), t_count[4];
static inline int t_twice(int x) { if (x > 0) { return 2 * x; } return "}"[0] - '}'; }
typedef int (*t_fn)(int x);
enum { T_A = 1 };
EOF
  cat > "$t/t.c" <<'EOF'
#include <stackhouse/t.h>
const t_type t_args_type = { "args", 0 };
int (*t_hook)(int);
int t_count[4];
int t_open(const char *name, void (*cb)(int fd)) { (void)name; (void)cb; return 0; }
#ifdef BROKEN
int t_extra(void) { return 1; }
#else
bool t_ok(void) { return true; }
#endif
EOF
  (cd "$t" && "${CC:-cc}" -shared -fPIC -Iinclude -DBROKEN t.c -o broken.so && "${CC:-cc}" -shared -fPIC -Iinclude t.c -o fixed.so) ||
    { echo "self-test: cannot build the test libraries"; return 1; }
  out=$(cd "$t" && check broken.so include/stackhouse/t.h) &&
    { echo "self-test: the broken library passed:"; echo "$out"; return 1; }
  [[ $out == *$'exported but not declared (1):\n  t_extra\ndeclared but not exported (1):\n  t_ok' ]] ||
    { echo "self-test: wrong report for the broken library:"; echo "$out"; return 1; }
  out=$(cd "$t" && check fixed.so include/stackhouse/t.h) ||
    { echo "self-test: the fixed library failed:"; echo "$out"; return 1; }
  echo "self-test passed"
}

if [ "${1:-}" = --self-test ]; then self_test; exit; fi
[ $# -ge 2 ] || { echo "usage: $0 LIB.so HEADER... | --self-test"; exit 2; }
check "$@"
