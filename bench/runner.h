// Runs a suite on a device : the copy ceiling, then every case in each
// real-data mode, checked once and then timed op by op and as one whole step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/call_cost.h"
#include "bench/cases.h"
#include "bench/device.h"

namespace kvcanary::bench {

// An op with a byte count: its time, the bytes it must touch, and the bandwidth that makes.
struct OpResult {
  TimingStats time;
  int64_t bytes = 0;
  double gbps = 0;
  double ceiling_percent = 0;
};

struct CaseResult {
  BenchCase shape;
  RealData real_data = RealData::kNone;
  int64_t input_sets = 0;      // batches rotated through
  int64_t verify_entries = 0;  // per launch
  int64_t write_tokens = 0;    // per launch
  TimingStats plan;          // the full plan (entry arrays)
  OpResult verify;           // TAIL K: the launch that fingerprints in partial mode
  TimingStats offsets_plan;  // the offsets-only plan the fused path runs
  OpResult fused_verify;     // TAIL K, entries derived in the kernel
  OpResult write;            // TAIL K
  TimingStats step;          // the runtime's step (fused path): one graph replay on CUDA
  TimingStats planned_step;  // the same step through the plan arrays
  TimingStats stored_step;   // the same step storing its entries for its verifies
  int64_t step_bytes = 0;  // StepBytes of this case
  double step_floor_us = 0;  // step_bytes over the ceiling
  // The random-gather ceiling of verify_entries entries: records only, and with this mode's
  // strips (equal in `none`). A step's limit: 2 x gather_records (HEAD K and V) + 2 x gather
  // (TAIL K and V) + the launch floor of its kStepLaunches launches.
  TimingStats gather_records;
  TimingStats gather;
  TimingStats chain_floor;   // one-request cases: the serial floor of the write (reps = 0: none)
  TimingStats loaded_chain;  // the same chain over tokens read from memory
};

// Launches of the runtime's step on CUDA: the plan, and a paired verify and write each for HEAD
// and TAIL (one FusedStage each).
inline constexpr int kStepLaunches = 5;

struct BenchResults {
  std::string machine;
  std::string device;  // "cpu", "cuda"
  Suite suite;
  int reps = 0;
  int warmup = 0;
  Ceiling ceiling;
  // Graphs of one and of kStepLaunches empty kernels (a step's launches); reps 0 on the CPU.
  TimingStats launch_floor_one;
  TimingStats launch_floor_step;
  std::vector<CallCost> call_costs;  // host µs per call of each op, on a one-token call
  std::vector<CaseResult> cases;
};

struct RunOptions {
  std::string device_name = "cpu";
  int reps = 0;  // timed repetitions per loop; 0 = the suite's default
  // Told what is running now; may be empty.
  std::function<void(const std::string&)> progress;
};

// Throws CheckFailed when an output check fails, kvcanary::Error when an op rejects its
// arguments (a bench bug), std::invalid_argument when a case cannot fit the suite.
BenchResults RunSuite(BenchDevice& device, const Suite& suite, const RunOptions& options);

}  // namespace kvcanary::bench
