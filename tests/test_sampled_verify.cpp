// Sampled verify (a kvcanary addition): the sampled positions of a row against a naive filter,
// the rotation's coverage (K consecutive phases verify every position), the plan of sampled
// inputs against the oracle (Plan, PlanOffsets + PlanEntries), AdvanceVerifyPhase, and the
// validation rows of verify_sample and verify_phase (each names the argument, writes nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/sample_math.h"
#include "kvcanary/kvcanary.h"
#include "property_oracle.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int64_t kSamples[] = {1, 2, 3, 8, 16};

// The positions of [start, end) SamplePositions describes, listed.
std::vector<int64_t> Listed(int64_t start, int64_t end, int64_t sample, int64_t phase) {
  PlanInputParams in;
  in.verify_sample = sample;
  in.verify_phase = &phase;
  in.verify_phase_len = 1;
  const SampledPositions sampled = SamplePositions(start, end, sample, SampleResidue(in, 3));
  std::vector<int64_t> positions;
  for (int64_t j = 0; j < sampled.Count(); ++j) {
    positions.push_back(SampledPosition(sampled, end, sample, j));
  }
  return positions;
}

std::vector<int64_t> NaivelySampled(int64_t start, int64_t end, int64_t sample, int64_t phase) {
  std::vector<int64_t> positions;
  for (int64_t p = start; p < end; ++p) {
    const int64_t rotated = ((p / kVerifySampleRun + phase) % sample + sample) % sample;
    if (rotated == 0 || p == end - 1) positions.push_back(p);
  }
  return positions;
}

TEST(SamplePositions, EqualTheNaiveFilter) {
  for (int64_t sample : {1, 2, 3, 5, 8, 16}) {
    for (int64_t phase = -20; phase <= 40; ++phase) {
      for (int64_t start = 0; start <= 40; ++start) {
        for (int64_t end = start - 2; end <= start + 100; ++end) {
          SCOPED_TRACE("K=" + std::to_string(sample) + " phase=" + std::to_string(phase) + " [" +
                       std::to_string(start) + ", " + std::to_string(end) + ")");
          ASSERT_EQ(Listed(start, end, sample, phase), NaivelySampled(start, end, sample, phase));
        }
      }
    }
  }
}

TEST(SamplePositions, KConsecutivePhasesCoverEveryPosition) {
  for (int64_t sample : kSamples) {
    std::vector<int> seen(300, 0);
    int64_t checked = 0;
    for (int64_t phase = 7; phase < 7 + sample; ++phase) {
      const std::vector<int64_t> positions = Listed(3, 300, sample, phase);
      for (int64_t p : positions) seen[p] += 1;
      checked = std::max<int64_t>(checked, static_cast<int64_t>(positions.size()));
    }
    for (int64_t p = 3; p < 299; ++p) EXPECT_EQ(seen[p], 1) << "K=" << sample << " p=" << p;
    EXPECT_EQ(seen[299], sample) << "the newest position is verified every forward";
    // A forward checks about 1/K of the range: whole runs of 16, at most one run more.
    EXPECT_LE(checked, 297 / sample + kVerifySampleRun + 1) << "K=" << sample;
  }
}

TEST(SamplePositions, ExtremeRangesStayDefined) {
  constexpr int64_t kMax = INT64_MAX;
  EXPECT_EQ(Listed(kMax - 40, kMax, 2, 0), NaivelySampled(kMax - 40, kMax, 2, 0));
  EXPECT_EQ(Listed(kMax - 40, kMax, 3, 1), NaivelySampled(kMax - 40, kMax, 3, 1));
  EXPECT_EQ(Listed(0, 1, kMaxVerifySample, INT64_MIN).size(), 1u);
  EXPECT_EQ(Listed(5, 5, 3, 0).size(), 0u);
}

