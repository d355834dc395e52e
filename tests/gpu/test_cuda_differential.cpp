// CPU vs CUDA on random valid inputs, the differential sweep:
// every op runs on host tensors and on identical device tensors, and every output byte must match
// (violation rows as a multiset). Each case prints its seed and knobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "backend_pair.h"
#include "differential_runs.h"
#include "device_buffer.h"
#include "device_state.h"
#include "kvcanary/kvcanary.h"
#include "plan_args.h"
#include "random_inputs.h"
#include "sweep_cases.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::CanaryState;
using testing::CpuStep;
using testing::OnBoth;
using testing::RunFusedStages;
using testing::RunFusedVerify;
using testing::RunStep;
using testing::SameStatesWithinTheRing;
using testing::CudaStep;
using testing::DeviceTensor;
using testing::HostTensor;
using testing::PlanBuffers;
using testing::Rng;
using testing::StepInputs;
using testing::SweepCase;

class CudaDifferentialSweep : public testing::DeviceTest,
                              public ::testing::WithParamInterface<SweepCase> {};

TEST_P(CudaDifferentialSweep, PlanVerifyWriteMatchTheCpu) {
  SCOPED_TRACE(testing::Describe(GetParam()));
  RunStep(testing::MakeStep(GetParam()));
}

TEST_P(CudaDifferentialSweep, FusedVerifyMatchesTheCpu) {
  SCOPED_TRACE(testing::Describe(GetParam()));
  RunFusedVerify(testing::MakeStep(GetParam()));
}

TEST_P(CudaDifferentialSweep, FusedStagesMatchTheCpu) {
  SCOPED_TRACE(testing::Describe(GetParam()));
  RunFusedStages(testing::MakeStep(GetParam()));
}

// Stored entries: stale arrays read when long enough; stored by HEAD and read by both stages.
TEST_P(CudaDifferentialSweep, FusedVerifyOfStoredEntriesMatchesTheCpu) {
  SCOPED_TRACE(testing::Describe(GetParam()));
  RunFusedVerify(testing::MakeStep(GetParam()), /*stored=*/true);
}

TEST_P(CudaDifferentialSweep, FusedStagesStoringTheirEntriesMatchTheCpu) {
  SCOPED_TRACE(testing::Describe(GetParam()));
  RunFusedStages(testing::MakeStep(GetParam()), /*stored=*/true);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CudaDifferentialSweep, ::testing::ValuesIn(testing::SweepCases()),
                         [](const ::testing::TestParamInfo<SweepCase>& info) {
                           return info.param.name;
                         });

class CudaDifferential : public testing::DeviceTest {};

// Everything on, over a canary buffer of the given row stride.
SweepCase StrideCase(int64_t stride) {
  SweepCase c{.name = "Stride" + std::to_string(stride),
              .seed = 0x57D0 + static_cast<uint64_t>(stride),
              .bs = 33,
              .prefixes = {1, 127, 128, 129},
              .extends = {1, 128}};
  c.lut = testing::LutKind::kPermutation;
  c.window = 128;
  c.table = testing::TableKind::kSparsePermuted;
  c.padding = testing::PaddingKind::kInterleaved;
  c.num_sources = 2;
  c.mode = RealKvHashMode::kAll;
  c.kv_row_padding = true;
  c.slot_stride_bytes = stride;
  c.token_pool = true;
  c.corrupt = true;
  c.skips = true;
  c.input_assert = true;
  c.chain_assert = true;
  c.paired = true;
  return c;
}

TEST_F(CudaDifferential, CanaryStride48MatchesTheCpu) {
  const SweepCase c = StrideCase(48);  // records 16-byte aligned: vector loads and stores
  SCOPED_TRACE(testing::Describe(c));
  RunStep(testing::MakeStep(c));
}

// One source spanning 24 layers (a kvcanary addition), with KV bytes flipped in random layers:
// write and verify fold every layer on both backends, through a table of device addresses.
TEST_F(CudaDifferential, SourceSpanningLayersMatchesTheCpu) {
  for (RealKvHashMode mode : {RealKvHashMode::kPartial, RealKvHashMode::kAll}) {
    SweepCase c = StrideCase(32);
    c.name = "Layers24";
    c.num_layers = 24;
    c.mode = mode;
    SCOPED_TRACE(testing::Describe(c));
    RunStep(testing::MakeStep(c));
    RunFusedVerify(testing::MakeStep(c));
  }
}

TEST_F(CudaDifferential, CanaryStride40FallsBackToByteCopies) {
  const SweepCase c = StrideCase(40);  // every odd slot's record is only 8-byte aligned
  SCOPED_TRACE(testing::Describe(c));
  RunStep(testing::MakeStep(c));
  RunFusedVerify(testing::MakeStep(c));
}

