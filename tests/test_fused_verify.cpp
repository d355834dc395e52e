// FusedVerify (a kvcanary addition): on seeded random inputs (padding rows, clamped reads, SWA
// tables, expected-token pools, random capacities and device counts, records partly consistent
// and partly corrupt) it must check exactly what Plan + Verify check: the same rows in the same
// order, the same counters, for one half and for a K/V pair. The offsets-only plan that feeds it
// must produce the same stage-1 outputs as the full plan. Each validation check raises its
// message and writes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fused_verify_cases.h"
#include "kvcanary/kvcanary.h"
#include "property_oracle.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int64_t kRingCapacity = 64;

// Seeded cases of FusedVerify against Plan + Verify (a paired FusedVerify against Verify of K, then
// of V), without stored entries and with them (the plan's, read; too short, derived); `sampled`:
// with a verify_sample K in {1, 2, 3, 8, 16} and a phase of any sign (sampled verify).
void ExpectFusedChecksWhatPlanThenVerifyChecks(bool sampled) {
  int64_t rows_seen = 0, clean_entries_seen = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    const int64_t num_slots = rng.Uniform(4, 200);
    PlanInputs in = RandomInputs(rng, num_slots);
    if (sampled) {
      constexpr int64_t kSamples[] = {1, 2, 3, 8, 16};
      in.sample = kSamples[rng.Uniform(0, 4)];
      for (int64_t n = rng.Chance(0.8) ? rng.Uniform(1, 10) : 0; n > 0; --n) {
        in.phases.push_back(rng.Uniform(-30, 30));
      }
    }
    const RealKvHashMode mode = ModeOf(rng.Uniform(0, 2));
    const std::vector<KvSource> sources = RandomSources(rng, num_slots);
    const bool check_token = rng.Chance(0.5);
    const bool paired = rng.Chance(0.4);
    CanaryState k(num_slots, kRingCapacity, RandomStride(seed));
    CanaryState v(num_slots, kRingCapacity, RandomStride(seed + 1));
    FillRecords(rng, in, sources, mode, k);
    FillRecords(rng, in, sources, mode, v);
    CanaryState fused_k = k, fused_v = v, stored_k = k, stored_v = v, short_k = k, short_v = v;

    const PlanCall call(in);
    PlanBuffers full = RandomCapacityBuffers(rng, in);
    const int64_t capacity = full.slots.shape()[0];
    const int64_t write_capacity = full.seeds.shape()[0];
    call.Fused(full, /*with_scratch=*/true);
    PlanBuffers offsets_only = SentinelBuffers(capacity, write_capacity);
    const HostTensor<int64_t> scratch({in.bs() + 1}, kSentinel);
    FusedVerifyArgs fused = call.OffsetsOnly(offsets_only, scratch, capacity);
    EXPECT_EQ(offsets_only.num_valid[0], full.num_valid[0]);
    EXPECT_EQ(offsets_only.enable[0], full.enable[0]);
    EXPECT_EQ(Values(offsets_only.offsets), Values(full.offsets));
    EXPECT_EQ(Values(offsets_only.seeds), Values(full.seeds));
    EXPECT_EQ(offsets_only.num_valid_reqs[0], full.num_valid_reqs[0]);
    if (rng.Chance(0.2)) {
      // A device count below stage 1's total, which both clamp (D2). (Above it, Verify would read
      // plan entries stage 2 never wrote: no state a plan can produce.)
      const int64_t total = Size(OraclePlan(in).entries);
      const auto count = static_cast<int32_t>(rng.Uniform(-3, std::min(total, capacity)));
      full.num_valid[0] = offsets_only.num_valid[0] = count;
    }

    // A paired fused verify against two plain ones, K then V; in half the pairs V reports into
    // K's ring, as a runtime's halves do, so the order of the two halves' rows is checked too.
    const bool shared_ring = paired && rng.Chance(0.5);
    const auto v_context = [&](CanaryState& state_v, CanaryState& state_k) {
      LaunchContext context = ContextWith(state_v, sources, mode);
      if (shared_ring) {
        context.violation_ring = state_k.ring.view();
        context.violation_write_index = state_k.write_index.view();
      }
      return context;
    };
    fused.check_verify_expected_token = check_token;
    const auto run_fused = [&](CanaryState& state_k, CanaryState& state_v,
                               std::optional<VerifyPlanView> stored) {
      FusedVerifyArgs args = fused;
      args.context = ContextWith(state_k, sources, mode);
      if (paired) args.paired_context = v_context(state_v, state_k);
      args.stored_entries = stored;
      FusedVerify(args);
    };
    Verify(VerifyArgs{ContextWith(k, sources, mode), full.verify(), check_token});
    if (paired) Verify(VerifyArgs{v_context(v, k), full.verify(), check_token});
    run_fused(fused_k, fused_v, std::nullopt);
    ExpectSameOutcome(k, fused_k);
    if (paired) ExpectSameOutcome(v, fused_v);
    // Stored entries: the full plan's arrays hold them (when it stored any), so reading them
    // checks the same; arrays one entry short of the count are never read (it derives).
    run_fused(stored_k, stored_v, full.verify());
    ExpectSameOutcome(k, stored_k);
    if (paired) ExpectSameOutcome(v, stored_v);
    const int64_t n = fused_k.slot_run_counter[0];
    if (n >= 1) {
      const PlanBuffers short_arrays = SentinelBuffers(n - 1, 1);
      run_fused(short_k, short_v, short_arrays.verify());
      ExpectSameOutcome(k, short_k);
      if (paired) ExpectSameOutcome(v, short_v);
    }
    rows_seen += fused_k.write_index[0];
    clean_entries_seen += fused_k.slot_run_counter[0] - fused_k.write_index[0];
  }
  // The cases reach both outcomes, so the comparison above could fail either way.
  EXPECT_GT(rows_seen, sampled ? 300 : 1000);
  EXPECT_GT(clean_entries_seen, sampled ? 300 : 1000);
}

