// The runtime's periodic and diagnostic log lines. Lines marked
// frozen are byte-identical to SGLang's because log tooling parses them.
#pragma once

#include <cstdint>
#include <string>

namespace kvcanary::runtime {

// Whether the stats logger stages at `outer_step` (after the phase-4 increment):
// period > 0, outer_step != 0 and outer_step % period == 0.
bool StatsDue(int64_t outer_step, int64_t period);

// Frozen INFO: "[canary] step=%d protected_tokens=%d sweep_passes=%d violations=%d
// launch_tags_active=%d/12" with the staged step, Σ slot_run_counters and write index, the sweep
// pass count at log time and the number of active tags.
std::string FormatStatsLine(int64_t step, int64_t protected_tokens, int64_t sweep_passes,
                            int64_t violations, int active_tags);

// Frozen INFO after a sweep: "[canary] sweep succeeded %d times (last_step=%d)".
std::string FormatSweepLine(int64_t sweep_passes, int64_t last_step);

// Frozen WARNING of the overflow warner: `skipped_steps` is its cumulative count.
std::string FormatOverflowSkippedLine(int64_t skipped_steps, int64_t verify_capacity);

// WARNING once per split step: `group_kind` is "FULL" or "SWA".
std::string FormatSplitWarning(int64_t verify_total, int64_t verify_capacity,
                               const std::string& group_kind, int64_t chunks);

}  // namespace kvcanary::runtime
