# shellcheck shell=bash disable=SC2154  # prog (and workers, mlog) are the caller's
# Debian packages a benchmark compares against, installed on demand: sourced
# by the scripts of bench/ that need peers (never by `make test`). As root,
# or through password-less sudo, apt-get installs what is missing (one
# `apt-get update` first); otherwise the caller hears which command to run.
#
#   ensure PKG    true once PKG is installed; false, with a note, if it
#                 cannot be. Notes start with "$prog: " (the caller sets prog).

installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true) == "install ok installed" ]]; }

as_root=()
root_ok() {
  [[ $(id -u) -eq 0 ]] && return 0
  command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1 && as_root=(sudo -n) && return 0
  return 1
}

updated=0
ensure() {
  installed "$1" && return 0
  if ! command -v apt-get >/dev/null 2>&1 || ! root_ok; then
    echo "$prog: $1 is missing and cannot be installed here; as root: apt-get install $1" >&2
    return 1
  fi
  echo "$prog: installing $1" >&2
  if ((updated == 0)); then
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || true
    updated=1
  fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "$1" >/dev/null 2>&1 || true
  installed "$1" || { echo "$prog: $1 did not install" >&2; return 1; }
}
