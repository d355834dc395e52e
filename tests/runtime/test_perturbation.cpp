// Fault injection (spec/runtime.md §12): the flip addressing, the gate (warm-up, target group),
// the §18 vectors, and each perturbation caught end to end by the detection path §12 names.
#include <gtest/gtest.h>

#include "runtime/error_message.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/fake_engine.h"
#include "runtime/perturbation.h"

namespace kvcanary::runtime {
namespace {

using testing::CapturingLog;
using testing::FakeEngine;
using testing::FakeEngineOptions;

struct Recorder {
  std::vector<ViolationRow> rows;
  std::vector<int64_t> steps;
  std::vector<PerturbationEvent> events;
};

// Whether some recorded row has launch tag `tag`, a reason among `bits` and slot `slot`.
bool Caught(const Recorder& recorder, int64_t tag, int64_t bits, int64_t slot) {
  for (const ViolationRow& row : recorder.rows) {
    if (row.kernel_kind == tag && (row.fail_reason_bits & bits) && row.slot_idx == slot) {
      return true;
    }
  }
  return false;
}

// HEAD records carry no fingerprint: a byte flip is only ever seen by TAIL (or SWEEP).
void ExpectNoHeadRows(const Recorder& recorder, int64_t head_tag) {
  for (const ViolationRow& row : recorder.rows) EXPECT_NE(row.kernel_kind, head_tag);
}

void Record(CanaryManager& canary, Recorder& recorder) {
  canary.SetViolationListener([&recorder](const ViolationRow& row, int64_t step) {
    recorder.rows.push_back(row);
    recorder.steps.push_back(step);
  });
  canary.SetPerturbationListener(
      [&recorder](const PerturbationEvent& event) { recorder.events.push_back(event); });
}

int CountLines(const CapturingLog& log, const std::string& text) {
  return static_cast<int>(std::count_if(log.lines.begin(), log.lines.end(), [&](const auto& line) {
    return line.find(text) != std::string::npos;
  }));
}

constexpr int64_t kHeadK = static_cast<int64_t>(CanaryLaunchTag::kHeadKFull);
constexpr int64_t kTailK = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);

FakeEngineOptions PerturbOptions(PerturbConfig perturb) {
  FakeEngineOptions options;
  options.config.mode = Mode::kLog;
  options.config.real_data = RealKvHashMode::kPartial;
  options.perturb = perturb;
  return options;
}

PerturbConfig Fire(double PerturbConfig::*kind, int64_t warmup_steps = 2) {
  PerturbConfig perturb;
  perturb.*kind = 1.0;
  perturb.warmup_steps = warmup_steps;
  perturb.target_group = GroupKind::kFull;
  perturb.seed = 7;
  return perturb;
}

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

  DeviceBuffer pages_, lut_;
  RealKvSource source_;
};

TEST_F(FlipAddressTest, SwaSlotIsTranslatedThenSplitIntoPageRowAndColumn) {
  // §18: logical slot 1 with LUT[1] = 3, page size 2, 16 bytes per token -> row 1, col 16.
  const std::optional<FlipAddress> at = LocateFlip(1, Lut(), source_, nullptr);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->slot, 3);
  EXPECT_EQ(at->row, 1);
  EXPECT_EQ(at->col, 16);
}

TEST_F(FlipAddressTest, FullSlotIsUsedAsIs) {
  const std::optional<FlipAddress> at = LocateFlip(4, TensorView(), source_, nullptr);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->slot, 4);
  EXPECT_EQ(at->row, 2);
  EXPECT_EQ(at->col, 0);
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

// ---- §18 vectors -------------------------------------------------------------------------------

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
  perturb.req_to_token_prob = 1;
  perturb.real_kv_used_prob = 1;
  perturb.real_kv_unused_cache_prob = 1;
  perturb.real_kv_post_forward_prob = 1;
  perturb.next_token_swap_prob = 1;
  perturb.target_group = GroupKind::kFull;
  perturb.warmup_steps = 5;
  FakeEngine engine(PerturbOptions(perturb));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(9);
  engine.AddRequest(4);
  for (int i = 0; i < 5; ++i) engine.Step();
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

