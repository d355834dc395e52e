#!/usr/bin/env bash
# The whole GPU run, in one command on a machine with an NVIDIA GPU: build with the CUDA backend,
# run the op suite (the published vectors on both backends), the GPU suite (differential tests,
# graph replay), the runtime suite (its CUDA tests: the step protocol on CUDA tensors and graph
# replay) and the simulator's unit tests, compute-sanitizer memcheck and racecheck, the CUDA bench,
# the PyTorch engine example on CUDA, and the simulator's scenarios (default, swa, offload, paged,
# eagle, mla, compressed, quarantine, jitter) on cuda and cpu, compared. Logs go to
# OUT_DIR; docs/gpu.md describes every step.
#
#   bash scripts/gpu_run.sh [OUT_DIR]        (default: $OUT, else /tmp/kvcanary-gpu)
#   GPU_RUN_PACK=1 bash scripts/gpu_run.sh DIR   (logs and JSON packed into DIR/gpu_run.tar.gz)
#   GPU_RUN_PROFILE=1 ...                        (also the ncu profiles: profile_* steps)
#   GPU_RUN_SKIP="bench racecheck" ...           (steps to skip, by name)
#   GPU_RUN_SCENARIOS="default swa" ...          (simulator scenarios; default: default swa offload paged
#                                                 eagle mla compressed, quarantine (the default with
#                                                 --on-violation quarantine), sampled (quarantine with
#                                                 --verify-sample 8) and jitter (with --jitter))
#
# GoogleTest, CLI11 and nlohmann-json come from the system, or from .carry/ when it exists: on a
# machine without those packages, `bash scripts/gpu_carry.sh` on a Debian machine copies them
# into .carry/ (git-ignored), to copy along with the repository.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/kvcanary-gpu}}
mkdir -p "$out"
status=0
results=()
step() {  # step NAME COMMAND...: runs, logs to $out/NAME.log, records failure, prints a line
  local name=$1; shift
  local start=$SECONDS line
  if [[ " ${GPU_RUN_SKIP:-} " == *" $name "* ]]; then
    results+=("SKIP  $name"); echo "SKIP  $name"; return
  fi
  if "$@" >"$out/$name.log" 2>&1; then
    line="PASS  $name ($((SECONDS - start)) s)"
    echo "$line"
  else
    line="FAIL  $name ($((SECONDS - start)) s): see $name.log"
    echo "$line"; tail -n 30 "$out/$name.log"; status=1
  fi
  results+=("$line")
}
# sim_compare CPU_JSON CUDA_JSON: the two reports agree on everything but the device and timings.
sim_compare() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def load(path):
    report = json.load(open(path))
    for scenario in report["scenarios"]:
        scenario.pop("device", None)
        scenario.pop("speed", None)
    return report
cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
if cpu != cuda:
    for a, b in zip(cpu["scenarios"], cuda["scenarios"]):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                print(f"{a.get('scenario')}: '{key}' differs:\n  cpu:  {str(a.get(key))[:400]}"
                      f"\n  cuda: {str(b.get(key))[:400]}")
    sys.exit(1)
print(f"{sys.argv[1]} and {sys.argv[2]} agree (device and speed aside)")
PY
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv \
  >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
