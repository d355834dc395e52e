#!/usr/bin/env bash
# EXPERIMENT (branch cuda-pair, not main): kernel variants in one binary.
# KVCANARY_EXPERIMENT_ENTRY: 0 today's entry check; 1 the fused row guessed from the entry count;
# 2 a paired launch deriving each entry once (2 entries a thread) + 1; 3 as 2 with registers for 3
# blocks an SM; 4 paired with 4 entries, 2 blocks; 5 as 2 without 1.
# KVCANARY_EXPERIMENT_WRITE: 1 the write's first row seed loaded before the row count.
#   bash scripts/entry_ab.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-$OUT}
mkdir -p "$out"
carry_args=(-DKVC_GTEST_SOURCE_DIR="$PWD/.carry/googletest" -DKVC_THIRD_PARTY_INCLUDE="$PWD/.carry/include")
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
start=$SECONDS
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVCANARY_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DKVCANARY_BUILD_PYTHON=OFF "${carry_args[@]}" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build/gpu -j "$(nproc)" --target ${TARGETS:-kvcanary_gpu_tests kvcanary_runtime_tests kvcanary_cli} \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "built in $((SECONDS - start)) s"
test_combo() {  # test_combo E,W
  IFS=, read -r v w <<< "$1"
  echo "== entry $v write $w: differential, graph, fused-stage GPU tests; runtime CUDA tests ($((SECONDS - start)) s)"
  KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_WRITE=$w timeout 60 ./build/gpu/tests/gpu/kvcanary_gpu_tests \
    --gtest_brief=1 --gtest_filter='*Differential*:*Graph*:*FusedStage*:*Write*' 2>&1 | tail -3
  KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_WRITE=$w timeout 40 ./build/gpu/tests/runtime/kvcanary_runtime_tests \
    --gtest_brief=1 --gtest_filter='*Cuda*' 2>&1 | tail -2
}
for combo in ${FIRST_TESTS-2,1 4,1}; do test_combo "$combo"; done
cases=${CASES:-decode-1,decode-64,decode-256,decode-1024,long-32,decode-256-paged,decode-1024-k8,decode-256-k8,long-32-k8,decode-64-k8}
combos=${COMBOS:-0,0 2,1 1,0 3,1 4,1 2,0}
for rep in 1 2; do
  for combo in $combos; do
    IFS=, read -r v w <<< "$combo"
    (( SECONDS - start > ${BUDGET_S:-400} )) && { echo "time budget spent before $combo r$rep"; break 2; }
    KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_WRITE=$w timeout ${BENCH_TIMEOUT:-90} ./build/gpu/cli/kvcanary bench \
      --device cuda --cases "$cases" --json "$out/bench_v${v}w${w}_r${rep}.json" > "$out/bench_v${v}w${w}_r${rep}.txt" 2>&1
    echo "v$v w$w r$rep: exit $? at $((SECONDS - start)) s"
  done
done
python3 scripts/entry_ab_table.py "$out" | tee "$out/table.md"
for combo in ${LATER_TESTS-3,0 1,0 5,0}; do
  (( SECONDS - start > 500 )) && break
  test_combo "$combo"
done
for v in ${MEMCHECK_VARIANTS-2 4}; do
  (( SECONDS - start > 530 )) && break
  echo "== entry $v write 1 under memcheck"
  KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_WRITE=1 timeout 30 compute-sanitizer --tool memcheck --error-exitcode 1 \
    ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
    --gtest_filter='*Differential*Bs33*:*Graph*:*FusedStage*-*CudaSpinWait*:*CudaJitterRace*' 2>&1 | tail -2
done
echo "done at $((SECONDS - start)) s"
# Per-kernel GPU time of a decode-1 bench under ncu (the profile of the step's dependent trips).
if [[ ${NCU_DECODE1:-0} == 1 ]] && (( SECONDS - start < ${NCU_BEFORE_S:-380} )); then
  timeout ${NCU_TIMEOUT:-100} ncu --metrics gpu__time_duration.sum --print-summary per-kernel \
    ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1 --reps 20 > "$out/ncu_decode1.txt" 2>&1
  echo "ncu exit $? at $((SECONDS - start)) s"
  grep -E 'Kernel|gpu__time_duration' "$out/ncu_decode1.txt" | head -60
fi
