#!/usr/bin/env bash
# EXPERIMENT (untracked): build, correctness of every entry-check variant, bench A/B, ncu.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-$OUT}
GPU_RUN_SKIP="${SKIP_EXTRA:-} python_tests torch_engine_cuda torch_engine_cuda_off memcheck racecheck vectors_memcheck vectors_racecheck runtime_memcheck bench bench_layers" \
  GPU_RUN_SCENARIOS="${SCEN:-default}" bash scripts/gpu_run.sh "$out/run" > "$out/gpu_run.txt" 2>&1
tail -40 "$out/gpu_run.txt"
cases=${CASES:-decode-1,decode-64,decode-256,decode-1024,long-32,decode-256-paged,decode-1024-k8}
for v in ${VARIANTS:-0 1 2 3 4}; do
  echo "== variant $v differential"
  KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_PDL=0 timeout 200 ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
    --gtest_filter='*Differential*:*Graph*' 2>&1 | tail -3
done
for rep in 1 2; do
  for combo in ${COMBOS:-0,0 0,1 1,0 1,1 2,1 3,1 4,1}; do
    v=${combo%,*}; pdl=${combo#*,}
    echo "== entry variant $v pdl $pdl bench rep $rep"
    KVCANARY_EXPERIMENT_ENTRY=$v KVCANARY_EXPERIMENT_PDL=$pdl ./build/gpu/cli/kvcanary bench --device cuda \
      --cases "$cases" --json "$out/bench_v${v}_p${pdl}_r${rep}.json" > "$out/bench_v${v}_p${pdl}_r${rep}.txt" 2>&1
    tail -2 "$out/bench_v${v}_p${pdl}_r${rep}.txt" | head -1
  done
done
python3 scripts/entry_ab_table.py "$out"
for v in ${NCU_VARIANTS:-0 1}; do
  KVCANARY_EXPERIMENT_ENTRY=$v timeout 240 ncu --kernel-name regex:'EntryCheck.*Fused' --launch-skip 12 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats \
    ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1024 --reps 20 > "$out/ncu_v$v.txt" 2>&1
  grep -vE '^\s*$' "$out/ncu_v$v.txt" | grep -E 'Duration|Throughput|Hit Rate|Registers|Occupancy|Stall|Warp Cycles|Issued|Eligible|L1|L2|DRAM|Mem' | head -40
done
# Per-kernel durations of decode-1's launches (cold caches as the bench's rotation, clocks free).
KVCANARY_EXPERIMENT_ENTRY=1 timeout 240 ncu --metrics gpu__time_duration.sum,dram__bytes.sum,lts__t_sectors.sum \
  --clock-control none --cache-control all --launch-skip 0 --launch-count 400 \
  ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1 --reps 20 > "$out/ncu_decode1.txt" 2>&1
grep -E '^\s+[A-Za-z].*\(|gpu__time_duration' "$out/ncu_decode1.txt" | tail -60
