// Validation of Write (spec/kernels.md §11, rows W1-W12 with G7-G9). Each case starts from a
// valid call, breaks one thing, and asserts the exact message and that no output byte changed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/write.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

class WriteValidation : public ::testing::Test {
 protected:
  WriteValidation()
      : state_(8),
        plan_(1, 2),
        kv_({8, 64}),
        input_ids_(HostTensor<int64_t>::Of({11, 12, 13})),
        positions_(HostTensor<int64_t>::Of({0, 1, 2})),
        out_cache_loc_(HostTensor<int64_t>::Of({2, 3, 4})),
        expected_tokens_(input_ids_),
        expected_positions_(positions_) {
    state_.canary.values().assign(state_.canary.values().size(), 0xA5);  // "unchanged" must mean
    state_.ring.values().assign(state_.ring.values().size(), -6);        // something: no zeros
    state_.write_index[0] = 3;
    state_.slot_run_counter[0] = 100;
    state_.kernel_run_counter[0] = 7;
    plan_.offsets.values() = {0, 2, 3};
    plan_.seeds.values() = {-1, 1};
    plan_.num_valid_reqs[0] = 2;
    args_.context = state_.Context();
    args_.context.real_kv_sources[0] = MakeRealKvSource(kv_.view(), 1, 64, 32);
    args_.context.num_real_kv_sources = 1;
    args_.context.real_kv_hash_mode = static_cast<int32_t>(RealKvHashMode::kAll);
    args_.plan = plan_.write();
    args_.input_ids = input_ids_.view();
    args_.positions = positions_.view();
    args_.out_cache_loc = out_cache_loc_.view();
  }

  // Asserts that Write raises exactly `message` and leaves every output byte as it was.
  void ExpectRejected(const std::string& message) {
    ByteSnapshot outputs(state_.canary, state_.ring, state_.write_index, state_.slot_run_counter,
                         state_.kernel_run_counter);
    EXPECT_KVC_ERROR(Write(args_), message);
    EXPECT_TRUE(outputs.Unchanged());
  }

  // Turns the input assert on with both expected tensors given.
  void EnableInputAssert() {
    args_.enable_write_input_assert = true;
    args_.expected_input_tokens = expected_tokens_.view();
    args_.expected_input_positions = expected_positions_.view();
  }

  LaunchContext& context() { return args_.context; }
  WritePlanView& plan() { return args_.plan; }

  CanaryState state_;
  PlanBuffers plan_;
  HostTensor<uint8_t> kv_;
  HostTensor<int64_t> input_ids_, positions_, out_cache_loc_;
  HostTensor<int64_t> expected_tokens_, expected_positions_;
  HostTensor<int64_t> spare_int64_{{4}};  // room for non-contiguous or mis-sized [1] views
  HostTensor<int32_t> spare_int32_{{4}};
  WriteArgs args_;
};

// --- The valid baseline ---

TEST_F(WriteValidation, ValidBaselineWritesRecordsAndCounts) {
  Write(args_);
  EXPECT_EQ(state_.kernel_run_counter[0], 8);
  EXPECT_EQ(state_.slot_run_counter[0], 103);
  EXPECT_EQ(state_.record(4).token, 13);
}

TEST_F(WriteValidation, InputAssertWithBothExpectedTensorsIsAccepted) {
  EnableInputAssert();
  Write(args_);
  EXPECT_EQ(state_.kernel_run_counter[0], 8);
  EXPECT_EQ(state_.write_index[0], 3);  // inputs equal their expectations: no row
}

TEST_F(WriteValidation, AbsentInputIdsRaises) {
  args_.input_ids = TensorView();
  ExpectRejected("kv-canary: input_ids is required, got None");
}

// --- W1-W6: source count, contiguity, expected tensors, source layouts ---

TEST_F(WriteValidation, W1MoreThanFourSourcesRaises) {
  context().num_real_kv_sources = 5;
  ExpectRejected("kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5");
}

TEST_F(WriteValidation, W2CanaryBufNotContiguousRaises) {
  context().canary_buf = state_.canary.view({4, 32}, {64, 1});
  ExpectRejected("kv-canary: canary_buf must be contiguous");
}

TEST_F(WriteValidation, W2PositionsNotContiguousRaises) {
  args_.positions = Gapped(positions_);
  ExpectRejected("kv-canary: positions must be contiguous");
}

