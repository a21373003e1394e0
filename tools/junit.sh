#!/usr/bin/env bash
# JUnit XML for `make test`, which CI systems show as a test report: one file
# per test program or check, build/test-results/<group>/<name>.xml, each a
# <testsuite> of one <testcase> (its time; a <failure> with why and the tail
# of its log when it failed).
#
#   bash tools/junit.sh case DIR GROUP NAME SECONDS STATUS WHY [LOG]
#        writes DIR/GROUP/NAME.xml (STATUS 0: passed; WHY: why it failed)
#   bash tools/junit.sh collect DIR      every case in DIR as one <testsuites>, to stdout
#   bash tools/junit.sh check DIR        each file in DIR is well-formed XML (xmllint)
#   bash tools/junit.sh --self-test      a log with markup, control bytes and bad UTF-8
set -euo pipefail

LOG_LINES=200 # of a failing program's log, in its <failure>

# Text as XML character data: markup escaped; what XML 1.0 cannot hold
# (control bytes, bytes that are not UTF-8: a crash's output may have any)
# dropped.
xml_text() {
  iconv -c -f UTF-8 -t UTF-8 | tr -d '\000-\010\013\014\016-\037' |
    sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'
}

write_case() {
  local dir=$1 group=$2 name=$3 seconds=$4 status=$5 why=$6 log=${7:-}
  mkdir -p "$dir/$group"
  local out=$dir/$group/$name.xml failures=0
  [[ $status == 0 ]] || failures=1
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    printf '<testsuite name="%s/%s" tests="1" failures="%s" errors="0" skipped="0" time="%s">\n' \
      "$group" "$(printf %s "$name" | xml_text)" "$failures" "$seconds"
    printf '  <testcase classname="%s" name="%s" time="%s"' "$group" "$(printf %s "$name" | xml_text)" "$seconds"
    if [[ $status == 0 ]]; then
      echo '/>'
    else
      printf '>\n    <failure message="%s">' "$(printf %s "$why" | xml_text)"
      [[ -n $log && -f $log ]] && tail -n "$LOG_LINES" "$log" | xml_text
      printf '</failure>\n  </testcase>\n'
    fi
    echo '</testsuite>'
  } >"$out"
}

collect() {
  local dir=$1 f
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<testsuites name="make test">'
  while IFS= read -r f; do
    sed -e '1d' -e 's/^/  /' "$f"
  done < <(find "$dir" -mindepth 2 -name '*.xml' | sort)
  echo '</testsuites>'
}

check() {
  local dir=$1 n=0 f
  while IFS= read -r f; do
    xmllint --noout "$f" || { echo "junit: $f is not well-formed XML"; return 1; }
    n=$((n + 1))
  done < <(find "$dir" -name '*.xml' | sort)
  ((n > 0)) || { echo "junit: no report in $dir"; return 1; }
  echo "junit: $n well-formed reports in $dir"
}

self_test() {
  local t
  t=$(mktemp -d "${TMPDIR:-/tmp}/junit.XXXXXX")
  trap 'rm -rf "$t"' RETURN
  printf 'ok line\n<tag attr="x"> & </tag>\n\001\033[31mred\033[0m \377\376 caf\303\251\n' >"$t/log"
  write_case "$t/r" asan 'test_<x>' 3 1 'exit status 1 & "more"' "$t/log"
  write_case "$t/r" asan test_ok 1 0 ''
  check "$t/r" >/dev/null
  grep -q '&lt;tag attr=&quot;x&quot;&gt; &amp; &lt;/tag&gt;' "$t/r/asan/test_<x>.xml"
  grep -q 'café' "$t/r/asan/test_<x>.xml"
  collect "$t/r" >"$t/all.xml"
  xmllint --noout "$t/all.xml"
  [[ $(grep -c '<testcase ' "$t/all.xml") == 2 ]]
  echo "junit: self-test passed"
}

case ${1:-} in
  case) shift; write_case "$@" ;;
  collect) collect "$2" ;;
  check) check "$2" ;;
  --self-test) self_test ;;
  *) echo "usage: junit.sh case|collect|check|--self-test ..." >&2; exit 2 ;;
esac
