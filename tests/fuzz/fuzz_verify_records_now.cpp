// CanaryManager::VerifyRecordsNow's validation (docs/fuzzing.md): an engine's walk of slots, any
// lengths and values. A walk is refused with a kv-canary error that names the call and launches
// nothing exactly when it is invalid (unequal lengths, a slot outside [0, pool), a predecessor
// outside [-1, pool), a negative position); a valid walk is verified (whatever its records hold)
// without a crash, and every row it reports names a slot of the walk.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/radix_view.h"
#include "runtime/fake_engine.h"
#include "tests/fuzz/fuzz_tensors.h"

namespace {

using kvcanary::CanaryLaunchTag;
using kvcanary::runtime::RadixWalk;
using kvcanary::runtime::testing::FakeEngine;
using kvcanary::runtime::testing::FakeEngineOptions;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::abort();
}

constexpr int64_t kPool = 64;

// A fresh engine for each input (a run stays reproducible): two requests with a few steps of
// records, so a walk of small slot values meets real records (their own, or another position's).
std::unique_ptr<FakeEngine> StartedEngine() {
  FakeEngineOptions options;
  options.num_slots = kPool;
  options.swa_window = 0;  // one FULL group: every row names a slot of the walk
  options.config.mode = kvcanary::runtime::Mode::kLog;
  auto engine = std::make_unique<FakeEngine>(options);
  engine->AddRequest(6);
  engine->AddRequest(9);
  for (int i = 0; i < 3; ++i) engine->Step();
  return engine;
}

int64_t SweepRuns(const FakeEngine& engine) {
  return engine.canary->Metrics().kernel_runs[static_cast<int>(CanaryLaunchTag::kSweepKFull)];
}

std::vector<int64_t> ConsumeColumn(FuzzedDataProvider& in, size_t n) {
  std::vector<int64_t> column;
  for (size_t i = 0; i < n; ++i) column.push_back(kvc_fuzz::ConsumeValue(in));
  return column;
}

bool Valid(const RadixWalk& walk, int64_t pool) {
  const size_t n = walk.slot_indices.size();
  if (walk.positions.size() != n || walk.prev_slot_indices.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (walk.slot_indices[i] < 0 || walk.slot_indices[i] >= pool) return false;
    if (walk.prev_slot_indices[i] < -1 || walk.prev_slot_indices[i] >= pool) return false;
    if (walk.positions[i] < 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::unique_ptr<FakeEngine> started = StartedEngine();
  FakeEngine& engine = *started;
  // Mostly one length for the three columns; now and then each its own.
  const uint8_t shape = in.ConsumeIntegral<uint8_t>();
  const size_t n = in.ConsumeIntegralInRange<size_t>(0, 200);
  RadixWalk walk;
  walk.slot_indices = ConsumeColumn(in, n);
  walk.positions = ConsumeColumn(in, shape % 8 == 1 ? n + 1 : n);
  walk.prev_slot_indices = ConsumeColumn(in, shape % 8 == 2 && n > 0 ? n - 1 : n);

  const int64_t runs_before = SweepRuns(engine);
  std::vector<kvcanary::runtime::ViolationRow> rows;
  engine.canary->SetViolationListener(
      [&rows](const kvcanary::runtime::ViolationRow& row, int64_t) { rows.push_back(row); });
  bool refused = false;
  try {
    engine.canary->VerifyRecordsNow(walk);
  } catch (const kvcanary::Error& error) {
    refused = true;
    const std::string message = error.what();
    if (message.rfind("kv-canary: verify_records_now", 0) != 0)
      Fail("unexpected error: " + message);
  }
  if (refused == Valid(walk, kPool)) {
    Fail(std::string(refused ? "refused a valid walk" : "accepted an invalid walk"));
  }
  if (refused && SweepRuns(engine) != runs_before) Fail("a refused walk launched a verify");
  if (!refused) {
    // Its rows come with the second step after the call.
    engine.Step();
    engine.Step();
    for (const kvcanary::runtime::ViolationRow& row : rows) {
      bool in_walk = false;
      for (int64_t slot : walk.slot_indices) in_walk = in_walk || slot == row.slot_idx;
      if (!in_walk) Fail("a row names slot " + std::to_string(row.slot_idx) + ", not in the walk");
    }
  }
  return 0;
}