// Random sampled plan inputs: a few rows over a small table, windows, padding rows, a phase of
// any sign (absent sometimes).
PlanInputs RandomSampledInputs(Rng& rng) {
  PlanInputs in;
  const int64_t rows = rng.Uniform(2, 8);
  const int64_t width = rng.Uniform(1, 50);
  in.req_to_token = HostTensor<int32_t>({rows, width});
  for (int32_t& slot : in.req_to_token.values()) slot = static_cast<int32_t>(rng.Uniform(0, 99));
  for (int64_t r = rng.Uniform(0, 10); r > 0; --r) {
    in.rp.push_back(rng.Chance(0.2) ? 0 : rng.Uniform(1, rows - 1));
    in.prefix.push_back(rng.Chance(0.05) ? -3 : rng.Uniform(0, width));
    in.extend.push_back(rng.Uniform(0, 3));
  }
  if (rng.Chance(0.4)) {
    in.window = rng.Uniform(1, width + 2);
    for (int64_t i = 0; i < 100; ++i) in.lut.push_back(rng.Uniform(0, 60));
  }
  if (rng.Chance(0.4)) {
    in.has_pool = true;
    in.pool = HostTensor<int32_t>({rows, width + 1});
    for (int32_t& token : in.pool.values()) token = static_cast<int32_t>(rng.Uniform(0, 9));
    for (size_t r = 0; r < in.rp.size(); ++r) in.valid_lens.push_back(rng.Uniform(0, width + 1));
  }
  in.sample = kSamples[rng.Uniform(0, std::size(kSamples) - 1)];
  // One phase for every row, one per table row, or fewer (clamped); absent sometimes.
  const int64_t phases = rng.Chance(0.2) ? 0 : rng.Chance(0.4) ? 1 : rng.Uniform(1, rows + 2);
  for (int64_t i = 0; i < phases; ++i) in.phases.push_back(rng.Uniform(-40, 40));
  return in;
}

TEST(SampledPlan, MatchesTheOracleAndTheTwoStages) {
  int64_t sampled_cases = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    const PlanInputs in = RandomSampledInputs(rng);
    const PlanBuffers fused = RandomCapacityBuffers(rng, in);
    PlanBuffers staged = fused;
    const PlanCall call(in);
    call.Fused(fused, rng.Chance(0.5));
    ExpectPlanMatchesOracle(in, fused);
    call.Staged(staged);
    EXPECT_EQ(staged.slots.values(), fused.slots.values());
    EXPECT_EQ(staged.positions.values(), fused.positions.values());
    EXPECT_EQ(staged.prevs.values(), fused.prevs.values());
    EXPECT_EQ(staged.tokens.values(), fused.tokens.values());
    EXPECT_EQ(staged.num_valid[0], fused.num_valid[0]);
    if (in.sample > 1 && Size(OraclePlan(in).entries) > 0) sampled_cases += 1;
    if (HasFailure()) return;
  }
  EXPECT_GT(sampled_cases, 200);
}

TEST(AdvanceVerifyPhase, AdvancesEachRowsEntryOrEveryEntry) {
  HostTensor<int64_t> phases = HostTensor<int64_t>::Of({5, -1, INT64_MAX, 7});
  // Padding rows (0) advance nothing; an index past the table clamps to its last entry; a row
  // given twice advances twice; the add wraps.
  const HostTensor<int64_t> rows = HostTensor<int64_t>::Of({2, 0, 1, 9, 1});
  AdvanceVerifyPhase({.verify_phase = phases.view(), .req_pool_indices = rows.view()});
  EXPECT_EQ(Head(phases, 4), (std::vector<int64_t>{5, 1, INT64_MIN, 8}));
  AdvanceVerifyPhase({.verify_phase = phases.view()});
  EXPECT_EQ(Head(phases, 4), (std::vector<int64_t>{6, 2, INT64_MIN + 1, 9}));
}

TEST(AdvanceVerifyPhase, RejectsAndWritesNothing) {
  HostTensor<int64_t> phase({1}, 4);
  const HostTensor<int64_t> empty({0});
  const HostTensor<int32_t> rows32({2}, 1);
  auto expect_rejected = [&](const AdvanceVerifyPhaseArgs& args, const std::string& message) {
    EXPECT_KVC_ERROR(AdvanceVerifyPhase(args), message);
    EXPECT_EQ(phase[0], 4);
  };
  expect_rejected({}, "kv-canary: verify_phase is required, got None");
  expect_rejected({.verify_phase = empty.view()},
                  "kv-canary: verify_phase length must be >= 1, got 0");
  expect_rejected({.verify_phase = Recast(phase, DType::kInt32)},
                  "kv-canary: verify_phase must have dtype torch.int64, got torch.int32");
  expect_rejected({.verify_phase = phase.view(), .req_pool_indices = rows32.view()},
                  "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32");
  expect_rejected({.verify_phase = phase.view(), .req_pool_indices = OnCuda(empty)},
                  "kv-canary: req_pool_indices must be on verify_phase's device cpu, got cuda:0");
  const TensorView read_only(phase.data(), DType::kInt64, Device::CPU(), {1}, {1}, false);
  expect_rejected({.verify_phase = read_only}, "kv-canary: verify_phase must be writable");
}

