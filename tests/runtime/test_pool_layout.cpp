// GroupSpec::layout over the fake engine (fake_latent_pool.h): an MLA group drives one canary
// half (HEAD_K / TAIL_K) over its latent bytes and leaves the V tags idle, an NSA group also
// fingerprints the indexer's key buffer, and a layout its fields contradict is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/health.h"
#include "runtime/engine_scenarios.h"
#include "runtime/fake_engine.h"
#include "runtime/fake_latent_pool.h"
#include "runtime/install_case.h"
#include "runtime/perturbation_util.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;
using testing::FakeIndexer;

constexpr int64_t kTailRealKv = FailReason::kVerifyRealKvHashMismatch;

FakeEngineOptions MlaOptions(RealKvHashMode real_data = RealKvHashMode::kPartial) {
  FakeEngineOptions options = LogOptions(real_data);  // enable_mha_v on: V would run if present
  testing::UseMlaLayout(options);
  return options;
}

// Serves one request of 12 tokens for three steps, flips `flip` in the slot of position 5 and
// serves two more steps: the rows reported, and that slot in *slot.
template <typename Flip>
Recorder FlipAndServe(FakeEngine& engine, Flip flip, int64_t* slot) {
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(12);
  for (int i = 0; i < 3; ++i) engine.Step();
  *slot = engine.SlotOf(1, 5);
  flip(*slot);
  for (int i = 0; i < 2; ++i) engine.Step();
  return recorder;
}

TEST(PoolLayout, MlaCleanDecodeRunsTheKHalfAloneAndReportsNothing) {
  FakeEngine engine(MlaOptions());
  Recorder recorder;
  Record(*engine.canary, recorder);
  // Past two health checks (steps 100 and 200): idle V tags must not be flagged as stalled.
  const int64_t first = engine.AddRequest(5);
  for (int i = 0; i < 110; ++i) engine.Step();
  engine.FinishRequest(first);
  engine.AddRequest(5);
  for (int i = 0; i < 100; ++i) engine.Step();
  EXPECT_TRUE(recorder.rows.empty());
  EXPECT_EQ(engine.canary->record_bytes(), 2 * 512 * kCanarySlotBytes);  // HEAD_K and TAIL_K
  EXPECT_EQ(engine.canary->TransferBuffers(GroupKind::kFull).size(), 2u);
  EXPECT_THROW(engine.canary->CanaryBuffer(GroupKind::kFull, true, /*v_half=*/true), Error);
  for (const int tag : engine.canary->active_tags()) EXPECT_FALSE(IsVTag(tag)) << tag;
  const MetricsSnapshot metrics = engine.canary->Metrics();
  EXPECT_EQ(metrics.kernel_runs[static_cast<int>(CanaryLaunchTag::kTailKFull)], 2 * 209);
  for (const CanaryLaunchTag tag : {CanaryLaunchTag::kHeadVFull, CanaryLaunchTag::kTailVFull}) {
    EXPECT_EQ(metrics.kernel_runs[static_cast<int>(tag)], 0);
    EXPECT_EQ(metrics.protected_tokens[static_cast<int>(tag)], 0);
  }
  EXPECT_GE(metrics.health_checks, 2);
  EXPECT_TRUE(engine.log.Contains("buffer_group_kinds=[FULL(mla)]"));
}

TEST(PoolLayout, MlaRemappedEntryIsReportedByTheKTags) {
  for (const Device device : Devices()) {
    FakeEngineOptions options = MlaOptions();
    options.device = device;
    FakeEngine engine(options);
    Recorder recorder;
    Record(*engine.canary, recorder);
    engine.AddRequest(10);
    engine.AddRequest(10);
    for (int i = 0; i < 3; ++i) engine.Step();
    const int64_t slot = engine.SlotOf(2, 6);
    engine.SetSlot(1, 4, slot);  // position 4 of request 1 now reads a live slot of request 2
    for (int i = 0; i < 2; ++i) engine.Step();
    ASSERT_FALSE(recorder.rows.empty()) << device.ToString();
    for (const ViolationRow& row : recorder.rows) {
      EXPECT_TRUE(row.kernel_kind == kHeadK || row.kernel_kind == kTailK) << row.kernel_kind;
    }
    EXPECT_TRUE(Caught(recorder, kHeadK, FailReason::kVerifyPositionMismatch, slot));
    EXPECT_TRUE(Caught(recorder, kTailK, FailReason::kVerifyPositionMismatch, slot));
  }
}

