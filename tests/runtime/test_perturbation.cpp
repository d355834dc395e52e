// Fault injection, the mechanics: where a flip lands, the seeded RNG, and the published vectors
// (a flip on zero KV, warm-up, the req_to_token choice).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/perturbation.h"
#include "runtime/perturbation_util.h"

namespace kvcanary::runtime {
namespace {

using testing::CapturingLog;
using testing::FakeEngine;
using testing::FakeEngineOptions;

// ---- Flip addressing --------------------------------------------------------------------------

class FlipAddressTest : public ::testing::Test {
 protected:
  // 4 pages of 2 slots x 16 bytes, and a full->SWA table.
  FlipAddressTest() : pages_(Device::CPU(), 4 * 32), lut_(Device::CPU(), 4 * 8) {
    source_ = MakeRealKvSource(pages_.View(DType::kUInt8, {4, 32}), 2, 16, 16);
    const int64_t lut[4] = {0, 3, -1, 100};
    std::memcpy(lut_.data(), lut, sizeof(lut));
  }
  TensorView Lut() const { return lut_.View(DType::kInt64, {4}); }
  // Expects LocateFlip to place `logical` (translated by `lut` when it has data) at this page
  // slot, row and byte column.
  void ExpectFlipAt(int64_t logical, const TensorView& lut, int64_t slot, int64_t row,
                    int64_t col) const {
    const std::optional<FlipAddress> at = LocateFlip(logical, lut, source_, nullptr);
    ASSERT_TRUE(at.has_value());
    EXPECT_EQ(at->slot, slot);
    EXPECT_EQ(at->row, row);
    EXPECT_EQ(at->col, col);
  }

  DeviceBuffer pages_, lut_;
  RealKvSource source_;
};

TEST_F(FlipAddressTest, SwaSlotIsTranslatedThenSplitIntoPageRowAndColumn) {
  // The published vector: logical slot 1 with LUT[1] = 3, page size 2, 16 bytes per token -> row 1,
  // col 16.
  ExpectFlipAt(1, Lut(), /*slot=*/3, /*row=*/1, /*col=*/16);
}

TEST_F(FlipAddressTest, FullSlotIsUsedAsIs) {
  ExpectFlipAt(4, TensorView(), /*slot=*/4, /*row=*/2, /*col=*/0);
}

TEST_F(FlipAddressTest, NegativeOutOfTableAndOutOfSourceSlotsAreSkipped) {
  EXPECT_FALSE(LocateFlip(-1, TensorView(), source_, nullptr).has_value());
  EXPECT_FALSE(LocateFlip(2, Lut(), source_, nullptr).has_value()) << "LUT value -1";
  EXPECT_FALSE(LocateFlip(4, Lut(), source_, nullptr).has_value()) << "past the LUT";
  EXPECT_FALSE(LocateFlip(3, Lut(), source_, nullptr).has_value()) << "LUT value past the pages";
  EXPECT_FALSE(LocateFlip(8, TensorView(), source_, nullptr).has_value());
  EXPECT_TRUE(LocateFlip(7, TensorView(), source_, nullptr).has_value());
}

TEST(PerturbRng, IsSeededAndReproducible) {
  PerturbRng a(42), b(42), c(43);
  std::vector<uint64_t> sa, sb, sc;
  for (int i = 0; i < 8; ++i) {
    sa.push_back(a.Next());
    sb.push_back(b.Next());
    sc.push_back(c.Next());
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  PerturbRng d(0);
  for (int i = 0; i < 1000; ++i) {
    const double u = d.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const int64_t k = d.Below(3);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 3);
  }
}

// ---- The published vectors ---------------------------------------------------------------------

// A K-only FULL pool of 8 slots whose KV is never written (all zero), one request row.
class ZeroKvHarness {
 public:
  explicit ZeroKvHarness(PerturbConfig perturb)
      : k_(Device::CPU(), 8 * 16), table_(Device::CPU(), 2 * 8 * 4), batch_(Device::CPU(), 6 * 8) {
    InstallArgs args;
    args.req_to_token = table_.View(DType::kInt32, {2, 8});
    GroupSpec full;
    full.num_slots = 8;
    full.k_layer0 = k_.View(DType::kUInt8, {8, 16});
    full.bytes_per_token = 16;
    args.groups = {full};
    args.pool_slot_count = 8;
    args.max_prefill_tokens = 8;
    args.log = &log;
    args.perturb = perturb;
    Config config;
    config.mode = Mode::kLog;
    config.real_data = RealKvHashMode::kPartial;
    canary = CanaryManager::Install(config, args);
    canary->MarkInitFinished();
  }

  // Phases 1-3 of one forward writing token 7 at position 0 of row 1 into slot 2.
  void RunUntilEndStep() {
    table_.data_as<int32_t>()[1 * 8 + 0] = 2;
    int64_t* column = batch_.data_as<int64_t>();
    const int64_t values[6] = {1, 0, 1, 7, 0, 2};  // rp, prefix, extend, id, position, slot
    std::memcpy(column, values, sizeof(values));
    ForwardBatch batch;
    batch.batch_size = 1;
    batch.num_tokens = 1;
    batch.req_pool_indices = batch_.View(DType::kInt64, {1}, 0);
    batch.prefix_lens = batch_.View(DType::kInt64, {1}, 8);
    batch.extend_seq_lens = batch_.View(DType::kInt64, {1}, 16);
    batch.input_ids = batch_.View(DType::kInt64, {1}, 24);
    batch.positions = batch_.View(DType::kInt64, {1}, 32);
    batch.out_cache_loc = batch_.View(DType::kInt64, {1}, 40);
    ForwardHostInput host;
    host.req_pool_indices = {1};
    host.prefix_lens = {0};
    host.extend_seq_lens = {1};
    canary->BeginStep(StepInput{{batch}, {host}});
    canary->PreForward(0);
    canary->PostForward(0);
  }

