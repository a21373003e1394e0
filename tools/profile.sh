#!/usr/bin/env bash
# Runs one benchmark under the gperftools CPU profiler and prints where the
# time went: `make profile BENCH=NAME [ARGS="..."]`, NAME a program under
# build/release/bench/ (e.g. pingpong, notice, savina/fib). The profile is
# left in build/profile/NAME.prof for pprof's other views. It installs
# google-perftools (for pprof) when missing, as root, the way tools/deps.sh
# installs packages; never run by `make test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

name=${1:?usage: tools/profile.sh NAME [bench args...]}
shift
bin=build/release/bench/$name
[[ -x $bin ]] || { echo "profile: no benchmark $bin (make benches)" >&2; exit 2; }

pprof=$(command -v google-pprof || command -v pprof || true)
if [[ -z $pprof ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "profile: pprof is missing: apt-get install google-perftools (as root)" >&2
    exit 2
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q google-perftools >/dev/null
  pprof=$(command -v google-pprof || command -v pprof)
fi
lib=$(ldconfig -p | awk '/libprofiler\.so\.0 /{print $NF; exit}')
[[ -n $lib ]] || { echo "profile: libprofiler.so.0 not found (tools/deps.sh installs it)" >&2; exit 2; }

prof=build/profile/${name//\//_}.prof
mkdir -p build/profile
# 1000 samples a second: the default 100 sees too little of a short run.
CPUPROFILE=$prof CPUPROFILE_FREQUENCY=1000 LD_PRELOAD=$lib "$bin" "$@"
echo "== $prof: the top functions by samples (flat, then cumulative)"
"$pprof" --text --nodecount=25 "$bin" "$prof" 2>/dev/null
