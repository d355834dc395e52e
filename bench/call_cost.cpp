// The host cost of one op call, on the smallest valid call (see call_cost.h).
#include "bench/call_cost.h"

#include <chrono>
#include <functional>

#include "bench/checks.h"
#include "bench/input_sets.h"
#include "bench/layout.h"
#include "bench/records.h"

namespace kvcanary::bench {
namespace {

// Calls per timed sample: enough that the clock's resolution vanishes, few enough that CUDA's
// launch queue never fills (a full queue would make the host wait for the device).
constexpr int kCallsPerSample = 200;
constexpr int kWarmupSamples = 3;

TimingStats TimeCalls(BenchDevice& device, int reps, const std::function<void()>& call) {
  std::vector<double> samples_us;
  for (int rep = -kWarmupSamples; rep < reps; ++rep) {
    device.Synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCallsPerSample; ++i) call();
    const auto stop = std::chrono::steady_clock::now();
    if (rep < 0) continue;
    samples_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count() /
                         kCallsPerSample);
  }
  device.Synchronize();
  return Summarize(std::move(samples_us));
}

}  // namespace

std::vector<CallCost> MeasureCallCosts(BenchDevice& device, const Pool& pool, const Suite& suite,
                                       Rng& rng, int reps) {
  const BenchCase one_token{.name = "call cost", .batch = 1, .prefix = 1, .extend = 1};
  const CaseLayout layout(suite, one_token, one_token.batch, rng);
  StoreRequestRows(pool, layout);
  const ValidRecordWriter writer(pool, layout);
  for (CanaryLaunchTag tag : {CanaryLaunchTag::kHeadKFull, CanaryLaunchTag::kHeadVFull,
                              CanaryLaunchTag::kTailKFull, CanaryLaunchTag::kTailVFull}) {
    writer.Run(tag, RealData::kNone);
  }
  std::vector<InputSet> sets = MakeInputSets(pool, layout, 1);
  BindMode(sets, pool, RealData::kNone);
  const InputSet& set = sets[0];
  const StreamHandle stream = device.stream();
  const int tail_k = StepTagIndex(CanaryLaunchTag::kTailKFull);

  std::vector<CallCost> costs;
  auto time = [&](const char* op, const std::function<void()>& call) {
    costs.push_back({op, TimeCalls(device, reps, call)});
  };
  time("plan", [&] { Plan(set.plan_args, stream); });
  time("offsets plan", [&] { Plan(set.offsets_plan_args, stream); });
  time("verify", [&] { Verify(set.verify_args[tail_k], stream); });
  time("fused verify", [&] { FusedVerify(set.fused_verify_args[tail_k], stream); });
  // The write rewrites the extend token's record with the same value on every call.
  time("write", [&] { Write(set.write_args[tail_k], stream); });
  CheckNoViolations(pool, "after the call-cost calls");
  return costs;
}

}  // namespace kvcanary::bench
