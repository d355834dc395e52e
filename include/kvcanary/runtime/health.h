// The health checker: catches "enabled but not running" — a forward path that
// bypasses the hooks, or a graph captured without the canary launches — by requiring every
// expected endpoint's kernel_run_counter to move between two checks.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kvcanary/format.h"

namespace kvcanary::runtime {

// The pure host half of the check: the runtime stages kernel_run_counters through a delayed read
// when ShouldStage() says so, and calls Drain() with the staged values one step later.
//
// Thread safety: none; the runtime calls it from phase 4 of its one driving thread.
// Invariants: previous_ holds the counters of the last drain (zeros before the first one), so the
// first check compares with zeros.
class HealthChecker {
 public:
  static constexpr int64_t kPeriod = 100;  // and the warm-up: the first check is staged at 100

  // `active_tags`: the tags of every built endpoint (V and SWEEP included).
  HealthChecker(std::vector<int> active_tags, int64_t sweep_interval, bool enable_mha_v);

  // Whether to stage kernel_run_counters after the phase-4 increment of `outer_step`:
  // outer_step >= 100, outer_step % 100 == 0 and active_tags non-empty.
  bool ShouldStage(int64_t outer_step) const;

  // The tags that must have run since the previous check: active_tags minus SWEEP tags when
  // sweep_interval <= 0 or no sweep pass ran since the previous check (R4 in docs/ARCHITECTURE.md), minus V tags
  // unless enable_mha_v. Ascending.
  std::vector<int> ExpectedTags(bool sweep_ran_since_previous_check) const;

  // Consumes staged counters at `outer_step` (drain time): remembers them, then throws
  // kvcanary::Error with the frozen message naming every expected tag whose counter did not
  // increase. Raises in both log and raise modes.
  void Drain(const std::array<int64_t, kNumLaunchTags>& counters, int64_t outer_step,
             bool sweep_ran_since_previous_check);

  // Number of Drain() calls so far (for metrics), failed ones included.
  int64_t checks() const { return checks_; }
  const std::vector<int>& active_tags() const { return active_tags_; }

 private:
  std::vector<int> active_tags_;
  int64_t sweep_interval_;
  bool enable_mha_v_;
  std::array<int64_t, kNumLaunchTags> previous_{};
  int64_t checks_ = 0;
};

// V tags are the odd tags (HEAD/TAIL/SWEEP × V × FULL/SWA); SWEEP tags are 4, 5, 10, 11.
bool IsVTag(int tag);
bool IsSweepTag(int tag);

}  // namespace kvcanary::runtime