// ---- Gate and target group ---------------------------------------------------------------------

TEST(Perturbation, ProbabilityOutsideTheUnitIntervalIsRefusedAtInstall) {
  PerturbConfig perturb;
  perturb.real_kv_used_prob = 1.5;
  EXPECT_EQ(ErrorMessage([&] { FakeEngine engine(PerturbOptions(perturb)); }),
            "kv-canary: KVCANARY_PERTURB_REAL_KV_USED_PROB must be in [0, 1], got 1.5");
}

TEST(Perturbation, UnsetTargetGroupFailsWhenARealKvPerturbationFires) {
  PerturbConfig perturb = Fire(&PerturbConfig::real_kv_used_prob, /*warmup_steps=*/1);
  perturb.target_group.reset();
  FakeEngine engine(PerturbOptions(perturb));
  engine.AddRequest(4);
  engine.Step();  // warm-up: nothing fires, nothing is required
  EXPECT_EQ(ErrorMessage([&] { engine.Step(); }),
            "kv-canary: KVCANARY_PERTURB_TARGET_GROUP must be explicitly set to 'full' or 'swa' "
            "when real_kv_used perturbation is enabled");
}

TEST(Perturbation, ReqToTokenNeedsNoTargetGroup) {
  PerturbConfig perturb = Fire(&PerturbConfig::req_to_token_prob, /*warmup_steps=*/1);
  perturb.target_group.reset();
  FakeEngine engine(PerturbOptions(perturb));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(4);
  engine.AddRequest(4);
  engine.Step();
  EXPECT_NO_THROW(engine.Step());
  EXPECT_EQ(recorder.events.size(), 1u);
}

TEST(Perturbation, TargetGroupWithoutRealKvSourcesIsSkipped) {
  // An SWA target on a FULL-only pool, and a FULL target without real data: nothing to flip.
  PerturbConfig swa = Fire(&PerturbConfig::real_kv_used_prob, /*warmup_steps=*/0);
  swa.target_group = GroupKind::kSwa;
  FakeEngine engine(PerturbOptions(swa));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(4);
  engine.Step();
  engine.Step();
  EXPECT_TRUE(recorder.events.empty());
  EXPECT_TRUE(engine.log.Contains(
      "kv_canary perturb real_kv_used: skipped because no buffer group of target_group=SWA has "
      "real-KV sources"));

  FakeEngineOptions options = PerturbOptions(Fire(&PerturbConfig::real_kv_used_prob, 0));
  options.config.real_data = RealKvHashMode::kNone;
  FakeEngine no_data(options);
  Record(*no_data.canary, recorder);
  no_data.AddRequest(4);
  no_data.Step();
  no_data.Step();
  EXPECT_TRUE(recorder.events.empty());
  EXPECT_TRUE(no_data.log.Contains("target_group=FULL has real-KV sources"));
}

// ---- Detection, end to end ----------------------------------------------------------------------

TEST(Perturbation, ReqToTokenIsCaughtByTheChainOrPositionCheck) {
  FakeEngine engine(PerturbOptions(Fire(&PerturbConfig::req_to_token_prob)));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(10);
  engine.AddRequest(10);
  for (int i = 0; i < 2; ++i) engine.Step();
  EXPECT_TRUE(recorder.events.empty()) << "fired during the warm-up";
  for (int i = 0; i < 3; ++i) engine.Step();
  ASSERT_FALSE(recorder.events.empty());
  const PerturbationEvent& event = recorder.events.front();
  EXPECT_EQ(event.kind, "req_to_token");
  EXPECT_EQ(event.step, 2);
  EXPECT_TRUE(engine.log.Contains(
      "kv_canary perturb req_to_token: req_pool_idx=" + std::to_string(event.row) + " position=" +
      std::to_string(event.position) + " original_slot=" + std::to_string(event.original) +
      " new_slot=" + std::to_string(event.replacement)));
  ASSERT_FALSE(recorder.rows.empty());
  EXPECT_EQ(recorder.steps.front(), event.step + 2) << "reported one step after the step";
  const int64_t successor = engine.SlotOf(event.row, event.position + 1);
  bool caught = false;
  for (const ViolationRow& row : recorder.rows) {
    const bool chain_or_position = row.fail_reason_bits & (FailReason::kVerifyChainHashMismatch |
                                                           FailReason::kVerifyPositionMismatch);
    if (row.kernel_kind == kHeadK && chain_or_position &&
        (row.slot_idx == event.replacement || row.slot_idx == successor)) {
      caught = true;
    }
  }
  EXPECT_TRUE(caught);
}