TEST_F(CudaDifferential, CanaryStride33StoresRecordWordsByteWise) {
  const SweepCase c = StrideCase(33);  // record words at every byte alignment
  SCOPED_TRACE(testing::Describe(c));
  RunStep(testing::MakeStep(c));
  RunFusedVerify(testing::MakeStep(c));
}

// A faulty batch whose every write lands on a slot another row's verify reads (a prefix slot of
// the next row): the stage's verify must still see the records from before the write, as the
// CPU's verify-then-write does.
TEST_F(CudaDifferential, AStageWritingVerifiedSlotsMatchesTheCpu) {
  const SweepCase c{
      .name = "WritesOnVerified", .seed = 0xA11A5, .bs = 64, .prefixes = {16, 64}, .extends = {1}};
  SCOPED_TRACE(testing::Describe(c));
  StepInputs in = testing::MakeStep(c);
  const int64_t bs = in.req_pool_indices.shape()[0];
  const int64_t width = in.req_to_token.shape()[1];
  const int64_t num_tokens = in.out_cache_loc.shape()[0];
  ASSERT_LE(num_tokens, 2 * bs) << "the slots below must stay distinct";
  for (int64_t i = 0; i < num_tokens; ++i) {  // prefix position i / bs (0 or 1) of another row
    const int64_t other = in.req_pool_indices[(i + 1) % bs];
    in.out_cache_loc.values()[i] = in.req_to_token.values()[other * width + i / bs];
  }
  RunFusedStages(in);
}

// launch_plan_offsets_kernel then launch_plan_entries_kernel on the sweep's cases that
// fit their bs <= 4096 limit: the plan buffers and the offsets scratch must match.
TEST_F(CudaDifferential, PlanStagesMatchTheCpu) {
  const std::vector<SweepCase> cases = testing::SweepCases();
  for (size_t i = 0; i < cases.size(); i += 5) {
    if (cases[i].bs > kPlanBsBlockSize) continue;
    SCOPED_TRACE(testing::Describe(cases[i]));
    const StepInputs in = testing::MakeStep(cases[i]);
    CpuStep cpu(in);
    CudaStep cuda(in);
    OnBoth(cpu, cuda, [](const auto& step) { PlanOffsets(step.OffsetsArgsOf()); });
    testing::ExpectSameTensor(cpu.stage_scratch, cuda.stage_scratch.ToHost(), "offsets scratch");
    OnBoth(cpu, cuda, [](const auto& step) { PlanEntries(step.EntriesArgsOf()); });
    testing::ExpectSamePlan(cpu.plan, cuda.plan.ToHost(), "plan stages");
  }
}

// A LUT shorter than the full slot range: indices past it clamp to its last entry (D3), so many
// entries share slots and verify records rows. Plan and verify only (writes would collide).
TEST_F(CudaDifferential, LutIndexPastTheEndClampsLikeTheCpu) {
  SweepCase c{.name = "ShortLut", .seed = 0xC1A3, .bs = 8, .prefixes = {16, 32}, .extends = {1}};
  c.lut = testing::LutKind::kPermutation;
  c.table = testing::TableKind::kSparsePermuted;
  SCOPED_TRACE(testing::Describe(c));
  StepInputs in = testing::MakeStep(c);
  const HostTensor<int64_t>& full = *in.lut;
  const int64_t len = full.shape()[0] / 2;
  in.lut = HostTensor<int64_t>::Of(
      std::vector<int64_t>(full.values().begin(), full.values().begin() + len));
  RunStep(in, /*write=*/false);
}