  std::vector<uint8_t> Bytes(const TensorView& view) const {
    const uint8_t* data = view.data_as<uint8_t>();
    return std::vector<uint8_t>(data, data + view.numel());
  }
  std::vector<uint8_t> K() const { return Bytes(k_.View(DType::kUInt8, {8 * 16})); }

  CapturingLog log;
  std::unique_ptr<CanaryManager> canary;

 private:
  DeviceBuffer k_, table_, batch_;
};

TEST(Perturbation, PostForwardFlipOnZeroKvSetsTheFirstByteAndLeavesCanaryBuffersAlone) {
  ZeroKvHarness harness(Fire(&PerturbConfig::real_kv_post_forward_prob, /*warmup_steps=*/0));
  Recorder recorder;
  Record(*harness.canary, recorder);
  harness.RunUntilEndStep();
  const TensorView head = harness.canary->CanaryBuffer(GroupKind::kFull, false, false);
  const TensorView tail = harness.canary->CanaryBuffer(GroupKind::kFull, true, false);
  const std::vector<uint8_t> head_before = harness.Bytes(head);
  const std::vector<uint8_t> tail_before = harness.Bytes(tail);
  ASSERT_EQ(harness.K(), std::vector<uint8_t>(8 * 16, 0));
  harness.canary->EndStep();

  std::vector<uint8_t> expected(8 * 16, 0);
  expected[2 * 16 + 0] = 0xFF;  // byte [2, 0]
  EXPECT_EQ(harness.K(), expected);
  EXPECT_EQ(harness.Bytes(head), head_before);
  EXPECT_EQ(harness.Bytes(tail), tail_before);
  ASSERT_EQ(recorder.events.size(), 1u);
  EXPECT_EQ(recorder.events[0].kind, "real_kv_post_forward");
  EXPECT_EQ(recorder.events[0].slot, 2);
  EXPECT_EQ(recorder.events[0].original, 0x00);
  EXPECT_EQ(recorder.events[0].replacement, 0xFF);
  EXPECT_TRUE(harness.log.Contains(
      "INFO kv_canary perturb real_kv_post_forward: group=FULL source_idx=0 slot=2 row=2 col=0 "
      "original_byte=0x00 new_byte=0xFF"));
}

TEST(Perturbation, ProbabilityOneDuringWarmupFiresNothing) {
  PerturbConfig perturb;
  for (double PerturbConfig::*prob :
       {&PerturbConfig::req_to_token_prob, &PerturbConfig::real_kv_used_prob,
        &PerturbConfig::real_kv_unused_cache_prob, &PerturbConfig::real_kv_post_forward_prob,
        &PerturbConfig::next_token_swap_prob}) {
    perturb.*prob = 1;
  }
  perturb.target_group = GroupKind::kFull;
  perturb.warmup_steps = 5;
  RecordedEngine run(PerturbOptions(perturb));
  FakeEngine& engine = run.engine;
  const Recorder& recorder = run.recorder;
  Serve(engine, {9, 4}, 5);
  EXPECT_TRUE(recorder.events.empty());
  EXPECT_TRUE(recorder.rows.empty());
  EXPECT_EQ(CountLines(engine.log,
                       "kv_canary perturb: disabled during warmup window (first 5 forward steps)"),
            1);
  EXPECT_FALSE(engine.log.Contains("enabled after warmup window"));
  engine.Step();  // outer step 5: past the warm-up
  EXPECT_FALSE(recorder.events.empty());
  EXPECT_EQ(CountLines(engine.log, "kv_canary perturb: enabled after warmup window at step=5"), 1);
}

TEST(Perturbation, ReqToTokenNeverReplacesAnEntryBeingWritten) {
  for (uint64_t seed = 0; seed < 6; ++seed) {
    PerturbConfig perturb = Fire(&PerturbConfig::req_to_token_prob, /*warmup_steps=*/0);
    perturb.seed = seed;
    FakeEngine engine(PerturbOptions(perturb));
    Recorder recorder;
    Record(*engine.canary, recorder);
    engine.AddRequest(3);
    engine.AddRequest(5);
    engine.Step();  // a pure prefill: every entry is being written
    EXPECT_TRUE(recorder.events.empty());
    EXPECT_TRUE(engine.log.Contains(
        "kv_canary perturb req_to_token: skipped because the batch has no live req_to_token "
        "entry"));
    for (int step = 1; step < 8; ++step) {
      recorder.events.clear();
      engine.Step();
      ASSERT_EQ(recorder.events.size(), 1u) << "seed " << seed << " step " << step;
      const PerturbationEvent& event = recorder.events[0];
      const std::vector<int64_t>& written = engine.last_slots;
      EXPECT_EQ(std::count(written.begin(), written.end(), event.original), 0)
          << "replaced the entry of a slot being written (seed " << seed << ")";
      EXPECT_EQ(std::count(written.begin(), written.end(), event.replacement), 0);
      EXPECT_NE(event.original, event.replacement);
      EXPECT_GE(event.replacement, 1);
      EXPECT_EQ(engine.SlotOf(event.row, event.position), event.replacement);
    }
  }
}

}  // namespace
}  // namespace kvcanary::runtime