TEST(Perturbation, RealKvUsedIsCaughtByTailRealKvHash) {
  FakeEngine engine(PerturbOptions(Fire(&PerturbConfig::real_kv_used_prob)));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(12);
  engine.AddRequest(6);
  for (int i = 0; i < 5; ++i) engine.Step();
  ASSERT_FALSE(recorder.events.empty());
  const PerturbationEvent& event = recorder.events.front();
  EXPECT_EQ(event.kind, "real_kv_used");
  EXPECT_EQ(event.step, 2);
  EXPECT_EQ(event.replacement, event.original ^ 0xFF);
  ASSERT_FALSE(recorder.rows.empty());
  EXPECT_EQ(recorder.steps.front(), event.step + 2) << "TAIL of the same step sees it";
  EXPECT_TRUE(Caught(recorder, kTailK, FailReason::kVerifyRealKvHashMismatch, event.slot));
  ExpectNoHeadRows(recorder, kHeadK);
}

TEST(Perturbation, RealKvPostForwardIsCaughtByTheNextStepsTail) {
  FakeEngine engine(PerturbOptions(Fire(&PerturbConfig::real_kv_post_forward_prob)));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(5);
  engine.AddRequest(8);
  for (int i = 0; i < 6; ++i) engine.Step();
  ASSERT_FALSE(recorder.events.empty());
  const PerturbationEvent& event = recorder.events.front();
  EXPECT_EQ(event.kind, "real_kv_post_forward");
  EXPECT_EQ(event.step, 2);
  ASSERT_FALSE(recorder.rows.empty());
  // Flipped after step 2's TAIL stored the fingerprint: step 3's TAIL sees it, step 4 reports.
  EXPECT_EQ(recorder.steps.front(), event.step + 3);
  EXPECT_TRUE(Caught(recorder, kTailK, FailReason::kVerifyRealKvHashMismatch, event.slot));
  ExpectNoHeadRows(recorder, kHeadK);
}

// A radix view of one unlocked node holding the given slots.
class OneNodeRadix final : public RadixView {
 public:
  explicit OneNodeRadix(std::vector<int64_t> slots) : slots_(std::move(slots)) {}
  NodeId Root() const override { return 0; }
  std::vector<NodeId> Children(NodeId node) const override {
    return node == 0 ? std::vector<NodeId>{1} : std::vector<NodeId>{};
  }
  int64_t KeyLength(NodeId node) const override {
    return node == 0 ? 0 : static_cast<int64_t>(slots_.size());
  }
  std::vector<int64_t> DeviceSlots(NodeId node) const override {
    return node == 0 ? std::vector<int64_t>{} : slots_;
  }
  bool IsLocked(NodeId, bool) const override { return false; }
  bool IsSwaResident(NodeId) const override { return true; }

 private:
  std::vector<int64_t> slots_;
};

