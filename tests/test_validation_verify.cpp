// Validation of Verify (spec/kernels.md §11, rows V1-V10 with G7-G9), of RealKvSource
// construction (R1-R7) and of the host hash helpers RealKvHash and ComputeSlotHash. Each case
// starts from a valid call, breaks one thing, and asserts the exact message and that no output
// byte changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/hash.h"
#include "kvcanary/verify.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int32_t kModeAll = static_cast<int32_t>(RealKvHashMode::kAll);

class VerifyValidation : public ::testing::Test {
 protected:
  VerifyValidation() : state_(8), plan_(4, 1), kv_({8, 64}) {
    // Non-zero outputs, so that "unchanged" means something.
    std::fill(state_.canary.values().begin(), state_.canary.values().end(), 0xA5);
    std::fill(state_.ring.values().begin(), state_.ring.values().end(), 0x5A5A5A5A5A5A5A5A);
    state_.write_index[0] = 3;
    state_.slot_run_counter[0] = 100;
    state_.kernel_run_counter[0] = 7;
    plan_.slots.values() = {1, 2, 3, 4};
    plan_.positions.values() = {0, 1, 2, 3};
    plan_.prevs.values() = {-1, 1, 2, 3};
    plan_.num_valid[0] = 4;
    args_.context = state_.Context();
    args_.context.real_kv_sources[0] = MakeRealKvSource(kv_.view(), 1, 64, 32);
    args_.context.num_real_kv_sources = 1;
    args_.context.real_kv_hash_mode = kModeAll;
    args_.plan = plan_.verify();
  }

  // Asserts that Verify raises exactly `message` and leaves every output byte as it was.
  void ExpectRejected(const std::string& message) {
    ByteSnapshot outputs(state_.canary, state_.ring, state_.write_index, state_.slot_run_counter,
                         state_.kernel_run_counter);
    EXPECT_KVC_ERROR(Verify(args_), message);
    EXPECT_TRUE(outputs.Unchanged());
  }

  LaunchContext& context() { return args_.context; }
  VerifyPlanView& plan() { return args_.plan; }
  // A hand-built (unchecked) source over `tensor`, as index `i`.
  void SetSource(int i, const TensorView& tensor, int64_t read_bytes = 32) {
    context().real_kv_sources[i] = RealKvSource{tensor, 1, 64, read_bytes};
    context().num_real_kv_sources = std::max(context().num_real_kv_sources, i + 1);
  }

  CanaryState state_;
  PlanBuffers plan_;
  HostTensor<uint8_t> kv_;
  HostTensor<int64_t> spare_int64_{{4}};  // room for a non-contiguous [1] view
  HostTensor<int32_t> spare_int32_{{4}};
  VerifyArgs args_;
};

// --- The valid baseline ---

TEST_F(VerifyValidation, ValidBaselineRunsAndCountsEntries) {
  Verify(args_);
  EXPECT_EQ(state_.kernel_run_counter[0], 8);
  EXPECT_EQ(state_.slot_run_counter[0], 104);
}

TEST_F(VerifyValidation, G8ReadOnlyCanaryBufIsAccepted) {
  context().canary_buf = state_.canary.read_only_view();
  Verify(args_);
  EXPECT_EQ(state_.kernel_run_counter[0], 8);
}

TEST_F(VerifyValidation, ChainAssertFlagIsNotRequired) {
  context().enable_chain_position_assert = TensorView();  // a write-only input
  Verify(args_);
  EXPECT_EQ(state_.kernel_run_counter[0], 8);
}

TEST_F(VerifyValidation, AbsentPlanArrayRaises) {
  plan().verify_expected_tokens = TensorView();
  ExpectRejected("kv-canary: plan.verify_expected_tokens is required, got None");
}

// --- V1-V4: source count, contiguity, source layouts ---

TEST_F(VerifyValidation, V1MoreThanFourSourcesRaises) {
  context().num_real_kv_sources = 5;
  ExpectRejected("kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5");
}

TEST_F(VerifyValidation, V2CanaryBufNotContiguousRaises) {
  context().canary_buf = state_.canary.view({4, 32}, {64, 1});
  ExpectRejected("kv-canary: canary_buf must be contiguous");
}

TEST_F(VerifyValidation, V2PrevSlotIndicesNotContiguousRaises) {
  plan().verify_prev_slot_indices = Gapped(plan_.prevs);
  ExpectRejected("kv-canary: plan.verify_prev_slot_indices must be contiguous");
}

TEST_F(VerifyValidation, V2KernelRunCounterNotContiguousRaises) {
  context().kernel_run_counter = Gapped(spare_int64_);
  ExpectRejected("kv-canary: kernel_run_counter must be contiguous");
}