TEST(PoolLayout, MlaFlippedLatentByteIsCaughtWithPartialAndMissedWithNone) {
  for (const Device device : Devices()) {
    FakeEngineOptions partial = MlaOptions(RealKvHashMode::kPartial);
    partial.device = device;
    FakeEngine caught(partial);
    int64_t slot = -1;
    // Byte 3 lies in the 16 bytes partial folds.
    const auto flip_latent = [&caught](int64_t at) { caught.FlipKByte(at, 3); };
    const Recorder rows = FlipAndServe(caught, flip_latent, &slot);
    EXPECT_TRUE(Caught(rows, kTailK, kTailRealKv, slot)) << device.ToString();
    ExpectNoHeadRows(rows, kHeadK);

    FakeEngineOptions none = MlaOptions(RealKvHashMode::kNone);
    none.device = device;
    FakeEngine missed(none);
    const auto flip_unseen = [&missed](int64_t at) { missed.FlipKByte(at, 3); };
    EXPECT_TRUE(FlipAndServe(missed, flip_unseen, &slot).rows.empty()) << device.ToString();
  }
}

TEST(PoolLayout, NsaFlippedIndexerByteIsCaughtByTail) {
  for (const Device device : Devices()) {
    FakeIndexer indexer(device, 512, 32);
    FakeEngineOptions options = LogOptions(RealKvHashMode::kPartial);
    options.device = device;
    testing::UseNsaLayout(options, indexer);
    FakeEngine engine(options);
    int64_t slot = -1;
    const auto flip_indexer = [&](int64_t at) { indexer.FlipByte(engine, at, 3); };
    const Recorder rows = FlipAndServe(engine, flip_indexer, &slot);
    EXPECT_TRUE(Caught(rows, kTailK, kTailRealKv, slot)) << device.ToString();
    ExpectNoHeadRows(rows, kHeadK);
    EXPECT_EQ(engine.canary->record_bytes(), 2 * 512 * kCanarySlotBytes);
    EXPECT_TRUE(engine.log.Contains("buffer_group_kinds=[FULL(nsa)]"));
  }
}

// A launch takes at most kMaxRealKvSources sources: with 3 latent layers each keeps its own and
// the indexer takes the last; with 8 the latent layers share one. Either way a byte of the
// deepest latent layer and a byte of the indexer are both caught.
TEST(PoolLayout, NsaFoldsTheIndexerAfterEveryLatentLayer) {
  for (const int64_t layers : {3, 8}) {
    for (const bool flip_indexer : {false, true}) {
      FakeIndexer indexer(Device::CPU(), 512, 16);
      FakeEngineOptions options = LogOptions(RealKvHashMode::kAll);
      options.layers = layers;
      options.config.fingerprint_layers = FingerprintLayers::kAll;
      testing::UseNsaLayout(options, indexer);
      FakeEngine engine(options);
      int64_t slot = -1;
      const auto flip = [&](int64_t at) {
        if (flip_indexer) {
          indexer.FlipByte(engine, at, 15);
        } else {
          engine.FlipKByte(at, 20, layers - 1);
        }
      };
      const Recorder rows = FlipAndServe(engine, flip, &slot);
      EXPECT_TRUE(Caught(rows, kTailK, kTailRealKv, slot))
          << layers << " layers, flipped " << (flip_indexer ? "indexer" : "latent");
    }
  }
}

// The perturber's real-KV flips land in the latent layer (the indexer is not a target): caught.
TEST(PoolLayout, NsaPerturbedLatentBytesAreCaughtByTail) {
  FakeIndexer indexer(Device::CPU(), 512, 32);
  FakeEngineOptions options = PerturbOptions(Fire(&PerturbConfig::real_kv_post_forward_prob));
  testing::UseNsaLayout(options, indexer);
  RecordedEngine run(options);
  Serve(run.engine, {9, 7}, 8);
  ASSERT_FALSE(run.recorder.events.empty());
  const PerturbationEvent& event = run.recorder.events.front();
  EXPECT_EQ(event.layer, 0);
  EXPECT_TRUE(Caught(run.recorder, kTailK, kTailRealKv, event.slot));
  ExpectNoHeadRows(run.recorder, kHeadK);
}

