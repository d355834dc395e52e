#!/usr/bin/env bash
# Builds kvcanary twice and runs every test: the default build (with the CUDA backend compiled when
# nvcc is present; GPU tests skip without a device) and an AddressSanitizer + UBSan build. Then the
# pip-installed Python package's tests (scripts/check_pip.sh) and the fuzz stage: the libFuzzer
# targets built with clang, each run for a bounded time (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

for preset in default asan; do
  echo "== kvcanary: build and test, preset '${preset}'"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}"
  ctest --preset "${preset}" --parallel 2
done

# The Python package as a user installs it (pip from python/), its tests run against that copy.
bash scripts/check_pip.sh

bash scripts/fuzz.sh
