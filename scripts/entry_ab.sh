#!/usr/bin/env bash
# EXPERIMENT (branch cuda-pair, not main): the entry-check kernel variants of
# KVCANARY_EXPERIMENT_ENTRY in one binary - 0 today's kernel; 1 the fused row guessed from the
# entry count; 2 a paired launch deriving each entry once (2 entries a thread) + 1; 3 as 2 with
# registers for 3 blocks an SM; 4 paired with 4 entries, 2 blocks; 5 as 2 without 1.
#   bash scripts/entry_ab.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-$OUT}
mkdir -p "$out"
python_args=()
carry_args=(-DKVC_GTEST_SOURCE_DIR="$PWD/.carry/googletest" -DKVC_THIRD_PARTY_INCLUDE="$PWD/.carry/include")
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
start=$SECONDS
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVCANARY_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DKVCANARY_BUILD_PYTHON=OFF "${carry_args[@]}" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build/gpu -j "$(nproc)" --target kvcanary_gpu_tests kvcanary_runtime_tests kvcanary \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "built in $((SECONDS - start)) s"
variants=${VARIANTS:-0 1 2 3 4 5}
for v in $variants; do
  echo "== variant $v: differential, graph, fused-stage GPU tests; runtime CUDA tests"
  KVCANARY_EXPERIMENT_ENTRY=$v timeout 45 ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
    --gtest_filter='*Differential*:*Graph*:*FusedStage*' 2>&1 | tail -2
  KVCANARY_EXPERIMENT_ENTRY=$v timeout 30 ./build/gpu/tests/runtime/kvcanary_runtime_tests --gtest_brief=1 \
    --gtest_filter='*Cuda*' 2>&1 | tail -1
done
echo "tests done at $((SECONDS - start)) s"
cases=${CASES:-decode-1,decode-64,decode-256,decode-1024,long-32,decode-256-paged,decode-1024-k8,decode-256-k8,long-32-k8,decode-64-k8}
for rep in 1 2; do
  for v in $variants; do
    (( SECONDS - start > ${BUDGET_S:-470} )) && { echo "time budget spent before v$v r$rep"; break 2; }
    KVCANARY_EXPERIMENT_ENTRY=$v timeout ${BENCH_TIMEOUT:-75} ./build/gpu/cli/kvcanary bench --device cuda \
      --cases "$cases" --json "$out/bench_v${v}_r${rep}.json" > "$out/bench_v${v}_r${rep}.txt" 2>&1
    echo "v$v r$rep: exit $? at $((SECONDS - start)) s"
  done
done
python3 scripts/entry_ab_table.py "$out" | tee "$out/table.md"
for v in ${MEMCHECK_VARIANTS:-2 4}; do
  (( SECONDS - start > 560 )) && break
  echo "== variant $v under memcheck"
  KVCANARY_EXPERIMENT_ENTRY=$v timeout 40 compute-sanitizer --tool memcheck --error-exitcode 1 \
    ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
    --gtest_filter='*Differential*Bs33*:*Graph*:*FusedStage*-*CudaSpinWait*:*CudaJitterRace*' 2>&1 | tail -2
done
echo "memcheck done at $((SECONDS - start)) s"
