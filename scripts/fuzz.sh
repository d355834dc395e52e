#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: clang, ASan + UBSan) and runs every
# tests/fuzz/fuzz_*.cpp target over its seed corpus for a bounded time, two at a time. Fails on any
# crash, sanitizer report, leak, timeout or out-of-memory; prints the failing target's log and
# where the reproducer was written (docs/fuzzing.md).
#
#   KVC_FUZZ_BUDGET    seconds of fuzzing in all, split evenly over the targets (default 200)
#   KVC_FUZZ_SECONDS   seconds per target instead of the split
#   KVC_FUZZ_JOBS      targets run at once (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."

# A new target takes its share of the budget rather than lengthening the stage.
targets=(tests/fuzz/fuzz_*.cpp)
budget=${KVC_FUZZ_BUDGET:-200}
seconds=${KVC_FUZZ_SECONDS:-$((budget / ${#targets[@]}))}
((seconds >= 1)) || seconds=1
jobs=${KVC_FUZZ_JOBS:-2}
work=${KVC_FUZZ_WORK:-$(mktemp -d -t kvc-fuzz.XXXXXX)}  # grown corpora, logs, reproducers

echo "== kvcanary: build the fuzz targets (preset 'fuzz')"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target kvc_fuzz_targets

# The CPU backend's threads add nothing here but scheduling noise.
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# Runs one target; its grown corpus stays in $work, the committed seeds are only read.
run_target() {
  local name=$1
  mkdir -p "${work}/${name}"
  if "build/fuzz/tests/fuzz/${name}" -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="${work}/${name}-" \
      "${work}/${name}" "tests/fuzz/corpus/${name}" >"${work}/${name}.log" 2>&1; then
    echo "fuzz: ${name}: ok, $(grep -o 'number_of_executed_units: [0-9]*' "${work}/${name}.log" |
      grep -o '[0-9]*') executions in ${seconds} s"
  else
    echo "fuzz: ${name}: FAILED (log ${work}/${name}.log; reproducer ${work}/${name}-*)"
    tail -n 60 "${work}/${name}.log"
    return 1
  fi
}

echo "== kvcanary: fuzz every target for ${seconds} s, ${jobs} at a time (work dir ${work})"
failed=0
running=0
for source in "${targets[@]}"; do
  run_target "$(basename "${source}" .cpp)" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
if ((failed)); then
  echo "fuzz: FAILED"
  exit 1
fi
echo "fuzz: every target ran clean"