TEST(Perturbation, RealKvUnusedCacheRunsOnSweepStepsAndIsCaughtBySweep) {
  FakeEngineOptions options = PerturbOptions(Fire(&PerturbConfig::real_kv_unused_cache_prob));
  options.config.sweep_interval = 3;
  FakeEngine engine(options);
  Recorder recorder;
  Record(*engine.canary, recorder);
  const int64_t row = engine.AddRequest(4);
  engine.Step();
  // The cached prefix is request 1's prompt (slots written by the first step).
  OneNodeRadix radix(
      {engine.SlotOf(row, 0), engine.SlotOf(row, 1), engine.SlotOf(row, 2), engine.SlotOf(row, 3)});
  engine.canary->AttachRadixCache(&radix);
  for (int i = 1; i < 6; ++i) engine.Step();  // outer steps 1..5: only step 3 is a sweep step
  ASSERT_EQ(recorder.events.size(), 1u);
  const PerturbationEvent& event = recorder.events[0];
  EXPECT_EQ(event.kind, "real_kv_unused_cache");
  EXPECT_EQ(event.step, 3);
  EXPECT_EQ(engine.SlotOf(row, event.position), event.slot);
  EXPECT_TRUE(Caught(recorder, static_cast<int64_t>(CanaryLaunchTag::kSweepKFull),
                     FailReason::kVerifyRealKvHashMismatch, event.slot));
}

TEST(Perturbation, NextTokenSwapSwapsTwoEntriesAfterItsOwnWarmup) {
  FakeEngine engine(PerturbOptions(Fire(&PerturbConfig::next_token_swap_prob)));
  Recorder recorder;
  Record(*engine.canary, recorder);
  const std::vector<int64_t> original = {10, 20, 30, 40};
  std::vector<int64_t> sampled = original;
  engine.canary->PerturbNextTokens(sampled);  // call 0: warm-up
  engine.canary->PerturbNextTokens(sampled);  // call 1: warm-up
  EXPECT_EQ(sampled, original);
  std::vector<int64_t> single = {5};
  engine.canary->PerturbNextTokens(single);  // call 2: one row cannot swap
  EXPECT_EQ(single, std::vector<int64_t>{5});
  engine.canary->PerturbNextTokens(sampled);  // call 3
  ASSERT_EQ(recorder.events.size(), 1u);
  const PerturbationEvent& event = recorder.events[0];
  EXPECT_EQ(event.step, 3);
  const int64_t i = event.row, j = event.position;
  ASSERT_NE(i, j);
  std::vector<int64_t> expected = original;
  std::swap(expected[i], expected[j]);
  EXPECT_EQ(sampled, expected);
  EXPECT_EQ(event.original, original[i]);
  EXPECT_EQ(event.replacement, original[j]);
  EXPECT_TRUE(engine.log.Contains("kv_canary perturb next_token_swap: swapped i=" +
                                  std::to_string(i) + " j=" + std::to_string(j) + " step=3"));
}

TEST(Perturbation, NextTokenSwapIsCaughtByTheWriteInputAssert) {
  FakeEngineOptions options = PerturbOptions(Fire(&PerturbConfig::next_token_swap_prob));
  options.config.enable_write_input_assert = true;
  FakeEngine engine(options);
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(3);
  engine.AddRequest(5);
  engine.Step();  // prefill; sampler call 0
  engine.Step();  // sampler call 1
  EXPECT_TRUE(recorder.events.empty());
  engine.Step();  // sampler call 2: swaps the two decoded tokens
  ASSERT_EQ(recorder.events.size(), 1u);
  const PerturbationEvent event = recorder.events[0];  // a copy: the next step records more
  engine.Step();
  ASSERT_FALSE(recorder.rows.empty());
  EXPECT_EQ(recorder.steps.front(), 4) << "written in step 2, reported at the end of step 3";
  bool stored_j_expected_i = false, stored_i_expected_j = false;
  for (const ViolationRow& row : recorder.rows) {
    EXPECT_TRUE(row.fail_reason_bits & FailReason::kWriteTokenMismatch);
    EXPECT_FALSE(row.fail_reason_bits & ~(FailReason::kWriteTokenMismatch));
    if (row.stored_token == event.replacement && row.expected_token == event.original) {
      stored_j_expected_i = true;
    }
    if (row.stored_token == event.original && row.expected_token == event.replacement) {
      stored_i_expected_j = true;
    }
  }
  EXPECT_TRUE(stored_j_expected_i);
  EXPECT_TRUE(stored_i_expected_j);
}

}  // namespace
}  // namespace kvcanary::runtime