// More violations than ring rows: the ring is fill-once, so the CPU keeps its first rows and CUDA
// some subset of the same rows; write_index counts them all on both.
TEST_F(CudaDifferential, RingOverflowKeepsRowsOfTheCpuSet) {
  const SweepCase c{
      .name = "RingOverflow", .seed = 0x0F10, .bs = 33, .prefixes = {128, 129}, .extends = {1}};
  SCOPED_TRACE(testing::Describe(c));
  StepInputs in = testing::MakeStep(c);
  // Flip the position of the first 16 records of every row: dozens of rows.
  for (int64_t r = 0; r < c.bs; ++r) {
    const int64_t rp = in.req_pool_indices[r];
    for (int64_t pos = 0; rp != 0 && pos < 16; ++pos) {
      in.primary.state.canary[in.req_to_token.at(rp, pos) * kCanarySlotBytes + 8] ^= 1;
    }
  }
  StepInputs all_rows = in;
  in.primary.state.ring = HostTensor<int64_t>({8, kViolationFields});
  CpuStep reference(all_rows);
  CpuStep cpu(in);
  CudaStep cuda(in);
  for (CpuStep* step : {&reference, &cpu}) {
    Plan(step->PlanArgsOf());
    Verify(step->VerifyArgsOf());
  }
  Plan(cuda.PlanArgsOf());
  Verify(cuda.VerifyArgsOf());
  const CanaryState gpu = cuda.primary.state.ToHost();
  const std::vector<ViolationRow> in_order = reference.primary.state.rows();
  const std::vector<ViolationRow> every = testing::SortRows(in_order);
  ASSERT_GT(every.size(), 8u);
  EXPECT_EQ(cpu.primary.state.write_index[0], static_cast<int32_t>(every.size()));
  EXPECT_EQ(gpu.write_index[0], static_cast<int32_t>(every.size()));
  EXPECT_EQ(cpu.primary.state.rows(),
            std::vector<ViolationRow>(in_order.begin(), in_order.begin() + 8));
  const std::vector<ViolationRow> kept = testing::SortRows(gpu.rows());
  ASSERT_EQ(kept.size(), 8u);
  for (const ViolationRow& row : kept) {
    EXPECT_TRUE(std::find(every.begin(), every.end(), row) != every.end()) << row;
  }
  EXPECT_TRUE(std::adjacent_find(kept.begin(), kept.end()) == kept.end()) << "a row kept twice";
  testing::ExpectSameTensor(cpu.primary.state.slot_run_counter, gpu.slot_run_counter,
                            "slot_run_counter");
}

// scatter with odd sizes, strided views, offsets that run backwards or past the input,
// rows longer than the pool and pool rows out of range.
TEST_F(CudaDifferential, ScatterMatchesTheCpu) {
  const int64_t sizes[] = {0, 1, 7, 33, 733, 4097};
  for (int trial = 0; trial < 12; ++trial) {
    const uint64_t seed = 0x5CA7 + static_cast<uint64_t>(trial);
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Rng rng(seed);
    const int64_t bs = sizes[trial % 6];
    const int64_t step = trial % 2 == 1 ? 2 : 1;  // element stride of the 1-D inputs
    const int64_t total = trial == 6 ? 0 : rng.Int(1, 5000);
    const int64_t pool_rows = bs + 3;
    const int64_t width = rng.Int(1, 300);
    const int64_t pitch = width + (step == 2 ? 5 : 0);
    HostTensor<int64_t> flat({total * step + 1});
    rng.Fill(flat.values());
    HostTensor<int64_t> offsets({(bs + 1) * step});
    HostTensor<int64_t> rp({std::max<int64_t>(bs, 1) * step});
    std::vector<int64_t> rows(pool_rows + 4);  // distinct, some outside [0, pool_rows)
    std::iota(rows.begin(), rows.end(), int64_t{-2});
    rng.Shuffle(rows.begin(), rows.end());
    offsets[0] = rng.Int(-3, 5);
    for (int64_t r = 0; r < bs; ++r) {
      offsets[(r + 1) * step] = offsets[r * step] + rng.Int(-5, 400);
      rp[r * step] = rows[r];
    }
    HostTensor<int32_t> pool({pool_rows, pitch});
    rng.Fill(pool.values());

    const DeviceTensor<int64_t> flat_d(flat), offsets_d(offsets), rp_d(rp);
    const DeviceTensor<int32_t> pool_d(pool);
    auto args = [&](const auto& f, const auto& o, const auto& p, const auto& out) {
      return ScatterArgs{f.view({total}, {step}), o.view({bs + 1}, {step}), p.view({bs}, {step}),
                         out.view({pool_rows, width}, {pitch, 1})};
    };
    Scatter(args(flat, offsets, rp, pool));
    Scatter(args(flat_d, offsets_d, rp_d, pool_d));
    testing::ExpectSameTensor(pool, pool_d.ToHost(), "pool_out");
  }
}

// swa_translate: negative values pass through, indices past the LUT clamp; out of
// place and in place.
TEST_F(CudaDifferential, SwaTranslateMatchesTheCpu) {
  const int64_t sizes[] = {0, 1, 19, 733, 4097, 100003};
  for (int trial = 0; trial < 6; ++trial) {
    const uint64_t seed = 0x7A55 + static_cast<uint64_t>(trial);
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Rng rng(seed);
    const int64_t n = sizes[trial];
    const int64_t lut_len = rng.Int(1, 5000);
    HostTensor<int64_t> lut({lut_len});
    for (int64_t i = 0; i < lut_len; ++i) lut[i] = rng.Int(-2, int64_t{1} << 40);
    HostTensor<int64_t> in({n});
    for (int64_t i = 0; i < n; ++i) {
      in[i] = rng.OneIn(50) ? rng.Int(-5, -1) : rng.Int(0, lut_len + 10);
      if (rng.OneIn(200)) in[i] = int64_t{1} << 50;
    }
    HostTensor<int64_t> out({n});
    rng.Fill(out.values());
    const DeviceTensor<int64_t> lut_d(lut), in_d(in), out_d(out);
    SwaTranslate(SwaTranslateArgs{in.view(), lut.view(), out.view()});
    SwaTranslate(SwaTranslateArgs{in_d.view(), lut_d.view(), out_d.view()});
    testing::ExpectSameTensor(out, out_d.ToHost(), "out_slot_indices");
    testing::ExpectSameTensor(in, in_d.ToHost(), "slot_indices (read only)");
    SwaTranslate(SwaTranslateArgs{in.view(), lut.view(), in.view()});
    SwaTranslate(SwaTranslateArgs{in_d.view(), lut_d.view(), in_d.view()});
    testing::ExpectSameTensor(in, in_d.ToHost(), "in place");
  }
}