TEST_F(VerifyValidation, V2ReportsTheFirstNonContiguousTensorInOrder) {
  context().violation_ring = state_.ring.view({8, 8}, {16, 1});
  plan().verify_num_valid = Gapped(spare_int32_);
  ExpectRejected("kv-canary: plan.verify_num_valid must be contiguous");
}

TEST_F(VerifyValidation, V3SourceNotContiguousRaises) {
  SetSource(0, kv_.view({4, 64}, {128, 1}));
  ExpectRejected("kv-canary: real_kv_sources[0].tensor must be contiguous");
}

TEST_F(VerifyValidation, V3AbsentSourceTensorRaises) {
  SetSource(0, TensorView());
  ExpectRejected("kv-canary: real_kv_sources[0].tensor is required, got None");
}

TEST_F(VerifyValidation, V3NamesTheSourceByIndex) {
  SetSource(1, kv_.view({4, 64}, {128, 1}));
  ExpectRejected("kv-canary: real_kv_sources[1].tensor must be contiguous");
}

TEST_F(VerifyValidation, V4ThreeDimensionalSourceRaises) {
  SetSource(0, kv_.view({8, 4, 16}));
  ExpectRejected("kv-canary: real_kv_sources[0].tensor (viewed as uint8) must be 2-D, got 3-D");
}

TEST_F(VerifyValidation, V4HandBuiltSourceIsCheckedLikeAMadeOne) {
  SetSource(0, kv_.view(), /*read_bytes=*/8);
  ExpectRejected(
      "kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 in "
      "(0, num_bytes_per_token=64], got 8");
}

// --- V5, V6: the canary buffer ---

TEST_F(VerifyValidation, V5CanaryBufWrongDTypeRaises) {
  context().canary_buf = Recast(state_.canary, DType::kInt8);
  ExpectRejected("kv-canary: canary_buf must have dtype torch.uint8, got torch.int8");
}

TEST_F(VerifyValidation, V5CanaryBufNot2DRaises) {
  context().canary_buf = state_.canary.view({256});
  ExpectRejected("kv-canary: canary_buf must be 2-D, got shape (256,)");
}

TEST_F(VerifyValidation, V6SlotStrideBelow32Raises) {
  context().canary_buf = state_.canary.view({16, 16});
  ExpectRejected(
      "kv-canary: canary_verify: slot_stride_bytes must hold at least 32 bytes per slot, got 16");
}

// --- V7: plan, ring and counter dtypes and shapes ---

TEST_F(VerifyValidation, V7SlotIndicesWrongDTypeRaises) {
  plan().verify_slot_indices = Recast(plan_.slots, DType::kInt32);
  ExpectRejected(
      "kv-canary: plan.verify_slot_indices must have dtype torch.int64, got torch.int32");
}

TEST_F(VerifyValidation, V7SlotIndicesNot1DRaises) {
  plan().verify_slot_indices = plan_.slots.view({2, 2});
  ExpectRejected("kv-canary: plan.verify_slot_indices must be 1-D, got shape (2, 2)");
}

TEST_F(VerifyValidation, V7ExpectedTokensWrongDTypeRaises) {
  plan().verify_expected_tokens = Recast(plan_.tokens, DType::kFloat64);
  ExpectRejected(
      "kv-canary: plan.verify_expected_tokens must have dtype torch.int64, got torch.float64");
}

TEST_F(VerifyValidation, V7PlanArraysOfDifferentLengthsRaise) {
  plan().verify_expected_positions = plan_.positions.view({3});
  ExpectRejected("kv-canary: plan.verify_expected_positions length must be 4, got 3");
}

TEST_F(VerifyValidation, V7NumValidWrongDTypeRaises) {
  plan().verify_num_valid = plan_.slots.view({1});
  ExpectRejected("kv-canary: plan.verify_num_valid must have dtype torch.int32, got torch.int64");
}

TEST_F(VerifyValidation, V7EnableWrongLengthRaises) {
  plan().enable = plan_.enable.view({0});
  ExpectRejected("kv-canary: plan.enable length must be 1, got 0");
}

TEST_F(VerifyValidation, V7WriteIndexWrongDTypeRaises) {
  context().violation_write_index = spare_int64_.view({1});
  ExpectRejected("kv-canary: violation_write_index must have dtype torch.int32, got torch.int64");
}

TEST_F(VerifyValidation, V7RingWrongDTypeRaises) {
  context().violation_ring = Recast(state_.ring, DType::kUInt64);
  ExpectRejected("kv-canary: violation_ring must have dtype torch.int64, got torch.uint64");
}

