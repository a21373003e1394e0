#!/usr/bin/env bash
# Checks that every public header compiles on its own, as C11 and as C++17,
# with the project's warnings as errors: a header that needs another one
# included first, or that C++ cannot read (C's _Atomic, a C-only type), fails.
# Usage: tools/check_headers.sh INCLUDEDIR
#   INCLUDEDIR holds stackhouse/*.h (an install's include directory, or the
#   tree's include/). CC and CXX name the compilers (default cc, c++).
set -u -o pipefail

dir=${1:?usage: tools/check_headers.sh INCLUDEDIR}
[ -d "$dir/stackhouse" ] || { echo "check_headers: no $dir/stackhouse"; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

fail=0 n=0
for h in "$dir"/stackhouse/*.h; do
  name=stackhouse/$(basename "$h")
  # Twice in one unit: the include guard must hold as well.
  printf '#include <%s>\n#include <%s>\n' "$name" "$name" > "$tmp/t.c"
  cp "$tmp/t.c" "$tmp/t.cpp"
  for lang in c c++; do
    if [ $lang = c ]; then cmd=("${CC:-cc}" -std=c11 "$tmp/t.c")
    else cmd=("${CXX:-c++}" -std=c++17 "$tmp/t.cpp"); fi
    if ! out=$("${cmd[@]}" -I"$dir" -Wall -Wextra -Werror -fsyntax-only 2>&1); then
      echo "FAIL  $name as $lang: ${cmd[0]} ${cmd[1]}"
      printf '%s\n' "$out" | head -n 20 | sed 's/^/    | /'
      fail=$((fail + 1))
    fi
    n=$((n + 1))
  done
done
echo "check_headers: $n compilations of the headers in $dir/stackhouse, $fail failed"
[ "$fail" -eq 0 ]
