#!/usr/bin/env bash
# The shsim options of one entry of the Makefile's SIM_SWEEPS:
# "STRATEGY[:N]" -> nothing, or random's --switch-permille N, or the
# --pct-steps N of the strategies whose change points or delays fall in a
# span (pct, msgpct, delay).
set -u
sw=${1:?usage: tools/sweep-opt.sh STRATEGY[:N]}
st=${sw%%:*}
[ "$st" = "$sw" ] && exit 0
case $st in
random) echo "--switch-permille ${sw#*:}" ;;
pct | msgpct | delay) echo "--pct-steps ${sw#*:}" ;;
*) echo "tools/sweep-opt.sh: $st takes no :N" >&2; exit 2 ;;
esac