TEST_F(WriteValidation, W2OutCacheLocNotContiguousRaises) {
  args_.out_cache_loc = Gapped(out_cache_loc_);
  ExpectRejected("kv-canary: out_cache_loc must be contiguous");
}

TEST_F(WriteValidation, W2ReportsTheFirstNonContiguousTensorInOrder) {
  args_.input_ids = Gapped(input_ids_);
  plan().write_offsets = Gapped(plan_.offsets);
  ExpectRejected("kv-canary: plan.write_offsets must be contiguous");
}

TEST_F(WriteValidation, W3AssertOnWithoutExpectedTokensRaises) {
  EnableInputAssert();
  args_.expected_input_tokens = TensorView();
  ExpectRejected(
      "kv-canary: expected input tensors are required when enable_write_input_assert=True");
}

TEST_F(WriteValidation, W3AssertOnWithoutExpectedPositionsRaises) {
  EnableInputAssert();
  args_.expected_input_positions = TensorView();
  ExpectRejected(
      "kv-canary: expected input tensors are required when enable_write_input_assert=True");
}

TEST_F(WriteValidation, W4ExpectedTokensNotContiguousRaises) {
  EnableInputAssert();
  args_.expected_input_tokens = Gapped(expected_tokens_);
  ExpectRejected("kv-canary: expected_input_tokens must be contiguous");
}

TEST_F(WriteValidation, W4ExpectedPositionsNotContiguousRaises) {
  EnableInputAssert();
  args_.expected_input_positions = Gapped(expected_positions_);
  ExpectRejected("kv-canary: expected_input_positions must be contiguous");
}

TEST_F(WriteValidation, W5AssertOffWithExpectedTokensRaises) {
  args_.expected_input_tokens = expected_tokens_.view();
  ExpectRejected(
      "kv-canary: expected input tensors must be None when enable_write_input_assert=False");
}

TEST_F(WriteValidation, W5AssertOffWithExpectedPositionsRaises) {
  args_.expected_input_positions = expected_positions_.view();
  ExpectRejected(
      "kv-canary: expected input tensors must be None when enable_write_input_assert=False");
}

TEST_F(WriteValidation, W6RingNotContiguousRaises) {
  context().violation_ring = state_.ring.view({8, 8}, {16, 1});
  ExpectRejected("kv-canary: violation_ring must be contiguous");
}

TEST_F(WriteValidation, W6ChainAssertFlagNotContiguousRaises) {
  context().enable_chain_position_assert = Gapped(spare_int32_);
  ExpectRejected("kv-canary: enable_chain_position_assert must be contiguous");
}

TEST_F(WriteValidation, W6SourceNotContiguousRaises) {
  context().real_kv_sources[0].tensor = kv_.view({4, 64}, {128, 1});
  ExpectRejected("kv-canary: real_kv_sources[0].tensor must be contiguous");
}

TEST_F(WriteValidation, W6ThreeDimensionalSourceRaises) {
  context().real_kv_sources[0].tensor = kv_.view({8, 4, 16});
  ExpectRejected("kv-canary: real_kv_sources[0].tensor (viewed as uint8) must be 2-D, got 3-D");
}

TEST_F(WriteValidation, W6HandBuiltSourceIsCheckedLikeAMadeOne) {
  context().real_kv_sources[0].page_size = 2;
  ExpectRejected(
      "kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is 64 bytes but "
      "page_size=2 x num_bytes_per_token=64 needs 128");
}

// --- W7: the canary buffer ---

TEST_F(WriteValidation, W7CanaryBufWrongDTypeRaises) {
  context().canary_buf = Recast(state_.canary, DType::kBool);
  ExpectRejected("kv-canary: canary_buf must have dtype torch.uint8, got torch.bool");
}

TEST_F(WriteValidation, W7CanaryBufNot2DRaises) {
  context().canary_buf = state_.canary.view({8, 4, 8});
  ExpectRejected("kv-canary: canary_buf must be 2-D, got shape (8, 4, 8)");
}

TEST_F(WriteValidation, W7SlotStrideBelow32Raises) {
  context().canary_buf = state_.canary.view({32, 8});
  ExpectRejected(
      "kv-canary: canary_write: slot_stride_bytes must hold at least 32 bytes per slot, got 8");
}

