#!/usr/bin/env bash
# Copies what the GPU machine lacks into .carry/ (git-ignored): Debian's GoogleTest sources and the
# header-only CLI11 and nlohmann-json. Run on a Debian machine after scripts/setup.sh, then copy the
# repository with .carry/ to a GPU machine that lacks those packages: scripts/gpu_run.sh uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .carry && mkdir -p .carry/include
cp -r /usr/src/googletest .carry/googletest
cp -r /usr/include/CLI /usr/include/nlohmann .carry/include/
du -sh .carry
