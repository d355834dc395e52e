#!/usr/bin/env bash
# A/B of this branch against main on a GPU machine: base = .ab_base (main), new = the working tree.
# Before the device call, here: rm -rf .ab_base && mkdir .ab_base && git archive main | tar -x -C .ab_base
# (untracked, so it travels with the tree). Then: bash ab.sh build $OUT; bash ab.sh test $OUT;
# bash ab.sh bench $OUT (each under 10 minutes).
# ab.sh build|test|bench OUT
set -uo pipefail
out=$2; mkdir -p "$out"
carry=(-DKVC_GTEST_SOURCE_DIR="$PWD/.carry/googletest" -DKVC_THIRD_PARTY_INCLUDE="$PWD/.carry/include")
case $1 in
build)
  (cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVCANARY_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 -DKVCANARY_BUILD_PYTHON=OFF "${carry[@]}" >"$out/cfg_new.log" 2>&1 &&
   cmake --build build/gpu -j 12 >"$out/build_new.log" 2>&1; echo "new build rc $?") &
  (cmake -S .ab_base -B build/ab_base -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVCANARY_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 -DKVCANARY_BUILD_PYTHON=OFF -DKVCANARY_BUILD_TESTS=OFF "${carry[@]}" >"$out/cfg_base.log" 2>&1 &&
   cmake --build build/ab_base -j 4 --target kvcanary_cli >"$out/build_base.log" 2>&1; echo "base build rc $?") &
  wait
  tail -3 "$out/build_new.log" "$out/build_base.log";;
test)
  ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 >"$out/gpu_tests.log" 2>&1; echo "gpu_tests rc $?"; tail -3 "$out/gpu_tests.log"
  ./build/gpu/tests/kvcanary_tests --gtest_brief=1 >"$out/cpu_tests.log" 2>&1; echo "kvcanary_tests rc $?"; tail -2 "$out/cpu_tests.log"
  ./build/gpu/tests/runtime/kvcanary_runtime_tests --gtest_brief=1 >"$out/runtime_tests.log" 2>&1; echo "runtime rc $?"; tail -2 "$out/runtime_tests.log"
  timeout 250 compute-sanitizer --tool memcheck --error-exitcode 1 ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
    --gtest_filter='*Fused*:*Differential*:*Sampl*-*CudaSpinWait*:*CudaJitterRace*' >"$out/memcheck.log" 2>&1; echo "memcheck rc $?"; tail -3 "$out/memcheck.log"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 1 ./build/gpu/tests/gpu/kvcanary_gpu_tests --gtest_brief=1 \
    --gtest_filter='*PlanStages*:*Bs1Shape0*:*Graph*' >"$out/racecheck.log" 2>&1; echo "racecheck rc $?"; tail -3 "$out/racecheck.log";;
bench)
  cases=${CASES:-decode-1,decode-64,decode-256,decode-1024,long-32,prefill-mixed,decode-256-paged,decode-64-k8,decode-256-k8,decode-1024-k8,long-32-k8,decode-256-k2,decode-1024-k2}
  for round in 1 2; do
    for v in base new; do
      bin=build/gpu/cli/kvcanary; [[ $v == base ]] && bin=build/ab_base/cli/kvcanary
      timeout 200 $bin bench --device cuda --cases "$cases" --json "$out/bench_${v}_$round.json" >"$out/bench_${v}_$round.log" 2>&1
      echo "bench $v $round rc $?"
    done
  done;;
esac