// --- W8: the plan ---

TEST_F(WriteValidation, W8SeedsWrongDTypeRaises) {
  plan().write_seed_slot_indices = Recast(plan_.seeds, DType::kInt32);
  ExpectRejected(
      "kv-canary: plan.write_seed_slot_indices must have dtype torch.int64, got torch.int32");
}

TEST_F(WriteValidation, W8SeedsNot1DRaises) {
  plan().write_seed_slot_indices = plan_.seeds.view({1, 2});
  ExpectRejected("kv-canary: plan.write_seed_slot_indices must be 1-D, got shape (1, 2)");
}

TEST_F(WriteValidation, W8OffsetsWrongDTypeRaises) {
  plan().write_offsets = Recast(plan_.offsets, DType::kUInt64);
  ExpectRejected("kv-canary: plan.write_offsets must have dtype torch.int64, got torch.uint64");
}

TEST_F(WriteValidation, W8OffsetsNot1DRaises) {
  plan().write_offsets = plan_.offsets.view({3, 1});
  ExpectRejected("kv-canary: plan.write_offsets must be 1-D, got shape (3, 1)");
}

TEST_F(WriteValidation, W8OffsetsNotCapacityPlusOneRaises) {
  plan().write_offsets = plan_.offsets.view({2});
  ExpectRejected(
      "kv-canary: canary_write: write_offsets.size(0) must equal write_req_capacity + 1 (3), "
      "got 2");
}

TEST_F(WriteValidation, W8NumValidReqsWrongDTypeRaises) {
  plan().write_num_valid_reqs = spare_int64_.view({1});
  ExpectRejected(
      "kv-canary: plan.write_num_valid_reqs must have dtype torch.int32, got torch.int64");
}

TEST_F(WriteValidation, W8NumValidReqsWrongLengthRaises) {
  plan().write_num_valid_reqs = spare_int32_.view({2});
  ExpectRejected("kv-canary: plan.write_num_valid_reqs length must be 1, got 2");
}

// --- W9: the token tensors ---

TEST_F(WriteValidation, W9InputIdsWrongDTypeRaises) {
  args_.input_ids = Recast(input_ids_, DType::kInt32);
  ExpectRejected("kv-canary: input_ids must have dtype torch.int64, got torch.int32");
}

TEST_F(WriteValidation, W9InputIdsNot1DRaises) {
  args_.input_ids = input_ids_.view({1, 3});
  ExpectRejected("kv-canary: input_ids must be 1-D, got shape (1, 3)");
}

TEST_F(WriteValidation, W9PositionsShorterThanInputIdsRaises) {
  args_.positions = positions_.view({2});
  ExpectRejected("kv-canary: positions length must be 3, got 2");
}

TEST_F(WriteValidation, W9OutCacheLocWrongDTypeRaises) {
  args_.out_cache_loc = Recast(out_cache_loc_, DType::kInt32);
  ExpectRejected("kv-canary: out_cache_loc must have dtype torch.int64, got torch.int32");
}

TEST_F(WriteValidation, W9ExpectedTokensWrongLengthRaises) {
  EnableInputAssert();
  args_.expected_input_tokens = expected_tokens_.view({2});
  ExpectRejected("kv-canary: expected_input_tokens length must be 3, got 2");
}

TEST_F(WriteValidation, W9ExpectedPositionsWrongDTypeRaises) {
  EnableInputAssert();
  args_.expected_input_positions = Recast(expected_positions_, DType::kFloat64);
  ExpectRejected(
      "kv-canary: expected_input_positions must have dtype torch.int64, got torch.float64");
}

// --- W10: ring, counters, chain-assert flag ---

TEST_F(WriteValidation, W10WriteIndexWrongLengthRaises) {
  context().violation_write_index = spare_int32_.view({4});
  ExpectRejected("kv-canary: violation_write_index length must be 1, got 4");
}

TEST_F(WriteValidation, W10RingWithoutEightColumnsRaises) {
  context().violation_ring = state_.ring.view({8, 16});
  ExpectRejected("kv-canary: violation_ring must have 8 columns, got shape (8, 16)");
}

