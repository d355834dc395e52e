#!/usr/bin/env bash
# An A/B of CUDA changes on a GPU machine: the working tree ("new") against other commits, built
# side by side and benched alternately in one process tree, so every variant sees the same card,
# clocks and neighbours (the only comparison worth making: timings move between machines).
#
#   bash scripts/gpu_ab.sh prepare REF [NAME]   here: REF's tree into .ab/NAME (default: base)
#   bash scripts/gpu_ab.sh build OUT            there: the variants' CLIs and new's GPU suite
#   bash scripts/gpu_ab.sh test OUT             new's GPU suite
#   bash scripts/gpu_ab.sh sanitize OUT         new's GPU suite under memcheck, a subset under racecheck
#   bash scripts/gpu_ab.sh bench OUT            each round runs every variant's bench once, in turn
#   bash scripts/gpu_ab.sh compare OUT          a median table of new and each variant (python3)
#
# .ab/ is git-ignored: name it in the device's carry list with .carry/. Settings: ROUNDS ("1 2"),
# CASES (the bench's --cases; default below), JOBS (new's build jobs, 12).
set -uo pipefail
cd "$(dirname "$0")/.."
action=${1:-}
out=${2:-}
carry=()
if [[ -d .carry ]]; then
  carry=(-DKVC_GTEST_SOURCE_DIR="$PWD/.carry/googletest" -DKVC_THIRD_PARTY_INCLUDE="$PWD/.carry/include")
fi
variants=()
for dir in .ab/*/; do [[ -d $dir ]] && variants+=("$(basename "$dir")"); done
cli_of() { [[ $1 == new ]] && echo build/gpu/cli/kvcanary || echo "build/ab_$1/cli/kvcanary"; }
configure() {  # configure SOURCE BUILD_DIR EXTRA...
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVCANARY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DKVCANARY_BUILD_PYTHON=OFF "${carry[@]}" "${@:3}"
}
gpu_tests=./build/gpu/tests/gpu/kvcanary_gpu_tests
# Timed tests measure a spin's length, which a sanitizer's serialised launches change.
untimed='-*CudaSpinWait*:*CudaJitterRace*'

case $action in
prepare)
  name=${3:-base}
  [[ -n $out ]] || { echo "usage: $0 prepare REF [NAME]" >&2; exit 2; }
  rm -rf ".ab/$name" && mkdir -p ".ab/$name" && git archive "$out" | tar -x -C ".ab/$name" &&
    echo ".ab/$name: $(git rev-parse --short "$out")";;
build)
  mkdir -p "$out"
  (configure . build/gpu >"$out/configure_new.log" 2>&1 &&
     cmake --build build/gpu -j "${JOBS:-12}" --target kvcanary_cli kvcanary_gpu_tests \
       >"$out/build_new.log" 2>&1
   echo "build new: rc $?") &
  for v in "${variants[@]}"; do
    (configure ".ab/$v" "build/ab_$v" -DKVCANARY_BUILD_TESTS=OFF >"$out/configure_$v.log" 2>&1 &&
       cmake --build "build/ab_$v" -j 4 --target kvcanary_cli >"$out/build_$v.log" 2>&1
     echo "build $v: rc $?") &
  done
  wait;;
test)
  mkdir -p "$out"
  $gpu_tests --gtest_brief=1 >"$out/gpu_tests.log" 2>&1; echo "gpu_tests: rc $?"; tail -n 2 "$out/gpu_tests.log";;
sanitize)
  mkdir -p "$out"
  timeout 250 compute-sanitizer --tool memcheck --error-exitcode 1 $gpu_tests \
    --gtest_brief=1 --gtest_filter="*Fused*:*Differential*:*Sampl*$untimed" >"$out/memcheck.log" 2>&1
  echo "memcheck: rc $?"; tail -n 2 "$out/memcheck.log"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 1 $gpu_tests \
    --gtest_brief=1 --gtest_filter="*PlanStages*:*Bs1Shape0*:*Graph*$untimed" >"$out/racecheck.log" 2>&1
  echo "racecheck: rc $?"; tail -n 2 "$out/racecheck.log";;
bench)
  mkdir -p "$out"
  cases=${CASES:-decode-1,decode-64,decode-256,decode-1024,long-32,prefill-mixed,decode-256-paged,decode-64-k8,decode-256-k8,decode-1024-k8,long-32-k8,decode-256-k2,decode-1024-k2}
  for round in ${ROUNDS:-1 2}; do
    for v in "${variants[@]}" new; do
      timeout 200 "$(cli_of "$v")" bench --device cuda --cases "$cases" \
        --json "$out/bench_${v}_$round.json" >"$out/bench_${v}_$round.log" 2>&1
      echo "bench $v round $round: rc $? at ${SECONDS} s"
    done
  done;;
compare)
  python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
parts = ("fused_verify", "step", "planned_step", "stored_step")  # an older bench has no stored_step
def medians(variant):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, f"bench_{variant}_*.json"))):
        for case in json.load(open(path))["cases"]:
            row = runs.setdefault((case["case"], case["real_kv"]), {p: [] for p in parts})
            for p in parts:
                if p in case: row[p].append(case[p]["median_us"])
    return {k: {p: statistics.median(v) for p, v in row.items() if v} for k, row in runs.items()}
names = sorted({os.path.basename(p).split("_")[1] for p in glob.glob(os.path.join(out, "bench_*_*.json"))})
new = medians("new")
for other in [n for n in names if n != "new"]:
    old = medians(other)
    print(f"\nnew against {other}: µs, the median of the rounds' medians")
    print("| case | real KV | fused verify | new | ratio | step | new | ratio | new / planned | "
          f"{other} stored / planned | new stored / planned |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    stored = lambda r: f"{r['stored_step'] / r['planned_step']:.3f}" if "stored_step" in r else "-"
    for key in [k for k in old if k in new]:
        a, b = old[key], new[key]
        print(f"| {key[0]} | {key[1]} | {a['fused_verify']:.2f} | {b['fused_verify']:.2f} | "
              f"{b['fused_verify'] / a['fused_verify']:.3f} | {a['step']:.1f} | {b['step']:.1f} | "
              f"{b['step'] / a['step']:.3f} | {b['step'] / b['planned_step']:.3f} | {stored(a)} | "
              f"{stored(b)} |")
PY
  ;;
*)
  sed -n 2,14p "$0"; exit 2;;
esac