# The machine's own python3 (with torch) and pip's pybind11 build the binding, when both are there.
python_args=()
if pybind11_dir=$(python3 -m pybind11 --cmakedir 2>/dev/null); then
  python_args=(-DPython3_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$pybind11_dir")
fi
# Copies of GoogleTest, CLI11 and nlohmann-json, when scripts/gpu_carry.sh made them.
carry_args=()
if [[ -d .carry ]]; then
  carry_args=(-DKVC_GTEST_SOURCE_DIR="$PWD/.carry/googletest"
              -DKVC_THIRD_PARTY_INCLUDE="$PWD/.carry/include")
fi
step configure cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVCANARY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 "${python_args[@]}" "${carry_args[@]}"
step build cmake --build build/gpu -j "$(nproc)"
step cpu_tests ./build/gpu/tests/kvcanary_tests --gtest_brief=1
step gpu_tests ./build/gpu/tests/gpu/kvcanary_gpu_tests
step runtime_tests ./build/gpu/tests/runtime/kvcanary_runtime_tests --gtest_brief=1
step sim_tests ./build/gpu/tests/sim/kvcanary_sim_tests --gtest_brief=1
# The Python binding on CUDA tensors (and torch.cuda.CUDAGraph capture), when it was built.
if [[ -d build/gpu/python/kvcanary ]]; then
  step python_tests env PYTHONPATH="$PWD/build/gpu/python" python3 -m pytest python/tests -q
  # The PyTorch engine example on CUDA: every injected fault caught, then the negative control.
  step torch_engine_cuda env PYTHONPATH="$PWD/build/gpu/python" python3 examples/torch_engine.py \
    --device cuda --faults all
  step torch_engine_cuda_off env PYTHONPATH="$PWD/build/gpu/python" \
    python3 examples/torch_engine.py --device cuda --canary off
fi
# The sanitizers slow kernels 10-100x: memcheck takes the whole suite, racecheck (shared-memory
# hazards: the write and plan-offsets kernels) the vectors, graphs, strides and a few sweep cases.
# Neither runs the spin-wait and jitter tests: they assert times and the overlap of two streams,
# which a sanitizer's slower, serialised launches change (runtime_memcheck below leaves out the
# runtime's timed jitter test, timed_runtime_test, for the same reason).
timed_tests="*CudaSpinWait*:*CudaJitterRace*"
timed_runtime_test="JitterRuntime.OnCudaEachStepSpinsForItsDraw"
step memcheck timeout 400 compute-sanitizer --tool memcheck --error-exitcode 1 \
  ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 --gtest_filter="-$timed_tests"
step racecheck timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 \
  ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
  --gtest_filter="${RACECHECK_FILTER:-*Graph*:*Stride*:*Scatter*:*PlanStages*:*Bs1Shape0*:*Bs33*Variant1}-$timed_tests"
# The published vectors run on both backends in kvcanary_tests: their CUDA instances under both
# sanitizers.
step vectors_memcheck timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 \
  ./build/gpu/tests/kvcanary_tests --gtest_brief=1 --gtest_filter='*/Cuda'
step vectors_racecheck timeout 200 compute-sanitizer --tool racecheck --error-exitcode 1 \
  ./build/gpu/tests/kvcanary_tests --gtest_brief=1 --gtest_filter='*/Cuda'
# The runtime on CUDA tensors: pinned mirrors, async copies, a captured graph with a memcpy node.
step runtime_memcheck timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
  ./build/gpu/tests/runtime/kvcanary_runtime_tests --gtest_brief=1 \
  --gtest_filter="*Cuda*-$timed_runtime_test"
if [[ -x build/gpu/cli/kvcanary ]]; then
  step bench ./build/gpu/cli/kvcanary bench --device cuda --suite standard --json "$out/bench_cuda.json"
  [[ -f "$out/bench.log" ]] && cat "$out/bench.log"
  # Every-layer fingerprints (32 layers) with and without sampled verify, in one run.
  step bench_layers ./build/gpu/cli/kvcanary bench --device cuda --fingerprint-layers 32 \
    --cases decode-256,decode-256-k8,decode-1024,decode-1024-k8,long-32,long-32-k8 \
    --json "$out/bench_layers_cuda.json"
  [[ -f "$out/bench_layers.log" ]] && cat "$out/bench_layers.log"
  # Profiles, when GPU_RUN_PROFILE=1 and ncu is there: the fused verify of decode-1024 (where a
  # verify's time goes: memory throughput, stalls, occupancy) and the GPU time of every kernel of
  # the decode-1 bench (a decode-1 step is a few dependent memory trips per kernel). Before its
  # cases the bench times the host cost of one-token calls: (3 warm-up + 20) samples of 200 calls
  # per op at --reps 20 (bench/call_cost.cpp), so the fused-verify profile skips those 4600
  # launches and takes the decode-1024 case's first one; the decode-1 summary includes them.
  if [[ ${GPU_RUN_PROFILE:-0} == 1 ]] && command -v ncu >/dev/null; then
    # ncu exits 0 when its filter matched no kernel: that is a failed step here.
    ncu_profile() {
      local log rc
      log=$(mktemp)
      timeout "$1" ncu "${@:2}" >"$log" 2>&1
      rc=$?
      cat "$log"
      grep -q 'No kernels were profiled' "$log" && rc=1
      rm -f "$log"
      return $rc
    }
    step profile_fused_verify ncu_profile 200 --kernel-name-base demangled \
      --kernel-name regex:'EntryCheckKernel.*FusedVerifyParams' --launch-skip 4600 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section Occupancy --section SchedulerStats --section LaunchStats \
      ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1024 --reps 20
    step profile_decode1 ncu_profile 300 --metrics gpu__time_duration.sum \
      --print-summary per-kernel ./build/gpu/cli/kvcanary bench --device cuda --cases decode-1 --reps 20
  fi
  # The simulator's scenarios on the GPU, and on the CPU for comparison (same seed: same report).
  # "quarantine" is the default scenario with --on-violation quarantine, "sampled" that with
  # --verify-sample 8 too; "jitter" the default with the timing-jitter fuzzer (on CUDA it shifts
  # the canary's launches; the report must not change).
  for scenario in ${GPU_RUN_SCENARIOS:-default swa offload paged eagle mla compressed quarantine sampled jitter}; do
    for device in cuda cpu; do
      args=(sim --device "$device" --progress off --json "$out/sim_${scenario}_${device}.json")
      case $scenario in
        default) ;;
        quarantine) args+=(--on-violation quarantine) ;;
        sampled) args+=(--verify-sample 8 --on-violation quarantine) ;;
        jitter) args+=(--jitter) ;;
        *) args+=(--scenario "$scenario") ;;
      esac
      step "sim_${scenario}_${device}" ./build/gpu/cli/kvcanary "${args[@]}"
    done
    step "sim_${scenario}_compare" sim_compare "$out/sim_${scenario}_cpu.json" \
      "$out/sim_${scenario}_cuda.json"
  done
fi
echo; (cd "$out" && grep -HE '^\[  (PASSED|FAILED)|tests? (ran|passed)|ERROR SUMMARY|RACECHECK SUMMARY|^(PASS|FAIL): ' ./*.log)
echo; printf '%s\n' "${results[@]}"
if [[ ${GPU_RUN_PACK:-0} == 1 ]]; then
  (cd "$out" && tar czf gpu_run.tar.gz --exclude=gpu_run.tar.gz -- * && \
    find . -maxdepth 1 -type f ! -name gpu_run.tar.gz -delete)
fi
exit $status
