// A compressed pool (GroupSpec::compress_ratio, full_to_compressed) over the fake engine
// (fake_compressed_pool.h): records are written at the compressed slots and verified through the
// table, a stale or wrong table entry is reported at the compressed slot it names, and a
// description the install contradicts is refused with nothing allocated.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "core/record.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/engine_scenarios.h"
#include "runtime/fake_compressed_pool.h"
#include "runtime/install_case.h"
#include "runtime/perturbation_util.h"

namespace kvcanary::runtime {
namespace {

using testing::CompressedStep;
using testing::FakeCompressedPool;
using testing::FakeEngine;
using testing::FakeEngineOptions;

constexpr int64_t kRatio = 4;
constexpr int64_t kPosition = FailReason::kVerifyPositionMismatch;

// The pool and the engine whose FULL group it is; the pool outlives the runtime.
struct CompressedEngine {
  explicit CompressedEngine(Device device, const std::function<void(Config&)>& edit = nullptr)
      : pool(device, 512, kRatio, 32), engine(Options(device, edit, pool)) {
    Record(*engine.canary, recorder);
  }
  static FakeEngineOptions Options(Device device, const std::function<void(Config&)>& edit,
                                   FakeCompressedPool& pool) {
    FakeEngineOptions options = LogOptions(RealKvHashMode::kPartial);
    options.device = device;
    if (edit) edit(options.config);
    options.config.enable_write_input_assert = true;
    options.edit_full_group = [&pool](GroupSpec& full) { pool.Describe(full); };
    return options;
  }
  void Steps(int count) {
    for (int i = 0; i < count; ++i) CompressedStep(engine, pool);
  }
  // Two requests of `first` and `second` prompt tokens, served `count` steps.
  void Serve(int64_t first, int64_t second, int count) {
    engine.AddRequest(first);
    engine.AddRequest(second);
    Steps(count);
  }