TEST_F(VerifyValidation, V7RingNot2DRaises) {
  context().violation_ring = state_.ring.view({128});
  ExpectRejected("kv-canary: violation_ring must be 2-D, got shape (128,)");
}

TEST_F(VerifyValidation, V7RingWithoutEightColumnsRaises) {
  context().violation_ring = state_.ring.view({32, 4});
  ExpectRejected("kv-canary: violation_ring must have 8 columns, got shape (32, 4)");
}

TEST_F(VerifyValidation, V7SlotRunCounterWrongLengthRaises) {
  context().slot_run_counter = spare_int64_.view({2});
  ExpectRejected("kv-canary: slot_run_counter length must be 1, got 2");
}

TEST_F(VerifyValidation, V7KernelRunCounterWrongDTypeRaises) {
  context().kernel_run_counter = spare_int32_.view({1});
  ExpectRejected("kv-canary: kernel_run_counter must have dtype torch.int64, got torch.int32");
}

// --- V8-V10, G8, G9 ---

TEST_F(VerifyValidation, V8NegativeSourceCountRaises) {
  context().num_real_kv_sources = -1;
  ExpectRejected("kv-canary: canary_verify: num_sources must be in [0, 4], got -1");
}

TEST_F(VerifyValidation, PairedContextIsValidatedBeforeAnythingIsWritten) {
  CanaryState paired(8);
  args_.paired_context = paired.Context();
  args_.paired_context->num_real_kv_sources = -1;
  ExpectRejected("kv-canary: canary_verify: num_sources must be in [0, 4], got -1");
  EXPECT_EQ(paired.kernel_run_counter[0], 0);
}

TEST_F(VerifyValidation, V9UnknownHashModeRaises) {
  context().real_kv_hash_mode = 3;
  ExpectRejected("kv-canary: real_kv_hash_mode must be one of 0/1/2, got 3");
}