// An InstallCase whose FULL group is a latent pool of `layout` over 16-byte rows of its table.
InstallCase LatentCase(PoolLayout layout) {
  InstallCase c(Device::CPU());
  c.config.real_data = RealKvHashMode::kPartial;
  GroupSpec& full = c.args.groups[0];
  full.layout = layout;
  full.bytes_per_token = 16;
  full.k_layer0 = c.table.View(DType::kUInt8, {32, 16});
  if (layout == PoolLayout::kNsa) {
    full.indexer_layers = {c.table.View(DType::kUInt8, {32, 16})};
    full.indexer_bytes_per_token = 16;
  }
  return c;
}

TEST(PoolLayout, ValidLatentInstallsAreAccepted) {
  for (const PoolLayout layout : {PoolLayout::kMla, PoolLayout::kNsa}) {
    InstallCase c = LatentCase(layout);
    EXPECT_NE(CanaryManager::Install(c.config, c.args), nullptr) << PoolLayoutName(layout);
  }
}

TEST(PoolLayout, LatentLayoutWithVLayersIsRefused) {
  for (const PoolLayout layout : {PoolLayout::kMla, PoolLayout::kNsa}) {
    InstallCase c = LatentCase(layout);
    c.args.groups[0].v_layers.assign(2, c.table.View(DType::kUInt8, {32, 16}));
    EXPECT_EQ(c.Refusal(), std::string("kv-canary: group FULL v_layer0 and v_layers must be empty "
                                       "with layout ") +
                               PoolLayoutName(layout) +
                               " (its latent layers are k_layer0 / k_layers), got 2 V layer(s)");
  }
  InstallCase c = LatentCase(PoolLayout::kMla);
  c.args.groups[0].v_layer0 = c.table.View(DType::kUInt8, {32, 16});
  EXPECT_NE(c.Refusal().find("got 1 V layer(s)"), std::string::npos);
}

TEST(PoolLayout, IndexerLayersOutsideNsaAreRefused) {
  for (const PoolLayout layout : {PoolLayout::kMha, PoolLayout::kMla}) {
    InstallCase c = LatentCase(layout);
    c.args.groups[0].indexer_layers = {c.table.View(DType::kUInt8, {32, 16})};
    EXPECT_EQ(c.Refusal(), std::string("kv-canary: group FULL indexer_layers must be empty unless "
                                       "layout is nsa, got 1 layer(s) with layout ") +
                               PoolLayoutName(layout));
  }
}

TEST(PoolLayout, NsaNeedsAFoldableIndexer) {
  InstallCase none = LatentCase(PoolLayout::kNsa);
  none.args.groups[0].indexer_layers.clear();
  EXPECT_EQ(none.Refusal(),
            "kv-canary: group FULL indexer_layers must hold the indexer's key buffer with layout "
            "nsa, got none");
  for (const int64_t bytes : {0, 24}) {
    InstallCase c = LatentCase(PoolLayout::kNsa);
    c.args.groups[0].indexer_bytes_per_token = bytes;
    EXPECT_EQ(c.Refusal(),
              "kv-canary: group FULL indexer_bytes_per_token must be a positive multiple of 16, "
              "got " +
                  std::to_string(bytes));
  }
  InstallCase many = LatentCase(PoolLayout::kNsa);
  many.args.groups[0].indexer_layers.assign(kMaxRealKvLayers + 1,
                                            many.table.View(DType::kUInt8, {32, 16}));
  EXPECT_EQ(many.Refusal(), "kv-canary: group FULL indexer_layers must hold at most " +
                                std::to_string(kMaxRealKvLayers) + " layers, got " +
                                std::to_string(kMaxRealKvLayers + 1));
}

TEST(PoolLayout, NsaRefusesVerifyBackup) {
  InstallCase c = LatentCase(PoolLayout::kNsa);
  c.config.verify_backup = true;
  EXPECT_EQ(c.Refusal(),
            "kv-canary: verify_backup re-hashes the latent layer alone; group FULL layout nsa "
            "also fingerprints indexer_layers (turn verify_backup off)");
}

TEST(PoolLayout, UnknownLayoutIsRefused) {
  InstallCase c = LatentCase(PoolLayout::kMla);
  c.args.groups[0].layout = static_cast<PoolLayout>(7);
  EXPECT_EQ(c.Refusal(), "kv-canary: group FULL layout must be one of mha/mla/nsa, got 7");
  EXPECT_STREQ(PoolLayoutName(static_cast<PoolLayout>(7)), "unknown");
}

}  // namespace
}  // namespace kvcanary::runtime