TEST(FusedVerify, ChecksWhatPlanThenVerifyChecks) {
  ExpectFusedChecksWhatPlanThenVerifyChecks(false);
}

TEST(FusedVerify, SampledChecksWhatPlanThenVerifyChecks) {
  ExpectFusedChecksWhatPlanThenVerifyChecks(true);
}

TEST(FusedVerify, EmptyBatchCountsTheLaunchOnly) {
  CanaryState state(8);
  const HostTensor<int64_t> empty({0});
  const HostTensor<int32_t> table({2, 4}, 1);
  const HostTensor<int64_t> scratch({1}, 0);
  const HostTensor<int32_t> num_valid({1}, 5);  // stale: an empty batch checks nothing
  const HostTensor<int32_t> enable({1}, 1);
  FusedVerify({.context = state.Context(),
               .inputs = BatchInputs(empty.view(), empty.view(), TensorView(), table.view()),
               .verify_offsets_scratch = scratch.view(),
               .verify_num_valid = num_valid.view(),
               .verify_enable = enable.view(),
               .verify_capacity = 8});
  EXPECT_EQ(state.kernel_run_counter[0], 1);
  EXPECT_EQ(state.slot_run_counter[0], 0);
  EXPECT_EQ(state.write_index[0], 0);
}

// ---------------------------------------------------------------------------------------------
// Validation: a valid call, one thing broken at a time.

class FusedVerifyValidation : public ::testing::Test {
 protected:
  FusedVerifyValidation()
      : state_(8),
        rp_({2}, 1),
        prefix_({2}, 2),
        table_({2, 4}, 3),
        scratch_({3}, 0),
        num_valid_({1}, 4),
        enable_({1}, 1),
        lut_({8}, 1),
        pool_({2, 4}, 1),
        lens_({2}, 2) {
    std::fill(state_.canary.values().begin(), state_.canary.values().end(), 0xA5);
    state_.write_index[0] = 3;
    state_.slot_run_counter[0] = 100;
    state_.kernel_run_counter[0] = 7;
    args_ = {.context = state_.Context(),
             .inputs = BatchInputs(rp_.view(), prefix_.view(), TensorView(), table_.view()),
             .verify_offsets_scratch = scratch_.view(),
             .verify_num_valid = num_valid_.view(),
             .verify_enable = enable_.view(),
             .verify_capacity = 4};
  }