// Every plan op and FusedVerify check verify_sample and verify_phase the same way, before they
// write anything.
class SampledInputsValidation : public ::testing::Test {
 protected:
  SampledInputsValidation()
      : plan_(8, 2),
        rp_({2}, 1),
        prefix_({2}, 3),
        extend_({2}, 1),
        table_({2, 4}, 3),
        phase_({1}, 1),
        scratch_({kPlanOffsetsScratchMinLength}, 0),
        state_(8) {}

  ::kvcanary::PlanInputs Inputs() const {
    ::kvcanary::PlanInputs in =
        BatchInputs(rp_.view(), prefix_.view(), extend_.view(), table_.view());
    in.verify_sample = 4;
    in.verify_phase = phase_.view();
    return in;
  }

  // Each op over `in`, each expected to refuse with `message` and leave its outputs as they were.
  void ExpectEveryOpRejects(const ::kvcanary::PlanInputs& in, const std::string& message) {
    ByteSnapshot outputs(plan_.slots, plan_.positions, plan_.num_valid, plan_.enable, plan_.offsets,
                         scratch_, state_.kernel_run_counter, state_.write_index);
    PlanArgs plan = PlanCallOver(plan_, rp_.view(), prefix_.view(), extend_.view(), table_.view());
    plan.inputs = in;
    EXPECT_KVC_ERROR(Plan(plan), message);
    EXPECT_KVC_ERROR(PlanOffsets(OffsetsCallOver(plan_, scratch_.view(), in, 8)), message);
    EXPECT_KVC_ERROR(PlanEntries({.inputs = in,
                                  .verify_offsets_scratch = scratch_.view(),
                                  .verify_enable = plan_.enable.view(),
                                  .out_verify_slot_indices = plan_.slots.view(),
                                  .out_verify_expected_tokens = plan_.tokens.view(),
                                  .out_verify_expected_positions = plan_.positions.view(),
                                  .out_verify_prev_slot_indices = plan_.prevs.view()}),
                     message);
    EXPECT_KVC_ERROR(FusedVerify({.context = state_.Context(),
                                  .inputs = in,
                                  .verify_offsets_scratch = scratch_.view(),
                                  .verify_num_valid = plan_.num_valid.view(),
                                  .verify_enable = plan_.enable.view(),
                                  .verify_capacity = 8}),
                     message);
    EXPECT_TRUE(outputs.Unchanged());
  }

  PlanBuffers plan_;
  HostTensor<int64_t> rp_, prefix_, extend_;
  HostTensor<int32_t> table_;
  HostTensor<int64_t> phase_, scratch_;
  CanaryState state_;
};

TEST_F(SampledInputsValidation, AValidCallSamples) {
  PlanArgs plan = PlanCallOver(plan_, rp_.view(), prefix_.view(), extend_.view(), table_.view());
  plan.inputs = Inputs();
  Plan(plan);
  // Phase 1, K 4, prefix 3 per row: position 3 would be sampled (out of range), so only the
  // newest position 2 of each row.
  EXPECT_EQ(plan_.num_valid[0], 2);
  EXPECT_EQ(plan_.positions[0], 2);
  EXPECT_EQ(plan_.positions[1], 2);
}

TEST_F(SampledInputsValidation, SampleRange) {
  ::kvcanary::PlanInputs in = Inputs();
  in.verify_sample = 0;
  ExpectEveryOpRejects(in, "kv-canary: verify_sample must be in [1, 65536], got 0");
  in.verify_sample = kMaxVerifySample + 1;
  ExpectEveryOpRejects(in, "kv-canary: verify_sample must be in [1, 65536], got 65537");
}

TEST_F(SampledInputsValidation, PhaseTensor) {
  ::kvcanary::PlanInputs in = Inputs();
  const HostTensor<int64_t> empty({0});
  in.verify_phase = empty.view();
  ExpectEveryOpRejects(in, "kv-canary: verify_phase length must be >= 1, got 0");
  in.verify_phase = Recast(phase_, DType::kInt32);
  ExpectEveryOpRejects(in, "kv-canary: verify_phase must have dtype torch.int64, got torch.int32");
  in.verify_phase = OnCuda(phase_);
  PlanArgs plan = PlanCallOver(plan_, rp_.view(), prefix_.view(), extend_.view(), table_.view());
  plan.inputs = in;
  EXPECT_KVC_ERROR(Plan(plan),
                   "kv-canary: verify_phase must be on out_verify_slot_indices's device cpu, got "
                   "cuda:0");
}

}  // namespace
}  // namespace kvcanary::testing
