#include "kvcanary/runtime/health.h"

#include <algorithm>
#include <string>

#include "kvcanary/error.h"

namespace kvcanary::runtime {

bool IsVTag(int tag) { return tag >= 0 && tag < kNumLaunchTags && tag % 2 == 1; }

bool IsSweepTag(int tag) {
  return tag == static_cast<int>(CanaryLaunchTag::kSweepKFull) ||
         tag == static_cast<int>(CanaryLaunchTag::kSweepVFull) ||
         tag == static_cast<int>(CanaryLaunchTag::kSweepKSwa) ||
         tag == static_cast<int>(CanaryLaunchTag::kSweepVSwa);
}

HealthChecker::HealthChecker(std::vector<int> active_tags, int64_t sweep_interval,
                             bool enable_mha_v)
    : active_tags_(std::move(active_tags)),
      sweep_interval_(sweep_interval),
      enable_mha_v_(enable_mha_v) {
  for (const int tag : active_tags_) {
    if (tag < 0 || tag >= kNumLaunchTags) {
      ThrowError("kv-canary: HealthChecker active tag must be in [0, ", kNumLaunchTags, "), got ",
                 tag);
    }
  }
  std::sort(active_tags_.begin(), active_tags_.end());
  active_tags_.erase(std::unique(active_tags_.begin(), active_tags_.end()), active_tags_.end());
}

bool HealthChecker::ShouldStage(int64_t outer_step) const {
  return outer_step >= kPeriod && outer_step % kPeriod == 0 && !active_tags_.empty();
}

std::vector<int> HealthChecker::ExpectedTags(bool sweep_ran_since_previous_check) const {
  // SGLang expects SWEEP tags whenever sweeps are on, which is a false alarm for intervals above
  // the check period; a sweep counter can only move if a pass ran (R4 in docs/ARCHITECTURE.md).
  const bool expect_sweep = sweep_interval_ > 0 && sweep_ran_since_previous_check;
  std::vector<int> expected;
  for (const int tag : active_tags_) {
    if (IsSweepTag(tag) && !expect_sweep) continue;
    if (IsVTag(tag) && !enable_mha_v_) continue;
    expected.push_back(tag);
  }
  return expected;
}

void HealthChecker::Drain(const std::array<int64_t, kNumLaunchTags>& counters,
                          int64_t outer_step, bool sweep_ran_since_previous_check) {
  ++checks_;
  std::string stalled;
  for (const int tag : ExpectedTags(sweep_ran_since_previous_check)) {
    if (counters[tag] - previous_[tag] != 0) continue;
    if (!stalled.empty()) stalled += ", ";
    stalled += LaunchTagName(tag);
  }
  // Remember the counters before raising: an engine that logs the error and keeps going must get
  // the next check's deltas against this one, not against stale values.
  previous_ = counters;
  if (!stalled.empty()) {
    ThrowError("kv-canary: kernel_run_counter did not increase since previous check for tags=[",
               stalled, "] at step=", outer_step, "; canary path is not executing");
  }
}

}  // namespace kvcanary::runtime
