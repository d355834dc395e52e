#!/usr/bin/env bash
# EXPERIMENT (on branch cuda-next, not main): the A/B of the entry-check kernel variants
# (KVCANARY_EXPERIMENT_ENTRY: 0 the previous kernel, 1 4 entries x 2 blocks/SM, 2 2x2, 3 2x3),
# programmatic dependent launches (KVCANARY_EXPERIMENT_PDL: 0 off, 1 on) and the offsets block's
# threads (KVCANARY_EXPERIMENT_OFFSETS: 1024, 512, 256), in one binary.
#   bash scripts/entry_ab.sh test  OUT   build; every GPU suite on the defaults; the differential and
#                                        graph tests on every variant; memcheck on the defaults
#   bash scripts/entry_ab.sh bench OUT   bench every combination twice, a table; ncu profiles
set -uo pipefail
cd "$(dirname "$0")/.."
phase=$1
out=${2:-$OUT}
if [[ $phase == test ]]; then
  GPU_RUN_SKIP="${SKIP_EXTRA:-} python_tests torch_engine_cuda torch_engine_cuda_off racecheck vectors_memcheck vectors_racecheck runtime_memcheck bench bench_layers" \
    GPU_RUN_SCENARIOS="${SCEN:-default quarantine}" bash scripts/gpu_run.sh "$out/run" > "$out/gpu_run.txt" 2>&1
  tail -32 "$out/gpu_run.txt"
  for combo in ${TEST_COMBOS:-0,0,1024 1,0,1024 2,1,512 3,1,256}; do
    IFS=, read -r v pdl offsets <<< "$combo"
    echo "== entry $v pdl $pdl offsets $offsets: differential, graph and runtime CUDA tests"
    export KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_PDL=$pdl KVCANARY_EXPERIMENT_OFFSETS=$offsets
    timeout 200 ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
      --gtest_filter='*Differential*:*Graph*:*FusedStage*' 2>&1 | tail -2
    timeout 100 ./build/gpu/tests/runtime/kvcanary_runtime_tests --gtest_brief=1 \
      --gtest_filter='*Cuda*' 2>&1 | tail -2
  done
  unset KVCANARY_EXPERIMENT_ENTRY KVCANARY_EXPERIMENT_PDL KVCANARY_EXPERIMENT_OFFSETS
  echo "== racecheck of the 512-thread offsets block (shared memory: the block scan)"
  KVCANARY_EXPERIMENT_OFFSETS=512 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 1 \
    ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
    --gtest_filter='*PlanStages*:*Bs33*Variant1:*Graph*-*CudaSpinWait*:*CudaJitterRace*' 2>&1 | tail -3
  exit 0
fi
cases=${CASES:-decode-1,decode-64,decode-256,decode-1024,long-32,decode-256-paged,decode-1024-k8,prefill-8k}
for rep in 1 2; do
  for combo in ${COMBOS:-0,0,1024 0,1,1024 1,0,1024 1,1,1024 2,1,1024 3,1,1024 1,1,512}; do
    IFS=, read -r v pdl offsets <<< "$combo"
    name="v${v}_p${pdl}_o${offsets}_r${rep}"
    KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_PDL=$pdl KVCANARY_EXPERIMENT_OFFSETS=$offsets \
      timeout ${BENCH_TIMEOUT:-60} ./build/gpu/cli/kvcanary bench --device cuda --cases "$cases" --json "$out/bench_$name.json" \
      > "$out/bench_$name.txt" 2>&1
    echo "$name: exit $?"
  done
done
python3 scripts/entry_ab_table.py "$out"
[[ ${ENTRY_AB_NCU:-1} == 1 ]] || exit 0
for v in ${NCU_VARIANTS:-0 1}; do
  KVCANARY_EXPERIMENT_ENTRY=$v timeout 120 ncu --kernel-name regex:'EntryCheck.*Fused' --launch-skip 12 \
    --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section Occupancy --section SchedulerStats \
    ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1024 --reps 20 > "$out/ncu_v$v.txt" 2>&1
  grep -E 'Duration|Throughput|Hit Rate|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Eligible' \
    "$out/ncu_v$v.txt" | head -20
done
# Per-kernel durations of decode-1's launches, averaged by kernel (cold caches as the bench's
# rotation, clocks free).
timeout 150 ncu --metrics gpu__time_duration.sum --clock-control none --cache-control all \
  --launch-count 1500 --print-summary per-kernel \
  ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1 --reps 20 > "$out/ncu_decode1.txt" 2>&1
grep -E 'Kernel|gpu__time_duration|^  [A-Za-z]' "$out/ncu_decode1.txt" | tail -40
