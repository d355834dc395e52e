#!/usr/bin/env bash
# Installs what kvcanary needs to build and test on Debian 12 (bookworm). Run as root, or as a
# user with sudo. Both README commands and .ci/run start here; `sim` installs only what the
# quick build of the main job needs.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config  # toolchain
  googletest libgtest-dev                       # C++ tests
  libcli11-dev nlohmann-json3-dev               # the kvcanary command
  pybind11-dev python3-dev python3-numpy python3-pytest python3-torch  # Python binding
  python3-hypothesis python3-prometheus-client   # Python property tests; the runtime collector
  clang libclang-rt-dev llvm  # fuzz targets: clang, libFuzzer (libclang_rt.fuzzer*.a), symbolizer
)

# `setup.sh sim`: only what the main job's quick build (preset `sim`) needs.
if [[ ${1:-} == sim ]]; then
  packages=(build-essential cmake ninja-build libcli11-dev nlohmann-json3-dev)
elif [[ $# -gt 0 ]]; then
  echo "usage: bash scripts/setup.sh [sim]" >&2
  exit 2
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
else
  as_root=(sudo)
fi

# Idempotent: only what is missing is installed, so a second run takes a second.
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("${package}")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "kvcanary: build dependencies already installed (${#packages[@]} packages)"
  exit 0
fi

echo "kvcanary: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Another apt or dpkg run (unattended upgrades on a fresh machine) holds the dpkg lock: wait for it
# (up to 10 minutes) instead of failing.
apt_options=(-o DPkg::Lock::Timeout=600)
"${as_root[@]}" apt-get "${apt_options[@]}" update -q
"${as_root[@]}" apt-get "${apt_options[@]}" install -y --no-install-recommends "${missing[@]}"
echo "kvcanary: build dependencies installed"
