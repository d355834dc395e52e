// Fake-engine setups and scenarios that the CPU tests (test_canary_manager.cpp) and their CUDA
// halves (test_canary_cuda.cpp, canary_cuda_util.h) both run: one definition, so the two backends
// are driven through exactly the same steps.
#pragma once

#include <string>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {

// Log mode with real-KV fingerprints and the V records on.
inline testing::FakeEngineOptions LogOptions(RealKvHashMode real_data = RealKvHashMode::kPartial) {
  testing::FakeEngineOptions options;
  options.config.mode = Mode::kLog;
  options.config.real_data = real_data;
  options.config.enable_mha_v = true;
  return options;
}

// Two requests of 10 tokens, three steps, then position 4 of the first pointed at a live slot of
// the second and two more steps: HEAD and TAIL see it in the first, the pump reports it in the
// second.
inline void RunIntoARemappedPrefixEntry(testing::FakeEngine& engine) {
  const int64_t row = engine.AddRequest(10);
  engine.AddRequest(10);
  for (int i = 0; i < 3; ++i) engine.Step();
  engine.SetSlot(row, 4, engine.SlotOf(2, 6));
  engine.Step();
  engine.Step();
}

// LogOptions with plans of 16 verify entries, 8 write requests and 256 write entries: the prefix
// of FillPastThePlanCapacity's batch does not fit them.
inline testing::FakeEngineOptions SmallPlanOptions() {
  testing::FakeEngineOptions options = LogOptions();
  options.capacities = Capacities{/*verify=*/16, /*write_req=*/8, /*write_entry=*/256};
  return options;
}

// Four requests of 12 tokens, three steps: each later step verifies more prefix than
// SmallPlanOptions' plans hold.
inline void FillPastThePlanCapacity(testing::FakeEngine& engine) {
  for (int r = 0; r < 4; ++r) engine.AddRequest(12);
  for (int i = 0; i < 3; ++i) engine.Step();
}

// Points position 2 of request 3 at a live slot of request 4, then steps twice: rows reach the
// host one step after the step that found them.
inline void RemapAcrossRequestsAndReport(testing::FakeEngine& engine) {
  engine.SetSlot(3, 2, engine.SlotOf(4, 9));
  engine.Step();
  engine.Step();
}

// One request of 10 tokens, two steps, then position 3 pointed at the request's own slot of
// position 7 and one step that finds it (the next step reports it).
inline void RemapWithinARequest(testing::FakeEngine& engine) {
  engine.AddRequest(10);
  for (int i = 0; i < 2; ++i) engine.Step();
  engine.SetSlot(1, 3, engine.SlotOf(1, 7));
  engine.Step();
}

// In raise mode: RemapWithinARequest, then returns the ViolationError message of the step that
// reports it (a test failure and "" when that step does not throw).
inline std::string RaiseOnARemappedPosition(testing::FakeEngine& engine) {
  RemapWithinARequest(engine);
  return ThrownMessage<ViolationError>([&engine] { engine.Step(); }, "ViolationError");
}

}  // namespace kvcanary::runtime
