#include "kvcanary/runtime/stats.h"

#include "kvcanary/format.h"

namespace kvcanary::runtime {

bool StatsDue(int64_t outer_step, int64_t period) {
  return period > 0 && outer_step != 0 && outer_step % period == 0;
}

std::string FormatStatsLine(int64_t step, int64_t protected_tokens, int64_t sweep_passes,
                            int64_t violations, int active_tags) {
  return "[canary] step=" + std::to_string(step) +
         " protected_tokens=" + std::to_string(protected_tokens) +
         " sweep_passes=" + std::to_string(sweep_passes) +
         " violations=" + std::to_string(violations) +
         " launch_tags_active=" + std::to_string(active_tags) + "/" +
         std::to_string(kNumLaunchTags);
}

std::string FormatSweepLine(int64_t sweep_passes, int64_t last_step) {
  return "[canary] sweep succeeded " + std::to_string(sweep_passes) +
         " times (last_step=" + std::to_string(last_step) + ")";
}

std::string FormatOverflowSkippedLine(int64_t skipped_steps, int64_t verify_capacity) {
  return "kv-canary: per-forward verify skipped this step due to overflow (total=" +
         std::to_string(skipped_steps) + ", capacity=" + std::to_string(verify_capacity) +
         "); check ServerArgs / pool sizing";
}

std::string FormatSplitWarning(int64_t verify_total, int64_t verify_capacity,
                               const std::string& group_kind, int64_t chunks) {
  return "kv-canary: per-forward verify total=" + std::to_string(verify_total) +
         " exceeds capacity=" + std::to_string(verify_capacity) + " for group " + group_kind +
         "; verified outside the graph in " + std::to_string(chunks) + " chunks";
}

}  // namespace kvcanary::runtime
