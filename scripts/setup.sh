#!/usr/bin/env bash
# Installs what kvcanary needs to build and test on Debian 12 (bookworm). Run as root, or as a
# user with sudo. Both README commands and .ci/run start here.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config  # toolchain
  googletest libgtest-dev                       # C++ tests
  libcli11-dev nlohmann-json3-dev               # the kvcanary command
  pybind11-dev python3-dev python3-numpy python3-pytest python3-torch  # Python binding
  python3-hypothesis                            # Python property tests
  clang libclang-rt-dev llvm  # fuzz targets: clang, libFuzzer (libclang_rt.fuzzer*.a), symbolizer
)

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
else
  as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "kvcanary: build dependencies installed"
