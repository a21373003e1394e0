# tools/mutagen.sh --self-test (sourced by it; make test runs it): the rules
# over a fixture tree, the patches applied to it, a sample's spread and a
# report of made-up results. No build, no fuzz: a second or so.

# The fixture: core/actor/fix.c (statement deletion on) and http/fix.h (off).
selftest_tree() {
  mkdir -p "$1/core/actor" "$1/http" || return 1
  cat > "$1/core/actor/fix.c" << 'EOF'
/* A fixture: "a < b" in a comment is no code. */
#define LESS(a, b) ((a) < (b))
static _Atomic int v;
int fix_a(int a, int *e) {
  int n = sh_atomic_load(&v, memory_order_seq_cst);
  sh_atomic_store(&v, n, memory_order_release);
  SH_YIELD("fix: a < b");
  /* look again */
  if (a < n) return 1;
  SH_ASSERT(a <= n && sh_atomic_load(&v, memory_order_acquire));
  if (sh_atomic_cas(&v, e, a, memory_order_seq_cst,
                    memory_order_seq_cst))
    a = a << 2;
  a = e->x >= 3 ? a : 0;
  n += sh_atomic_fetch_add(&v, 1, memory_order_acq_rel);
  return a > n;
}
EOF
  cat > "$1/http/fix.h" << 'EOF'
static inline int fix_h(int a) {
  g(a);
  return a >= 0;
}
EOF
}

# selftest_want FILE PATTERN WHAT: FILE has a line matching PATTERN.
selftest_want() {
  grep -qE -- "$2" "$1" && return 0
  echo "self-test: $3: no line matching '$2' in $1:"
  cat "$1"
  return 1
}

self_test() {
  local t got want p
  t=$(mktemp -d) || return 2
  trap 'rm -rf "$t"' RETURN
  selftest_tree "$t/tree" || return 1
  gen_tree "$t/tree" "$t/out" || { echo "self-test: generate failed"; return 1; }
  got=$(cut -f1 "$t/out/list.tsv" | LC_ALL=C sort | tr '\n' ' ')
  want="cas-fix-11 cmp-fix-14 cmp-fix-16 cmp-fix-9 cmp-fix_h-3 del-fix-14 del-fix-15 del-fix-6 "
  want+="order-fix-11 order-fix-12 order-fix-15-1 order-fix-15-2 order-fix-5 order-fix-6 recheck-fix-9 "
  [ "$got" = "$want" ] || { printf 'self-test: mutants\n  got  %s\n  want %s\n' "$got" "$want"; return 1; }
  for p in "$t"/out/patches/*.patch; do
    (cd "$t/tree" && git apply --check "$p") ||
      { echo "self-test: $(basename "$p") does not apply"; return 1; }
  done
  p=$t/out/patches
  selftest_want "$p/order-fix-5.patch" '^\+.*load\(&v, memory_order_acquire\)' "load weakened" &&
    selftest_want "$p/order-fix-6.patch" '^\+.*store\(&v, n, memory_order_relaxed\)' "store" &&
    selftest_want "$p/order-fix-11.patch" '^\+ +memory_order_acquire\)\)' "CAS failure order lowered" &&
    selftest_want "$p/order-fix-11.patch" '^\+.*memory_order_acq_rel,$' "CAS success order" &&
    selftest_want "$p/order-fix-15-2.patch" '^\+.*memory_order_release\);' "acq_rel to release" &&
    selftest_want "$p/cas-fix-11.patch" '^\+.*sh_atomic_store\(mg_p_, \(a\)' "CAS split" &&
    selftest_want "$p/recheck-fix-9.patch" '^\+  if \(0 && \(a < n\)\) return 1;' "re-check" &&
    selftest_want "$p/cmp-fix-14.patch" '^\+  a = e->x > 3' "comparison" &&
    selftest_want "$p/del-fix-15.patch" '^-  n \+= ' "deletion" || return 1
  # Blind to the memory model: the store's, the CAS failure's and acq_rel
  # to acquire; not the load's nor acq_rel to release.
  got=$(awk -F'\t' '$6 == "blind" { printf "%s ", $1 }' "$t/out/list.tsv")
  [ "$got" = "order-fix-6 order-fix-11 order-fix-12 order-fix-15-1 " ] ||
    { echo "self-test: blind mutants: $got"; return 1; }
  # A sample of 3 takes one of each of the first three rules.
  got=$(OUT=$t/out select_names 3 1 | cut -d- -f1 | tr '\n' ' ')
  [ "$got" = "order cas recheck " ] || { echo "self-test: sample of 3: $got"; return 1; }
  # A report of made-up results: 1 killed, 1 survived, 1 stillborn, 1 equivalent.
  mkdir -p "$t/out/results"
  printf 'cmp-fix-9\tkilled\t200\t100\t9.0\t8.0\t1 x s FAIL:crash\n' > "$t/out/results/cmp-fix-9"
  printf 'cmp-fix-14\tsurvived\t200\t200\t9.0\t8.0\t-\n' > "$t/out/results/cmp-fix-14"
  printf 'del-fix-6\tstillborn\t200\t0\t1.0\t1.0\tbuild failed\n' > "$t/out/results/del-fix-6"
  printf 'order-fix-5\tsurvived\t200\t200\t9.0\t8.0\t-\n' > "$t/out/results/order-fix-5"
  printf '# test\norder-fix-5\tno reader\n' > "$t/equiv"
  OUT=$t/out EQUIV=$t/equiv report > "$t/report" || { echo "self-test: report failed"; return 1; }
  selftest_want "$t/report" '^score: 1 / \(1 \+ 1\) = 50\.0%' "report: score" &&
    selftest_want "$t/report" '^  cmp-fix-14  core/actor/fix.c:14: ' "report: survivor" &&
    selftest_want "$t/report" '^  order-fix-5: no reader' "report: equivalent" &&
    selftest_want "$t/report" '^all +15 +4 +1 +1 +1 +1 +50%' "report: the totals" || return 1
  echo "mutagen self-test: 15 mutants of the fixture, each applies; sample and report as expected"
}
