// What the CUDA step-protocol tests share (test_canary_cuda.cpp and test_canary_cuda_graph.cpp):
// the skip without a device, reported rows as comparable keys, and Run, which drives a scenario on
// a fake engine on one device and collects its rows, violation lines and counters.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/engine_scenarios.h"
#include "runtime/fake_engine.h"

#define KVC_SKIP_WITHOUT_CUDA() \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device"

namespace kvcanary::runtime {

constexpr int64_t Tag(CanaryLaunchTag tag) { return static_cast<int64_t>(tag); }

// One reported row with the step it was reported in: (step, the row's eight fields).
using RowKey = std::array<int64_t, 9>;

inline RowKey KeyOf(const ViolationRow& row, int64_t step) {
  return {step,
          row.kernel_kind,
          row.slot_idx,
          row.position,
          row.stored_token,
          row.expected_token,
          row.stored_chain_hash,
          row.expected_aux,
          row.fail_reason_bits};
}

inline std::string ToString(const std::vector<RowKey>& rows) {
  std::ostringstream out;
  for (const RowKey& key : rows) {
    out << "\n  step=" << key[0] << " tag=" << LaunchTagLabel(key[1]) << " slot=" << key[2]
        << " pos=" << key[3] << " token=" << key[4] << "/" << key[5] << " chain=" << key[6]
        << " aux=" << key[7] << " bits=" << key[8];
  }
  return out.str();
}

// What a run reported: its rows sorted (compared as multisets), and counters at the end.
struct Report {
  std::vector<RowKey> rows;
  MetricsSnapshot metrics;
  int64_t split_steps = 0;
  std::vector<std::string> violation_lines;
};

using Scenario = std::function<void(testing::FakeEngine&)>;

inline Report Run(Device device, testing::FakeEngineOptions options, const Scenario& scenario) {
  options.device = device;
  testing::FakeEngine engine(options);
  if (engine.canary == nullptr) throw std::runtime_error("the runtime was not installed");
  Report report;
  engine.canary->SetViolationListener([&report](const ViolationRow& row, int64_t step) {
    report.rows.push_back(KeyOf(row, step));
  });
  scenario(engine);
  engine.Synchronize();
  std::sort(report.rows.begin(), report.rows.end());
  report.metrics = engine.canary->Metrics();
  report.split_steps = engine.canary->split_steps();
  for (const std::string& line : engine.log.lines) {
    if (line.find("kv_canary violation") != std::string::npos) {
      report.violation_lines.push_back(line);
    }
  }
  std::sort(report.violation_lines.begin(), report.violation_lines.end());
  if (device.type == DeviceType::kCUDA &&
      !engine.log.Contains("install_canary: device=" + device.ToString())) {
    throw std::runtime_error("the runtime did not install on " + device.ToString());
  }
  return report;
}

inline bool HasRow(const Report& report, int64_t tag, int64_t reason, int64_t slot = -1) {
  for (const RowKey& key : report.rows) {
    if (key[1] == tag && (key[8] & reason) != 0 && (slot < 0 || key[2] == slot)) return true;
  }
  return false;
}

}  // namespace kvcanary::runtime