  // A token check with a valid pool and its lengths.
  void check_token() {
    args_.check_verify_expected_token = true;
    args_.inputs.req_to_verify_expected_tokens = pool_.view();
    args_.inputs.req_to_verify_expected_tokens_valid_lens = lens_.view();
  }

  void ExpectRejected(const std::string& message) {
    ByteSnapshot outputs(state_.canary, state_.ring, state_.write_index, state_.slot_run_counter,
                         state_.kernel_run_counter);
    EXPECT_KVC_ERROR(FusedVerify(args_), message);
    EXPECT_TRUE(outputs.Unchanged());
  }

  // With `field` replaced by `bad` the call is rejected with `message`; `field` is then restored.
  void ExpectRejectedWith(TensorView& field, const TensorView& bad, const std::string& message) {
    const TensorView good = field;
    field = bad;
    ExpectRejected(message);
    field = good;
  }

  CanaryState state_;
  HostTensor<int64_t> rp_, prefix_;
  HostTensor<int32_t> table_;
  HostTensor<int64_t> scratch_;
  HostTensor<int32_t> num_valid_, enable_;
  HostTensor<int64_t> lut_;
  HostTensor<int32_t> pool_;
  HostTensor<int64_t> lens_;
  FusedVerifyArgs args_;
};

TEST_F(FusedVerifyValidation, AValidCallRuns) {
  FusedVerify(args_);
  EXPECT_EQ(state_.kernel_run_counter[0], 8);
  EXPECT_EQ(state_.slot_run_counter[0], 104);
}

TEST_F(FusedVerifyValidation, RequiredTensors) {
  ExpectRejectedWith(args_.verify_offsets_scratch, TensorView(),
                     "kv-canary: verify_offsets_scratch is required, got None");
  ExpectRejectedWith(args_.inputs.req_to_token, TensorView(),
                     "kv-canary: req_to_token or block_table is required, got neither");
}

TEST_F(FusedVerifyValidation, ContextChecksOfVerify) {
  HostTensor<uint8_t> narrow({8, 16});
  args_.context.canary_buf = narrow.view();
  ExpectRejected(
      "kv-canary: canary_verify: slot_stride_bytes must hold at least 32 bytes per slot, got 16");
}

TEST_F(FusedVerifyValidation, WindowNeedsATable) {
  args_.inputs.swa_window_size = 2;
  ExpectRejected(
      "kv-canary: fused_verify requires full_to_swa_index_mapping when "
      "swa_window_size > 0");
}

TEST_F(FusedVerifyValidation, PoolNeedsValidLens) {
  args_.inputs.req_to_verify_expected_tokens = pool_.view();
  ExpectRejected(
      "kv-canary: fused_verify requires req_to_verify_expected_tokens_valid_lens when "
      "req_to_verify_expected_tokens is set");
}

TEST_F(FusedVerifyValidation, CapacityRange) {
  args_.verify_capacity = -1;
  ExpectRejected("kv-canary: fused_verify verify_capacity must be in [0, 2147483647], got -1");
}

TEST_F(FusedVerifyValidation, BatchVectors) {
  ExpectRejectedWith(args_.inputs.prefix_lens, prefix_.view({1}),
                     "kv-canary: prefix_lens length must be 2, got 1");
  ExpectRejectedWith(args_.inputs.req_pool_indices, Recast(rp_, DType::kInt32),
                     "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32");
}

TEST_F(FusedVerifyValidation, StageOneOutputs) {
  ExpectRejectedWith(args_.verify_offsets_scratch, scratch_.view({2}),
                     "kv-canary: verify_offsets_scratch length must be >= 3, got 2");
  ExpectRejectedWith(args_.verify_enable, Recast(lens_, DType::kInt64),
                     "kv-canary: verify_enable must have dtype torch.int32, got torch.int64");
}

TEST_F(FusedVerifyValidation, TableLayoutAndPitch) {
  args_.inputs.req_to_token_stride0 = 5;
  ExpectRejected("kv-canary: req_to_token_stride0=5 does not match req_to_token.stride(0)=4");
}