TEST_F(VerifyValidation, V10RingOnAnotherDeviceRaises) {
  context().violation_ring = OnCuda(context().violation_ring);
  ExpectRejected("kv-canary: violation_ring must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(VerifyValidation, V10SourceOnAnotherDeviceRaises) {
  SetSource(0, OnCuda(kv_.view()));
  ExpectRejected(
      "kv-canary: real_kv_sources[0].tensor must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(VerifyValidation, V10PlanArrayOnAnotherDeviceRaises) {
  plan().enable = OnCuda(plan().enable);
  ExpectRejected("kv-canary: plan.enable must be on canary_buf's device cpu, got cuda:0");
}

TEST_F(VerifyValidation, G8ReadOnlyRingRaises) {
  context().violation_ring = state_.ring.read_only_view();
  ExpectRejected("kv-canary: violation_ring must be writable");
}

TEST_F(VerifyValidation, G8ReadOnlyKernelRunCounterRaises) {
  context().kernel_run_counter = state_.kernel_run_counter.read_only_view();
  ExpectRejected("kv-canary: kernel_run_counter must be writable");
}

#if !defined(KVC_HAVE_CUDA)
TEST_F(VerifyValidation, G9CudaWithoutTheCudaBackendRaises) {
  LaunchContext& c = context();
  VerifyPlanView& p = plan();
  for (TensorView* t :
       {&c.canary_buf, &c.violation_ring, &c.violation_write_index, &c.slot_run_counter,
        &c.kernel_run_counter, &c.real_kv_sources[0].tensor, &p.verify_slot_indices,
        &p.verify_expected_tokens, &p.verify_expected_positions, &p.verify_prev_slot_indices,
        &p.verify_num_valid, &p.enable}) {
    *t = OnCuda(*t);
  }
  ExpectRejected("kv-canary: canary_buf is on unsupported device cuda:0");
}
#endif

// --- R1-R7: MakeRealKvSource ---

class RealKvSourceValidation : public ::testing::Test {
 protected:
  // Asserts that MakeRealKvSource raises exactly `message`.
  static void ExpectRejected(const TensorView& tensor, int64_t page_size, int64_t bytes_per_token,
                             int64_t read_bytes, const std::string& message) {
    EXPECT_KVC_ERROR(MakeRealKvSource(tensor, page_size, bytes_per_token, read_bytes), message);
  }
  // The R2 and R3 messages.
  static std::string BytesPerTokenMessage(int64_t got) {
    return "kv-canary: RealKvSource.num_bytes_per_token must be a positive multiple of 16, got " +
           std::to_string(got);
  }
  static std::string ReadBytesMessage(int64_t bytes_per_token, int64_t got) {
    return "kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 in "
           "(0, num_bytes_per_token=" +
           std::to_string(bytes_per_token) + "], got " + std::to_string(got);
  }

  HostTensor<uint8_t> kv_{{8, 64}};
};

TEST_F(RealKvSourceValidation, ValidSourceKeepsItsFields) {
  const RealKvSource source = MakeRealKvSource(kv_.view(), 2, 32, 16);
  EXPECT_EQ(source.tensor.data(), kv_.data());
  EXPECT_EQ(source.page_size, 2);
  EXPECT_EQ(source.num_bytes_per_token, 32);
  EXPECT_EQ(source.read_bytes, 16);
}

TEST_F(RealKvSourceValidation, AbsentTensorRaises) {
  ExpectRejected(TensorView(), 1, 64, 32, "kv-canary: RealKvSource.tensor is required, got None");
}

TEST_F(RealKvSourceValidation, R1PageSizeBelowOneRaises) {
  ExpectRejected(kv_.view(), 0, 64, 32, "kv-canary: RealKvSource.page_size must be >= 1, got 0");
}

TEST_F(RealKvSourceValidation, R1IsCheckedBeforeR2) {
  ExpectRejected(kv_.view(), -3, 0, 32, "kv-canary: RealKvSource.page_size must be >= 1, got -3");
}

TEST_F(RealKvSourceValidation, R2ZeroBytesPerTokenRaises) {
  ExpectRejected(kv_.view(), 1, 0, 32, BytesPerTokenMessage(0));
}

TEST_F(RealKvSourceValidation, R2BytesPerTokenNotMultipleOf16Raises) {
  ExpectRejected(kv_.view(), 1, 24, 16, BytesPerTokenMessage(24));
}

TEST_F(RealKvSourceValidation, R3ZeroReadBytesRaises) {
  ExpectRejected(kv_.view(), 1, 64, 0, ReadBytesMessage(64, 0));
}

TEST_F(RealKvSourceValidation, R3ReadBytesPastBytesPerTokenRaises) {
  ExpectRejected(kv_.view(), 1, 32, 48, ReadBytesMessage(32, 48));
}

TEST_F(RealKvSourceValidation, R3ReadBytesNotMultipleOf16Raises) {
  ExpectRejected(kv_.view(), 1, 64, 24, ReadBytesMessage(64, 24));
}

TEST_F(RealKvSourceValidation, R4OneDimensionalTensorRaises) {
  ExpectRejected(kv_.view({512}), 1, 64, 32,
                 "kv-canary: RealKvSource.tensor must be at least 2-D, got shape (512,)");
}

TEST_F(RealKvSourceValidation, R5RowStrideNotMultipleOf16Raises) {
  ExpectRejected(kv_.view({4, 24}, {24, 1}), 1, 16, 16,
                 "kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got 24 "
                 "bytes (shape=(4, 24), strides=(24, 1), dtype=torch.uint8)");
}

TEST_F(RealKvSourceValidation, R5CountsTheRowStrideInBytes) {
  const TensorView bf16(kv_.data(), DType::kBFloat16, Device::CPU(), {4, 12}, {12, 1});
  ExpectRejected(bf16, 1, 16, 16,
                 "kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got 24 "
                 "bytes (shape=(4, 12), strides=(12, 1), dtype=torch.bfloat16)");
}

TEST_F(RealKvSourceValidation, R6RowNarrowerThanPageRaises) {
  ExpectRejected(kv_.view(), 2, 64, 32,
                 "kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is 64 bytes "
                 "but page_size=2 x num_bytes_per_token=64 needs 128");
}

TEST_F(RealKvSourceValidation, R7MisalignedDataPointerRaises) {
  uint8_t* misaligned = kv_.data() + 8;
  std::ostringstream message;
  message << "kv-canary: RealKvSource.tensor data pointer must be 16-byte aligned, got 0x"
          << std::hex << reinterpret_cast<uintptr_t>(misaligned);
  ExpectRejected(TensorView(misaligned, DType::kUInt8, Device::CPU(), {7, 64}), 1, 64, 32,
                 message.str());
}

// --- RealKvHash: validates its sources and mode like an op does ---

class RealKvHashValidation : public ::testing::Test {
 protected:
  void ExpectRejected(int num_sources, int32_t mode, int64_t slot, const std::string& message) {
    EXPECT_KVC_ERROR(RealKvHash(sources_, num_sources, mode, slot), message);
  }

  HostTensor<uint8_t> kv_{{8, 64}};
  RealKvSource sources_[1] = {MakeRealKvSource(kv_.view(), 1, 64, 32)};
};

TEST_F(RealKvHashValidation, ZeroBytesAndModeNoneHashToZero) {
  EXPECT_EQ(RealKvHash(sources_, 1, kModeAll, 3), 0u);
  kv_.at(3, 0) = 1;
  EXPECT_NE(RealKvHash(sources_, 1, kModeAll, 3), 0u);
  EXPECT_EQ(RealKvHash(sources_, 1, static_cast<int32_t>(RealKvHashMode::kNone), 3), 0u);
}

TEST_F(RealKvHashValidation, MoreThanFourSourcesRaises) {
  ExpectRejected(5, kModeAll, 0,
                 "kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5");
}

TEST_F(RealKvHashValidation, NegativeSourceCountRaises) {
  ExpectRejected(-1, kModeAll, 0, "kv-canary: real_kv_hash: num_sources must be in [0, 4], got -1");
}

TEST_F(RealKvHashValidation, NonContiguousSourceRaises) {
  sources_[0].tensor = kv_.view({4, 64}, {128, 1});
  ExpectRejected(1, kModeAll, 0, "kv-canary: real_kv_sources[0].tensor must be contiguous");
}

TEST_F(RealKvHashValidation, InvalidHandBuiltSourceRaises) {
  sources_[0].page_size = 0;
  ExpectRejected(1, kModeAll, 0, "kv-canary: RealKvSource.page_size must be >= 1, got 0");
}

TEST_F(RealKvHashValidation, UnknownModeRaises) {
  ExpectRejected(1, -1, 0, "kv-canary: real_kv_hash_mode must be one of 0/1/2, got -1");
}

TEST_F(RealKvHashValidation, SourceOffTheHostRaises) {
  sources_[0].tensor = OnCuda(kv_.view());
  ExpectRejected(1, kModeAll, 0,
                 "kv-canary: real_kv_hash reads CPU tensors only, got real_kv_sources[0].tensor "
                 "on cuda:0");
}

TEST_F(RealKvHashValidation, NegativeSlotRaises) {
  ExpectRejected(1, kModeAll, -1, "kv-canary: real_kv_hash slot_idx must be >= 0, got -1");
}

// --- ComputeSlotHash ---

class VerifySlotHashHelper : public ::testing::Test {
 protected:
  void ExpectRejected(const TensorView& canary_buf, int64_t slot, const std::string& message) {
    EXPECT_KVC_ERROR(ComputeSlotHash(canary_buf, slot), message);
  }

  CanaryState state_{8};
};

TEST_F(VerifySlotHashHelper, NegativeSlotIsTheHeadHash) {
  EXPECT_EQ(ComputeSlotHash(state_.canary.view(), -1), ChainHeadHash());
}

TEST_F(VerifySlotHashHelper, HashesTokenPositionAndPrevHash) {
  state_.set_record(5, Record{11, 3, -42, 99});
  EXPECT_EQ(ComputeSlotHash(state_.canary.read_only_view(), 5),
            Splitmix64Mix3(ToUnsigned(-42), 11, 3));
}

TEST_F(VerifySlotHashHelper, AbsentCanaryBufRaises) {
  ExpectRejected(TensorView(), 0, "kv-canary: canary_buf is required, got None");
}

TEST_F(VerifySlotHashHelper, NonContiguousCanaryBufRaises) {
  ExpectRejected(state_.canary.view({4, 32}, {64, 1}), 0,
                 "kv-canary: canary_buf must be contiguous");
}

TEST_F(VerifySlotHashHelper, WrongDTypeRaises) {
  ExpectRejected(Recast(state_.canary, DType::kInt64), 0,
                 "kv-canary: canary_buf must have dtype torch.uint8, got torch.int64");
}

TEST_F(VerifySlotHashHelper, Not2DRaises) {
  ExpectRejected(state_.canary.view({256}), 0,
                 "kv-canary: canary_buf must be 2-D, got shape (256,)");
}

TEST_F(VerifySlotHashHelper, SlotStrideBelow32Raises) {
  ExpectRejected(state_.canary.view({16, 16}), 0,
                 "kv-canary: compute_slot_hash: slot_stride_bytes must hold at least 32 bytes per "
                 "slot, got 16");
}

TEST_F(VerifySlotHashHelper, CanaryBufOffTheHostRaises) {
  ExpectRejected(OnCuda(state_.canary.view()), 0,
                 "kv-canary: compute_slot_hash reads CPU tensors only, got canary_buf on cuda:0");
}

TEST_F(VerifySlotHashHelper, SlotPastTheEndRaises) {
  ExpectRejected(state_.canary.view(), 8,
                 "kv-canary: compute_slot_hash slot_idx must be < 8, got 8");
}

}  // namespace
}  // namespace kvcanary::testing