  FakeCompressedPool pool;
  FakeEngine engine;
  Recorder recorder;
};

TEST(CompressedPool, CleanRunWritesTheClosingTokensAtTheirCompressedSlots) {
  for (const Device device : Devices()) {
    CompressedEngine run(device);
    run.Serve(10, 7, 30);
    EXPECT_TRUE(run.recorder.rows.empty()) << device.ToString();
    EXPECT_TRUE(run.engine.log.Contains("buffer_group_kinds=[FULL(compressed x4)]"));
    EXPECT_EQ(run.engine.canary->record_bytes(), 2 * (512 / kRatio + 1) * kCanarySlotBytes);
    // Position 7 of request 1 closes its second group: its record sits at the compressed slot.
    const int64_t slot = run.pool.CompressedSlotOf(run.engine.SlotOf(1, 7));
    ASSERT_GT(slot, 0);
    run.engine.Synchronize();
    const TensorView tail = run.engine.canary->CanaryBuffer(GroupKind::kFull, true, false);
    std::vector<uint8_t> bytes(kCanarySlotBytes);
    CopyBytesAsync(bytes.data(), tail.data_as<uint8_t>() + slot * kCanarySlotBytes,
                   kCanarySlotBytes, device, run.engine.stream());
    run.engine.Synchronize();
    const kvcanary::Record record = LoadRecord(bytes.data());
    EXPECT_EQ(record.position, 7);
    EXPECT_EQ(record.token, FakeEngine::Oracle(1, 7));
    EXPECT_EQ(run.pool.CompressedSlotOf(run.engine.SlotOf(1, 6)), 0);  // closes no slot
    const MetricsSnapshot metrics = run.engine.canary->Metrics();
    EXPECT_GT(metrics.protected_tokens[kTailK], 0);
  }
}

TEST(CompressedPool, StaleCompressedSlotIsReportedWhereTheTableStillPoints) {
  for (const Device device : Devices()) {
    CompressedEngine run(device);
    run.Serve(12, 9, 3);
    ASSERT_TRUE(run.recorder.rows.empty());
    // Request 1 drops position 3's compressed slot but keeps reading it: the next closing token
    // (request 2's) is compressed into it.
    const int64_t stale = run.pool.FreeKeepingStaleEntry(run.engine.SlotOf(1, 3));
    run.Steps(4);
    EXPECT_TRUE(Caught(run.recorder, kHeadK, kPosition, stale)) << device.ToString();
  }
}

TEST(CompressedPool, WrongCompressedSlotIsReported) {
  for (const Device device : Devices()) {
    CompressedEngine run(device);
    run.Serve(12, 12, 3);
    const int64_t other = run.pool.CompressedSlotOf(run.engine.SlotOf(2, 7));
    run.pool.Remap(run.engine.SlotOf(1, 3), other);
    run.pool.Upload(run.engine.stream());
    run.Steps(2);  // rows are read back one step late
    EXPECT_TRUE(Caught(run.recorder, kHeadK, kPosition, other)) << device.ToString();
    EXPECT_TRUE(Caught(run.recorder, kTailK, kPosition, other)) << device.ToString();
  }
}

TEST(CompressedPool, FlippedCompressedByteIsCaughtByTail) {
  CompressedEngine run(Device::CPU());
  run.engine.AddRequest(12);
  run.Steps(3);
  const int64_t slot = run.pool.CompressedSlotOf(run.engine.SlotOf(1, 7));
  run.pool.Bytes(slot)[2] ^= 0xFF;
  run.Steps(2);
  EXPECT_TRUE(Caught(run.recorder, kTailK, FailReason::kVerifyRealKvHashMismatch, slot));
  ExpectNoHeadRows(run.recorder, kHeadK);
}

// The sweep walks full slots of the cache and reads their records through the table: a clean
// cached prefix passes, and a compressed byte flipped after its request left is caught there.
TEST(CompressedPool, SweepReadsCachedSlotsThroughTheTable) {
  CompressedEngine run(Device::CPU(), [](Config& config) { config.sweep_interval = 2; });
  run.Serve(12, 9, 3);
  FlatRadix radix({{SlotsOf(run.engine, 1, 12), /*locked=*/false}});
  run.engine.canary->AttachRadixCache(&radix);
  run.engine.FinishRequest(1);  // only the cache holds its prefix now
  run.Steps(4);
  ASSERT_TRUE(run.recorder.rows.empty());
  ASSERT_GT(run.engine.canary->sweep_passes(), 0);
  const int64_t slot = run.pool.CompressedSlotOf(run.engine.SlotOf(1, 11));
  run.pool.Bytes(slot)[5] ^= 0xFF;
  run.Steps(4);
  constexpr int64_t kSweepK = static_cast<int64_t>(CanaryLaunchTag::kSweepKFull);
  EXPECT_TRUE(Caught(run.recorder, kSweepK, FailReason::kVerifyRealKvHashMismatch, slot));
  for (const ViolationRow& row : run.recorder.rows) EXPECT_EQ(row.slot_idx, slot);
}

// Quarantine reads each recorded row's slots through the table, as the plan does: the requests
// whose translated slots hold the failing compressed slot are named with the full slot and
// position that hold it (request 2 through its wrong entry, request 3 owning the slot), and a
// request of the same batches that does not hold it (request 1) is not.
TEST(CompressedPool, QuarantineNamesTheRequestsHoldingTheFailingCompressedSlot) {
  for (const Device device : Devices()) {
    CompressedEngine run(device,
                         [](Config& config) { config.on_violation = OnViolation::kQuarantine; });
    const int64_t bystander = run.engine.AddRequest(12);
    run.Serve(12, 12, 3);
    EXPECT_TRUE(run.engine.canary->TakeAffectedRequests().empty());
    const int64_t wrong = run.engine.SlotOf(2, 3);
    const int64_t owner = run.engine.SlotOf(3, 7);
    const int64_t other = run.pool.CompressedSlotOf(owner);
    run.pool.Remap(wrong, other);
    run.pool.Upload(run.engine.stream());
    run.Steps(2);
    ASSERT_TRUE(Caught(run.recorder, kHeadK, kPosition, other)) << device.ToString();
    const std::vector<AffectedRequest> named = run.engine.canary->TakeAffectedRequests();
    ASSERT_EQ(named.size(), 2u) << device.ToString();
    EXPECT_EQ(named[0].req_pool_idx, 2);
    EXPECT_EQ(named[0].slots, (std::vector<int64_t>{wrong}));
    EXPECT_EQ(named[0].positions, (std::vector<int64_t>{3}));
    EXPECT_EQ(named[1].req_pool_idx, 3);
    EXPECT_EQ(named[1].slots, (std::vector<int64_t>{owner}));
    EXPECT_EQ(named[1].positions, (std::vector<int64_t>{7}));
    for (const AffectedRequest& request : named) EXPECT_NE(request.req_pool_idx, bystander);
  }
}

// An InstallCase whose FULL group is a compressed pool of ratio 4 over kSlots full slots.
struct CompressedCase : InstallCase {
  CompressedCase() : InstallCase(Device::CPU()), lut(Device::CPU(), 8 * (kSlots + 1)) {
    GroupSpec& full = args.groups[0];
    full.compress_ratio = kRatio;
    full.full_to_compressed = lut.View(DType::kInt64, {kSlots + 1});
    full.num_slots = kSlots / kRatio + 1;
  }
  DeviceBuffer lut;
};

// device_bytes() counts every buffer the runtime allocates: over the same group described without
// compression (the same slots and layer), a compressed FULL group adds exactly its chain-assert
// word (4 bytes, kept 0) and its translated slots (one int64 per write entry).
TEST(CompressedPool, DeviceBytesCountTheCompressedGroupsOwnBuffers) {
  const CompressedEngine compressed(Device::CPU());
  FakeCompressedPool pool(Device::CPU(), 512, kRatio, 32);
  FakeEngineOptions options = CompressedEngine::Options(Device::CPU(), nullptr, pool);
  options.edit_full_group = [&pool](GroupSpec& full) {
    pool.Describe(full);
    full.compress_ratio = 1;
    full.full_to_compressed = TensorView();
  };
  const FakeEngine plain(options);
  EXPECT_EQ(compressed.engine.canary->record_bytes(), plain.canary->record_bytes());
  const int64_t entries = plain.canary->capacities().write_entry_capacity;
  EXPECT_EQ(compressed.engine.canary->device_bytes() - plain.canary->device_bytes(),
            4 + 8 * entries);
}

TEST(CompressedPool, ValidDescriptionIsAccepted) {
  CompressedCase c;
  EXPECT_NE(CanaryManager::Install(c.config, c.args), nullptr);
  EXPECT_TRUE(c.log.Contains("buffer_group_kinds=[FULL(compressed x4)]"));
}

TEST(CompressedPool, RatioAndTableMustComeTogether) {
  CompressedCase zero;
  zero.args.groups[0].compress_ratio = 0;
  EXPECT_EQ(zero.Refusal(), "kv-canary: group FULL compress_ratio must be at least 1, got 0");
  CompressedCase one;
  one.args.groups[0].compress_ratio = 1;
  EXPECT_EQ(one.Refusal(),
            "kv-canary: group FULL full_to_compressed must be absent unless compress_ratio > 1, "
            "got a table with compress_ratio 1");
  CompressedCase none;
  none.args.groups[0].full_to_compressed = TensorView();
  EXPECT_EQ(none.Refusal(),
            "kv-canary: group FULL full_to_compressed must map the full pool's slots with "
            "compress_ratio 4, got none");
}

TEST(CompressedPool, TableMustCoverThePoolAsInt64) {
  CompressedCase dtype;
  dtype.args.groups[0].full_to_compressed = dtype.lut.View(DType::kInt32, {kSlots + 1});
  EXPECT_EQ(dtype.Refusal(),
            "kv-canary: group FULL full_to_compressed must be a contiguous torch.int64 "
            "[pool_slot_count + 1 = 65] on cpu, got torch.int32 [65] on cpu");
  CompressedCase length;
  length.args.groups[0].full_to_compressed = length.lut.View(DType::kInt64, {kSlots});
  EXPECT_EQ(length.Refusal(),
            "kv-canary: group FULL full_to_compressed must be a contiguous torch.int64 "
            "[pool_slot_count + 1 = 65] on cpu, got torch.int64 [64] on cpu");
}

TEST(CompressedPool, TooFewSlotsAreRefused) {
  CompressedCase c;
  c.args.groups[0].num_slots = kSlots / kRatio;
  EXPECT_EQ(c.Refusal(),
            "kv-canary: group FULL num_slots must be at least pool_slot_count / compress_ratio + 1 "
            "= 17 (a compressed slot per 4 full slots, and the padding slot), got 16");
}

TEST(CompressedPool, OnlyTheFullGroupIsCompressedAndNeverWithSwaDivergence) {
  CompressedCase swa;
  GroupSpec& group = swa.args.groups[0];
  group.kind = GroupKind::kSwa;
  group.full_to_swa = swa.lut.View(DType::kInt64, {kSlots + 1});
  swa.args.swa_window_size = 4;
  EXPECT_EQ(swa.Refusal(),
            "kv-canary: group SWA compress_ratio must be 1 (a compressed pool is the FULL group), "
            "got 4");
  CompressedCase divergence;
  divergence.config.swa_divergence_stats_interval = 10;
  EXPECT_EQ(divergence.Refusal(),
            "kv-canary: swa_divergence_stats_interval must be 0 with a compressed group FULL (its "
            "records are not at full slots), got 10");
}

}  // namespace
}  // namespace kvcanary::runtime
