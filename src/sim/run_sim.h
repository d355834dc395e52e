// The simulator's entry point: runs one scenario end to end and returns its
// report.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "sim/report.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {

// Called as the run advances: `done` of `total` outer steps (total <= 0 when the run ends on a
// request count instead), and a short status such as "12 running, 3 detected".
using ProgressFn = std::function<void(int64_t done, int64_t total, std::string_view status)>;

// Builds the engine `options` describe, serves the seeded workload, injects the enabled faults,
// matches every violation to the injection that explains it, and reports. Deterministic for
// fixed options, timings aside. `progress` may be empty.
// REQUIRES: ValidateOptions(options) passed.
ScenarioReport RunScenario(const SimOptions& options, const ProgressFn& progress);

}  // namespace kvcanary::sim
