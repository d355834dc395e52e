// Never blind (R1 in docs/ARCHITECTURE.md): when a step's verify entries exceed the plan capacity,
// SGLang skips the step's verify; kvcanary cuts the batch into row ranges that fit and verifies
// each range outside the graph, so every prefix record is still checked.
#include <algorithm>

#include "kvcanary/error.h"
#include "runtime/canary_impl.h"

namespace kvcanary::runtime {
namespace {

// At most how many of `length` positions a sampled verify of 1/K checks, whatever its phase: the
// range touches at most ceil(length / R) + 1 runs of R = kVerifySampleRun, every K-th of them is
// checked whole, and the newest position.
int64_t SampledCountBound(int64_t length, int64_t sample) {
  if (sample <= 1) return length;
  const int64_t runs = (length + kVerifySampleRun - 1) / kVerifySampleRun + 1;
  return std::min(length, (runs + sample - 1) / sample * kVerifySampleRun + 1);
}

}  // namespace

void CanaryManager::Impl::DecideSplit(ForwardState& forward) {
  for (ForwardState::PerGroup& per_group : forward.groups) per_group.split = false;
  // A path without per-entry plans cannot overflow: every step is verified in the graph.
  if (!verify_path_->CanOverflow()) return;
  const ForwardHostInput& host = forward.host;
  const int64_t capacity = capacities_.verify_capacity;
  const int64_t rows = static_cast<int64_t>(host.req_pool_indices.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    ForwardState::PerGroup& per_group = forward.groups[g];
    per_group.split = false;
    per_group.split_ranges.clear();
    const int64_t window = groups_[g].window;
    // The count the plan op makes: the last W prefix positions with a window, else all; with
    // sampled verify a bound for any phase (the phase lives on the device): a range that fits
    // under it fits whichever 1/K the plan samples.
    auto verify_len = [&](int64_t r) -> int64_t {
      if (host.req_pool_indices[r] == kReqPoolIdxPadding) return 0;
      const int64_t p = std::max<int64_t>(host.prefix_lens[r], 0);
      return SampledCountBound(window > 0 ? std::min(p, window) : p, config_.verify_sample);
    };
    int64_t total = 0;
    for (int64_t r = 0; r < rows; ++r) total += verify_len(r);
    if (total <= capacity) continue;
    per_group.split = true;
    per_group.split_total = total;
    int64_t begin = 0;
    int64_t range_total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t len = verify_len(r);
      if (range_total + len > capacity && r > begin) {
        per_group.split_ranges.emplace_back(begin, r);
        begin = r;
        range_total = 0;
      }
      range_total += len;
    }
    per_group.split_ranges.emplace_back(begin, rows);
    Log(LogLevel::kWarning,
        FormatSplitWarning(total, capacity, GroupKindName(groups_[g].spec.kind),
                           static_cast<int64_t>(per_group.split_ranges.size())));
    stats_.split_steps += 1;
  }
}

void CanaryManager::Impl::RunHeadSplitVerify() {
  bool any_split = false;
  for (int i = 0; i < step_.num_forwards; ++i) {
    for (const ForwardState::PerGroup& per_group : forwards_[i].groups) {
      any_split = any_split || per_group.split;
    }
  }
  // PRE_HEAD precedes every HEAD verify: the ranges' verifies here (once per step, outside any
  // graph) as well as the in-graph one, which PreForward launches after its own PRE_HEAD spin.
  if (any_split) Jitter(JitterPoint::kPreHead);
  for (int i = 0; i < step_.num_forwards; ++i) RunSplitVerify(forwards_[i], Stage::kHead);
}

void CanaryManager::Impl::RunSplitVerify(ForwardState& forward, Stage stage) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ForwardState::PerGroup& per_group = forward.groups[g];
    if (!per_group.split) continue;
    for (const auto& [begin, end] : per_group.split_ranges) {
      // Reuses the forward's plan memory: in stream order the in-graph plan overwrites it later
      // (HEAD split) or has already been consumed (TAIL split).
      Plan(PlanArgsOf(forward, g, begin, end), stream_);
      VerifyGroup(g, stage, per_group.verify_plan, config_.enable_verify_token_assert);
    }
  }
}

}  // namespace kvcanary::runtime