TEST_F(WriteValidation, W10SlotRunCounterWrongDTypeRaises) {
  context().slot_run_counter = spare_int32_.view({1});
  ExpectRejected("kv-canary: slot_run_counter must have dtype torch.int64, got torch.int32");
}

TEST_F(WriteValidation, W10ChainAssertFlagWrongDTypeRaises) {
  context().enable_chain_position_assert = spare_int64_.view({1});
  ExpectRejected(
      "kv-canary: enable_chain_position_assert must have dtype torch.int32, got torch.int64");
}

TEST_F(WriteValidation, W10ChainAssertFlagWrongLengthRaises) {
  context().enable_chain_position_assert = spare_int32_.view({0});
  ExpectRejected("kv-canary: enable_chain_position_assert length must be 1, got 0");
}

// --- W11, W12, G8, G9 ---

TEST_F(WriteValidation, W11NegativeSourceCountRaises) {
  context().num_real_kv_sources = -1;
  ExpectRejected("kv-canary: canary_write: num_sources must be in [0, 4], got -1");
}

TEST_F(WriteValidation, PairedContextIsValidatedBeforeAnythingIsWritten) {
  CanaryState paired(8);
  args_.paired_context = paired.Context();
  args_.paired_context->num_real_kv_sources = -1;
  ExpectRejected("kv-canary: canary_write: num_sources must be in [0, 4], got -1");
  EXPECT_EQ(paired.kernel_run_counter[0], 0);
}

TEST_F(WriteValidation, W12UnknownHashModeRaises) {
  context().real_kv_hash_mode = 3;
  ExpectRejected("kv-canary: real_kv_hash_mode must be one of 0/1/2, got 3");
}

TEST_F(WriteValidation, W12RingOnAnotherDeviceRaises) {
  context().violation_ring = OnCuda(state_.ring);
  ExpectRejected("kv-canary: violation_ring must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(WriteValidation, W12SourceOnAnotherDeviceRaises) {
  context().real_kv_sources[0].tensor = OnCuda(kv_);
  ExpectRejected(
      "kv-canary: real_kv_sources[0].tensor must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(WriteValidation, W12ChainAssertFlagOnAnotherDeviceRaises) {
  context().enable_chain_position_assert = OnCuda(state_.chain_assert);
  ExpectRejected(
      "kv-canary: enable_chain_position_assert must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(WriteValidation, W12InputIdsOnAnotherDeviceRaises) {
  args_.input_ids = OnCuda(input_ids_);
  ExpectRejected("kv-canary: input_ids must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(WriteValidation, W12ExpectedPositionsOnAnotherDeviceRaises) {
  EnableInputAssert();
  args_.expected_input_positions = OnCuda(expected_positions_);
  ExpectRejected(
      "kv-canary: expected_input_positions must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(WriteValidation, G8ReadOnlyCanaryBufRaises) {
  context().canary_buf = state_.canary.read_only_view();
  ExpectRejected("kv-canary: canary_buf must be writable");
}

TEST_F(WriteValidation, G8ReadOnlyWriteIndexRaises) {
  context().violation_write_index = state_.write_index.read_only_view();
  ExpectRejected("kv-canary: violation_write_index must be writable");
}

#if !defined(KVC_HAVE_CUDA)
TEST_F(WriteValidation, G9CudaWithoutTheCudaBackendRaises) {
  args_.context.canary_buf = OnCuda(state_.canary);
  args_.context.violation_ring = OnCuda(state_.ring);
  args_.context.violation_write_index = OnCuda(state_.write_index);
  args_.context.slot_run_counter = OnCuda(state_.slot_run_counter);
  args_.context.kernel_run_counter = OnCuda(state_.kernel_run_counter);
  args_.context.enable_chain_position_assert = OnCuda(state_.chain_assert);
  args_.context.real_kv_sources[0].tensor = OnCuda(kv_);
  args_.plan =
      WritePlanView{OnCuda(plan_.offsets), OnCuda(plan_.seeds), OnCuda(plan_.num_valid_reqs)};
  args_.input_ids = OnCuda(input_ids_);
  args_.positions = OnCuda(positions_);
  args_.out_cache_loc = OnCuda(out_cache_loc_);
  ExpectRejected("kv-canary: canary_buf is on unsupported device cuda:0");
}
#endif

}  // namespace
}  // namespace kvcanary::testing
