#!/usr/bin/env bash
# EXPERIMENT (on branch cuda-next, not main): the fused entry's row found from a guess
# (KVCANARY_EXPERIMENT_ROW=1, the default) against the plain binary search (0), in one binary.
#   bash scripts/entry_ab.sh OUT   build, GPU suite and memcheck, then the bench of both, twice
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-$OUT}
GPU_RUN_SKIP="sim_tests cpu_tests python_tests torch_engine_cuda torch_engine_cuda_off racecheck vectors_memcheck vectors_racecheck runtime_memcheck bench bench_layers" \
  GPU_RUN_SCENARIOS="default" bash scripts/gpu_run.sh "$out/run" > "$out/gpu_run.txt" 2>&1
tail -24 "$out/gpu_run.txt"
cases=${CASES:-decode-1,decode-64,decode-256,decode-1024,long-32,decode-256-paged,decode-1024-k8,long-32-k8}
for rep in 1 2; do
  for row in 0 1; do
    KVCANARY_EXPERIMENT_ROW=$row timeout 60 ./build/gpu/cli/kvcanary bench --device cuda \
      --cases "$cases" --json "$out/bench_row${row}_r${rep}.json" > "$out/bench_row${row}_r${rep}.txt" 2>&1
    echo "row $row rep $rep: exit $?"
  done
done
python3 scripts/entry_ab_table.py "$out"
# Profiles: the fused verify of decode-1024 (where its time goes), and a decode-1 step's kernels.
timeout 60 ncu --kernel-name regex:'EntryCheck.*Fused' --launch-skip 12 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section Occupancy --section LaunchStats ./build/gpu/cli/kvcanary bench --device cuda \
  --cases decode-1024 --reps 20 > "$out/ncu_fused_decode1024.txt" 2>&1
grep -E 'Duration|Throughput|Hit Rate|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Eligible|Stall' \
  "$out/ncu_fused_decode1024.txt" | head -24
timeout 60 ncu --metrics gpu__time_duration.sum --launch-count 200 --print-summary per-kernel \
  ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1 --reps 20 > "$out/ncu_decode1.txt" 2>&1
grep -E '^  [A-Za-z_].*\(|gpu__time_duration' "$out/ncu_decode1.txt" | tail -40
