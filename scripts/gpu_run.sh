#!/usr/bin/env bash
# The whole GPU run, in one command on a machine with an NVIDIA GPU (the H200 of the device tool):
# build with the CUDA backend, run the CPU suite, the GPU suite (differential tests, vectors, graph
# replay), compute-sanitizer memcheck and racecheck, and the CUDA bench. Logs go to OUT_DIR.
#
#   bash scripts/gpu_run.sh [OUT_DIR]        (default: $OUT, else /tmp/kvcanary-gpu)
#
# The GPU machine has no GoogleTest, CLI11 or nlohmann-json packages: `bash scripts/gpu_carry.sh`
# copies Debian's sources/headers into .carry/ (git-ignored) here, and the device call carries it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/kvcanary-gpu}}
mkdir -p "$out"
status=0
step() {  # step NAME COMMAND...: runs, logs to $out/NAME.log, records failure, prints a line
  local name=$1; shift
  local start=$SECONDS
  if "$@" >"$out/$name.log" 2>&1; then
    echo "PASS  $name ($((SECONDS - start)) s)"
  else
    echo "FAIL  $name ($((SECONDS - start)) s): see $name.log"; tail -n 30 "$out/$name.log"; status=1
  fi
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv \
  >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
step configure cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKVC_GTEST_SOURCE_DIR="$PWD/.carry/googletest" -DKVC_THIRD_PARTY_INCLUDE="$PWD/.carry/include"
step build cmake --build build/gpu -j "$(nproc)"
step cpu_tests ./build/gpu/tests/kvcanary_tests --gtest_brief=1
step gpu_tests ./build/gpu/tests/gpu/kvcanary_gpu_tests
# The sanitizers slow kernels 10-100x: memcheck takes the whole suite, racecheck (shared-memory
# hazards: the write and plan-offsets kernels) the vectors, graphs, strides and a few sweep cases.
step memcheck timeout 400 compute-sanitizer --tool memcheck --error-exitcode 1 \
  ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1
step racecheck timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 \
  ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
  --gtest_filter="${RACECHECK_FILTER:-*Vector*:*Graph*:*Stride*:*Scatter*:*PlanStages*:*Bs1Shape0*:*Bs33*Variant1}"
if [[ -x build/gpu/cli/kvcanary ]]; then
  step bench ./build/gpu/cli/kvcanary bench --device cuda --suite standard --json "$out/bench_cuda.json"
  cat "$out/bench.log"
fi
echo; grep -hE '^\[  (PASSED|FAILED)|tests? (ran|passed)|ERROR SUMMARY|RACECHECK SUMMARY' "$out"/*.log
exit $status
