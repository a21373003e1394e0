#!/usr/bin/env bash
# Installs what stackhouse needs to build, test and measure itself on
# Debian 12 (or a close relative). Idempotent: when everything is there it
# prints one line and changes nothing; `apt-get update` runs only when a
# package is missing. Works on a bare system that has no compiler yet.
#
#   bash tools/deps.sh        (also run by `make deps`, `make test`, `make sim`)
set -euo pipefail

# parallel, jq, libxml2-utils (xmllint): tools/check_campaign.sh runs shsim's
# shards under GNU parallel and reads its JSON and JUnit output.
# libclang-rt-dev: clang's sanitizer runtimes. clang only recommends it, and
# --no-install-recommends would leave `make CC=clang test` unable to link.
# gcovr: `make coverage`'s Cobertura XML. cmake: the install check builds a
# CMake project against the install (and make install writes the package's
# version file with CMake's helper).
PACKAGES=(
  build-essential
  clang
  libclang-rt-dev
  pkg-config
  libcmocka-dev
  libfiu-dev
  fiu-utils
  lcov
  gcovr
  cmake
  libgoogle-perftools-dev
  coreutils
  parallel
  jq
  libxml2-utils
)

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: dpkg-query/apt-get not found: this script knows Debian only." >&2
  echo "deps: install by hand: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ $status != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done
# `timeout` runs every test program; it comes from coreutils.
if ! command -v timeout >/dev/null 2>&1 && [[ " ${missing[*]} " != *" coreutils "* ]]; then
  missing+=(coreutils)
fi

if ((${#missing[@]} == 0)); then
  echo "deps: all present"
  exit 0
fi

echo "deps: missing: ${missing[*]}"
install_cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
  as_root=(sudo -n)
else
  echo "deps: not root and no password-less sudo; run this as root:" >&2
  echo "  $install_cmd" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"

still=()
for pkg in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || still+=("$pkg")
done
if ((${#still[@]} > 0)); then
  echo "deps: still missing after apt-get: ${still[*]}" >&2
  exit 1
fi
echo "deps: installed ${missing[*]}"