// Device values a caller could get wrong (D2, D7): counts past the capacity or negative, slots,
// predecessors and seeds outside the buffer, write ranges outside the tokens. Every backend clamps
// or skips the same way.
TEST_F(CudaDifferential, OutOfRangeDeviceValuesClampLikeTheCpu) {
  Rng rng(0xD2D7);
  CanaryState host(64, 256);
  rng.Fill(host.canary.values());  // random records: almost every checked entry fails
  host.chain_assert[0] = 1;
  PlanBuffers plan(20, 4);
  const int64_t slots[] = {-3, 0, 64, 70, int64_t{1} << 40};
  const int64_t prevs[] = {-5, -1, 0, 64, int64_t{1} << 40};
  for (int64_t e = 0; e < 20; ++e) {
    plan.slots[e] = rng.OneIn(3) ? slots[rng.Int(0, 4)] : rng.Int(1, 63);
    plan.prevs[e] = rng.OneIn(3) ? prevs[rng.Int(0, 4)] : rng.Int(1, 63);
    plan.positions[e] = rng.Int(0, 9);
    plan.tokens[e] = rng.OneIn(2) ? -1 : rng.Int(0, 9);
  }
  plan.num_valid[0] = 25;  // clamps to the capacity
  // Rows: [-7, 3) clamps to [0, 3); [3, 3) is empty; [3, 9); [9, 1000) clamps to [9, 12).
  const int64_t offsets[] = {-7, 3, 3, 9, 1000};
  std::copy(std::begin(offsets), std::end(offsets), plan.offsets.values().begin());
  const int64_t seeds[] = {int64_t{1} << 40, 5, 7, -9};  // >= N acts as -1; 5, 7 chain-assert
  std::copy(std::begin(seeds), std::end(seeds), plan.seeds.values().begin());
  plan.num_valid_reqs[0] = 9;  // clamps to the capacity
  const HostTensor<int64_t> ids = HostTensor<int64_t>::Of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const HostTensor<int64_t> positions =
      HostTensor<int64_t>::Of({0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12});
  const HostTensor<int64_t> loc =
      HostTensor<int64_t>::Of({10, 11, 64, 12, 13, -1, 14, 15, 16, 17, int64_t{1} << 33, 18});
  const HostTensor<int64_t> expected_ids =
      HostTensor<int64_t>::Of({1, 2, 3, 4, 5, 6, 0, 8, 9, 10, 11, 12});

  testing::DeviceCanaryState state_d(host);
  const testing::DevicePlanBuffers plan_d(plan);
  const DeviceTensor<int64_t> ids_d(ids), positions_d(positions), loc_d(loc),
      expected_ids_d(expected_ids);
  auto run = [](const auto& state, const auto& p, bool check, const auto& i, const auto& pos,
                const auto& l, const auto& e) {
    Verify(VerifyArgs{state.Context(), p.verify(), check, std::nullopt});
    WriteArgs w = testing::WriteCall(state.Context(), p.write(), i.view(), pos.view(), l.view());
    w.enable_write_input_assert = true;
    w.expected_input_tokens = e.view();
    w.expected_input_positions = pos.view();
    Write(w);
  };
  for (bool check : {true, false}) {
    run(host, plan, check, ids, positions, loc, expected_ids);
    run(state_d, plan_d, check, ids_d, positions_d, loc_d, expected_ids_d);
    testing::ExpectSameState(host, state_d.ToHost(), check ? "token check on" : "token check off");
  }
  // A negative count: verify only counts the launch.
  plan.num_valid[0] = -4;
  const testing::DevicePlanBuffers negative_d(plan);
  Verify(VerifyArgs{host.Context(), plan.verify(), true, std::nullopt});
  Verify(VerifyArgs{state_d.Context(), negative_d.verify(), true, std::nullopt});
  testing::ExpectSameState(host, state_d.ToHost(), "negative verify_num_valid");
}

}  // namespace
}  // namespace kvcanary