TEST_F(FusedVerifyValidation, OneDevice) {
  args_.verify_num_valid = OnCuda(num_valid_);
  ExpectRejected("kv-canary: verify_num_valid must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(FusedVerifyValidation, CountsAndContiguity) {
  const HostTensor<int32_t> two({2}, 1);
  ExpectRejectedWith(args_.verify_num_valid, two.view(),
                     "kv-canary: verify_num_valid length must be 1, got 2");
  const HostTensor<int64_t> wide({6}, 2);
  ExpectRejectedWith(args_.inputs.prefix_lens, Gapped(wide),
                     "kv-canary: prefix_lens must be contiguous");
}

TEST_F(FusedVerifyValidation, TableDTypeAndRank) {
  const HostTensor<int64_t> table64({2, 4}, 3);
  ExpectRejectedWith(args_.inputs.req_to_token, table64.view(),
                     "kv-canary: req_to_token must have dtype torch.int32, got torch.int64");
  ExpectRejectedWith(args_.inputs.req_to_token, table_.view({8}),
                     "kv-canary: req_to_token must be 2-D, got shape (8,)");
}

TEST_F(FusedVerifyValidation, SwaTableChecks) {
  args_.inputs.swa_window_size = 2;
  args_.inputs.full_to_swa_index_mapping = lut_.view();
  ExpectRejectedWith(
      args_.inputs.full_to_swa_index_mapping, Recast(lut_, DType::kInt32),
      "kv-canary: full_to_swa_index_mapping must have dtype torch.int64, got torch.int32");
  ExpectRejectedWith(args_.inputs.full_to_swa_index_mapping, lut_.view({0}),
                     "kv-canary: full_to_swa_index_mapping length must be >= 1, got 0");
  FusedVerify(args_);  // valid again
}

TEST_F(FusedVerifyValidation, TokenPoolChecks) {
  check_token();
  const HostTensor<int64_t> pool64({2, 4}, 1);
  ExpectRejectedWith(
      args_.inputs.req_to_verify_expected_tokens, pool64.view(),
      "kv-canary: req_to_verify_expected_tokens must have dtype torch.int32, got torch.int64");
  ExpectRejectedWith(args_.inputs.req_to_verify_expected_tokens_valid_lens, lens_.view({1}),
                     "kv-canary: req_to_verify_expected_tokens_valid_lens length must be 2, got 1");
}

TEST_F(FusedVerifyValidation, PairMustBeAnotherBuffer) {
  args_.paired_context = args_.context;
  ExpectRejected("kv-canary: paired_context.canary_buf must be a different buffer from canary_buf");
}

TEST(OffsetsOnlyPlan, RequiresTheScratch) {
  PlanBuffers out(4, 2);
  const HostTensor<int64_t> rp({1}, 1), prefix({1}, 1), extend({1}, 1);
  const HostTensor<int32_t> table({2, 4}, 1);
  PlanArgs args = PlanCallOver(out, rp.view(), prefix.view(), extend.view(), table.view());
  args.verify_plan_out = VerifyPlanView{TensorView(), TensorView(),         TensorView(),
                                        TensorView(), out.num_valid.view(), out.enable.view()};
  EXPECT_KVC_ERROR(Plan(args),
                   "kv-canary: launch_canary_plan_kernels requires verify_offsets_scratch for an "
                   "offsets-only plan (no verify entry arrays: fused_verify reads the offsets), "
                   "got None");
  const HostTensor<int64_t> scratch({2}, 0);
  args.verify_offsets_scratch = scratch.view();
  args.verify_capacity = -1;
  EXPECT_KVC_ERROR(Plan(args),
                   "kv-canary: launch_canary_plan_kernels verify_capacity must be non-negative, "
                   "got -1");
  args.verify_capacity = 0;  // any capacity: no array to match
  Plan(args);
  EXPECT_EQ(out.enable[0], 0);  // one entry overflows capacity 0
  EXPECT_EQ(out.num_valid[0], 0);
}

}  // namespace
}  // namespace kvcanary::testing
