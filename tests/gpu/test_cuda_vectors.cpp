// The published test vectors of spec/kernels.md §17 through the CUDA backend: the chain, the
// decode step, verify after corruption, the write asserts and the real-KV fingerprints, with the
// inputs and expected values of tests/test_vectors.cpp and every tensor in device memory. Where a
// launch records more than one row the rows are compared as a multiset (spec §5). The plan hand
// cases are in test_cuda_plan_vectors.cpp.
#include <gtest/gtest.h>

#include <numeric>
#include <optional>
#include <vector>

#include "backend_pair.h"
#include "device_buffer.h"
#include "device_state.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::CanaryState;
using testing::DeviceCanaryState;
using testing::DevicePlanBuffers;
using testing::DeviceTensor;
using testing::HostTensor;
using testing::PlanBuffers;
using testing::SortRows;

constexpr int64_t kTail = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);

int64_t S(uint64_t u) { return ToSigned(u); }

// The chain world of §17: 8 slots, req_to_token[1] = [1..7, 0], tag TAIL_K_FULL, no sources.
class CudaChainVectors : public testing::DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped()) return;
    table_ = HostTensor<int32_t>({2, 8});
    for (int c = 0; c < 7; ++c) table_.at(1, c) = c + 1;
    state_.emplace(CanaryState(8));
  }

  DevicePlanBuffers PlanStep(int64_t prefix, int64_t extend,
                             const HostTensor<int32_t>* pool = nullptr,
                             const HostTensor<int64_t>* valid_lens = nullptr) {
    DevicePlanBuffers plan{PlanBuffers(16, 4)};
    testing::PlanOnCuda(plan, table_, {{1}, {prefix}, {extend}, 0, nullptr, pool, valid_lens});
    return plan;
  }

  void WriteTokens(const DevicePlanBuffers& plan, const std::vector<int64_t>& tokens,
                   const std::vector<int64_t>& positions, const std::vector<int64_t>& slots,
                   const std::vector<int64_t>& expected_tokens = {},
                   const std::vector<int64_t>& expected_positions = {}) {
    const DeviceTensor<int64_t> ids(HostTensor<int64_t>::Of(tokens));
    const DeviceTensor<int64_t> pos(HostTensor<int64_t>::Of(positions));
    const DeviceTensor<int64_t> loc(HostTensor<int64_t>::Of(slots));
    const DeviceTensor<int64_t> exp_ids(HostTensor<int64_t>::Of(expected_tokens));
    const DeviceTensor<int64_t> exp_pos(HostTensor<int64_t>::Of(expected_positions));
    WriteArgs args;
    args.context = state_->Context(kTail);
    args.plan = plan.write();
    args.input_ids = ids.view();
    args.positions = pos.view();
    args.out_cache_loc = loc.view();
    args.enable_write_input_assert = !expected_tokens.empty();
    if (args.enable_write_input_assert) {
      args.expected_input_tokens = exp_ids.view();
      args.expected_input_positions = exp_pos.view();
    }
    Write(args);
  }

  void VerifyPlan(const DevicePlanBuffers& plan, bool check_token = false) {
    Verify(VerifyArgs{state_->Context(kTail), plan.verify(), check_token, std::nullopt});
  }

  void WriteChainAndDecode() {
    WriteTokens(PlanStep(0, 5), {11, 22, 33, 44, 55}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5});
    DevicePlanBuffers decode = PlanStep(5, 1);
    VerifyPlan(decode);
    WriteTokens(decode, {66}, {5}, {6});
  }

  CanaryState Host() const { return state_->ToHost(); }
  void SetRecord(int64_t slot, const Record& record) {
    CanaryState host = Host();
    host.set_record(slot, record);
    state_->canary.CopyFrom(host.canary);
  }

  HostTensor<int32_t> table_;
  std::optional<DeviceCanaryState> state_;
};

TEST_F(CudaChainVectors, PrefillWritesThePublishedChain) {
  WriteTokens(PlanStep(0, 5), {11, 22, 33, 44, 55}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5});
  const int64_t expected_prev[] = {-2414019407054260458LL, -8517104317260626359LL,
                                   6305883652896473243LL, -775092142951646884LL,
                                   6894519779082095460LL};
  const CanaryState host = Host();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(host.record(i + 1), (Record{11 * (i + 1), i, expected_prev[i], 0})) << i;
  }
  EXPECT_EQ(host.kernel_run_counter[0], 1);
  EXPECT_EQ(host.slot_run_counter[0], 5);
  EXPECT_EQ(ComputeSlotHash(host.canary.view(), 5), 0xae76343810f54045ull);
}

TEST_F(CudaChainVectors, DecodeStepPlansVerifiesAndWrites) {
  WriteTokens(PlanStep(0, 5), {11, 22, 33, 44, 55}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5});
  const DevicePlanBuffers decode = PlanStep(5, 1);
  const PlanBuffers plan = decode.ToHost();
  EXPECT_EQ(plan.num_valid[0], 5);
  EXPECT_EQ(plan.enable[0], 1);
  for (int e = 0; e < 5; ++e) {
    EXPECT_EQ(plan.slots[e], e + 1);
    EXPECT_EQ(plan.prevs[e], e == 0 ? -1 : e);
    EXPECT_EQ(plan.positions[e], e);
  }
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[1], 1);
  EXPECT_EQ(plan.seeds[0], 5);

  VerifyPlan(decode);
  EXPECT_EQ(Host().write_index[0], 0);
  EXPECT_EQ(Host().slot_run_counter[0], 10);
  WriteTokens(decode, {66}, {5}, {6});
  EXPECT_EQ(Host().record(6), (Record{66, 5, -5875451248450912187LL, 0}));
}

TEST_F(CudaChainVectors, TokenCorruptionBreaksTheSuccessorsChain) {
  WriteChainAndDecode();
  SetRecord(3, Record{34, 2, Host().record(3).prev_hash, 0});
  VerifyPlan(PlanStep(6, 0));
  ASSERT_EQ(Host().rows().size(), 1u);
  EXPECT_EQ(Host().rows()[0],
            (ViolationRow{2, 4, 3, 44, -1, S(0xf53e51cd772bb95c), S(0x8b2a107792878536), 1}));
}

TEST_F(CudaChainVectors, PositionCorruptionFlagsTheSlotAndItsSuccessor) {
  WriteChainAndDecode();
  Record record = Host().record(2);
  record.position = 9;
  SetRecord(2, record);
  VerifyPlan(PlanStep(6, 0));
  EXPECT_EQ(
      SortRows(Host().rows()),
      SortRows({ViolationRow{2, 2, 9, 22, -1, S(0x89cd2abfbebc0649), S(0x89cd2abfbebc0649), 2},
                ViolationRow{2, 3, 2, 33, -1, S(0x5782ffc5b5d6409b), S(0xc8d30aaa5ec35a95), 1}}));
}

TEST_F(CudaChainVectors, TokenCheckFlagsAPoolMismatch) {
  WriteChainAndDecode();
  const HostTensor<int32_t> pool({2, 8}, {0, 0, 0, 0, 0, 0, 0, 0, 11, 22, 33, 45, 55, 66, 0, 0});
  const HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({6});
  VerifyPlan(PlanStep(6, 0, &pool, &valid_lens), /*check_token=*/true);
  ASSERT_EQ(Host().rows().size(), 1u);
  EXPECT_EQ(Host().rows()[0],
            (ViolationRow{2, 4, 3, 44, 45, S(0xf53e51cd772bb95c), S(0xf53e51cd772bb95c), 32}));
}

TEST_F(CudaChainVectors, WriteAssertsRecordInputAndChainRows) {
  WriteChainAndDecode();
  state_->chain_assert.CopyFrom(HostTensor<int32_t>::Of({1}));
  WriteTokens(PlanStep(5, 1), {77}, {7}, {7}, {78}, {7});  // seed slot 5 (position 4)
  EXPECT_EQ(SortRows(Host().rows()),
            SortRows({ViolationRow{2, 7, 7, 77, 78, S(0xae76343810f54045), 7, 8},
                      ViolationRow{2, 7, 7, 77, 77, S(0xae76343810f54045), 5, 16}}));
  EXPECT_EQ(Host().record(7), (Record{77, 7, -5875451248450912187LL, 0}));
}

// Real-KV fingerprints of §17: what a CUDA write stores as the record's fourth field.
class CudaRealKvVectors : public testing::DeviceTest {
 protected:
  struct Source {
    const HostTensor<uint8_t>* bytes;
    int64_t page_size, num_bytes_per_token, read_bytes;
  };

  static HostTensor<uint8_t> Bytes(int64_t rows, int64_t cols, uint8_t first) {
    HostTensor<uint8_t> t({rows, cols});
    std::iota(t.values().begin(), t.values().end(), first);
    return t;
  }

  // Writes one token (fresh chain) into `slot` on CUDA with the sources; returns the fingerprint.
  static uint64_t Written(const std::vector<Source>& sources, RealKvHashMode mode, int64_t slot) {
    DeviceCanaryState state{CanaryState(slot + 1)};
    std::vector<DeviceTensor<uint8_t>> bytes;
    for (const Source& s : sources) bytes.emplace_back(*s.bytes);
    LaunchContext context = state.Context(kTail);
    for (size_t i = 0; i < sources.size(); ++i) {
      context.real_kv_sources[i] =
          MakeRealKvSource(bytes[i].view(), sources[i].page_size, sources[i].num_bytes_per_token,
                           sources[i].read_bytes);
    }
    context.num_real_kv_sources = static_cast<int>(sources.size());
    context.real_kv_hash_mode = static_cast<int32_t>(mode);
    PlanBuffers host_plan(4, 1);
    host_plan.offsets[1] = 1;
    host_plan.seeds[0] = -1;
    host_plan.num_valid_reqs[0] = 1;
    const DevicePlanBuffers plan(host_plan);
    const DeviceTensor<int64_t> ids(HostTensor<int64_t>::Of({11}));
    const DeviceTensor<int64_t> pos(HostTensor<int64_t>::Of({0}));
    const DeviceTensor<int64_t> loc(HostTensor<int64_t>::Of({slot}));
    WriteArgs args;
    args.context = context;
    args.plan = plan.write();
    args.input_ids = ids.view();
    args.positions = pos.view();
    args.out_cache_loc = loc.view();
    Write(args);
    return ToUnsigned(state.ToHost().record(slot).real_kv_hash);
  }
};

TEST_F(CudaRealKvVectors, OneSixteenByteSource) {
  const HostTensor<uint8_t> kv = Bytes(1, 16, 0);
  EXPECT_EQ(Written({{&kv, 1, 16, 16}}, RealKvHashMode::kPartial, 0), 0xd6d75024dfd6c30cull);
  EXPECT_EQ(Written({{&kv, 1, 16, 16}}, RealKvHashMode::kAll, 0), 0xd6d75024dfd6c30cull);
  EXPECT_EQ(Written({{&kv, 1, 16, 16}}, RealKvHashMode::kNone, 0), 0u);
}

TEST_F(CudaRealKvVectors, ThirtyTwoBytesFoldAllOrOnlySixteen) {
  const HostTensor<uint8_t> kv = Bytes(1, 32, 0);
  EXPECT_EQ(Written({{&kv, 1, 32, 32}}, RealKvHashMode::kAll, 0), 0xb44181dfe9420039ull);
  EXPECT_EQ(Written({{&kv, 1, 32, 32}}, RealKvHashMode::kPartial, 0), 0xd6d75024dfd6c30cull);
}

TEST_F(CudaRealKvVectors, TwoSourcesCombineInOrder) {
  const HostTensor<uint8_t> a = Bytes(1, 16, 0x00);
  const HostTensor<uint8_t> b = Bytes(1, 16, 0x10);
  EXPECT_EQ(Written({{&a, 1, 16, 16}, {&b, 1, 16, 16}}, RealKvHashMode::kAll, 0),
            0xb6209a488c3f52b0ull);
}

TEST_F(CudaRealKvVectors, ZeroBytesFingerprintToZero) {
  const HostTensor<uint8_t> kv({1, 16});
  EXPECT_EQ(Written({{&kv, 1, 16, 16}}, RealKvHashMode::kPartial, 0), 0u);
}

TEST_F(CudaRealKvVectors, PagedSourceAddressesStripsByPageAndRow) {
  HostTensor<uint8_t> kv = Bytes(3, 64, 0);
  std::fill(kv.values().begin() + 128, kv.values().end(), uint8_t{0});
  const Source paged{&kv, 2, 32, 32};
  EXPECT_EQ(Written({paged}, RealKvHashMode::kAll, 1), 0x9f04b7ee5eee5bd3ull);
  EXPECT_EQ(Written({paged}, RealKvHashMode::kAll, 2), 0x4e612227cd041419ull);
  EXPECT_EQ(Written({paged}, RealKvHashMode::kAll, 3), 0x40612c9889df0761ull);
  EXPECT_EQ(Written({paged}, RealKvHashMode::kAll, 4), 0x0ull);
  EXPECT_EQ(Written({paged}, RealKvHashMode::kPartial, 1), 0x2c75ca2b6b98a11aull);
  EXPECT_EQ(Written({paged}, RealKvHashMode::kPartial, 2), 0x8d15d2b76f386f4bull);
  EXPECT_EQ(Written({paged}, RealKvHashMode::kPartial, 3), 0x344bdaf9666261f8ull);
}

TEST_F(CudaRealKvVectors, WriteStoresTheFingerprintAndVerifyRechecksIt) {
  HostTensor<uint8_t> kv({8, 16});
  for (int i = 0; i < 16; ++i) kv.at(1, i) = static_cast<uint8_t>(i);
  DeviceTensor<uint8_t> kv_d(kv);
  DeviceCanaryState state{CanaryState(8)};
  LaunchContext context = state.Context(kTail);
  context.real_kv_sources[0] = MakeRealKvSource(kv_d.view(), 1, 16, 16);
  context.num_real_kv_sources = 1;
  context.real_kv_hash_mode = static_cast<int32_t>(RealKvHashMode::kPartial);
  PlanBuffers plan(4, 1);
  plan.offsets[1] = 1;
  plan.seeds[0] = -1;
  plan.num_valid_reqs[0] = 1;
  plan.slots[0] = 1;
  plan.prevs[0] = -1;
  plan.positions[0] = 0;
  plan.num_valid[0] = 1;
  const DevicePlanBuffers plan_d(plan);
  const DeviceTensor<int64_t> ids(HostTensor<int64_t>::Of({11}));
  const DeviceTensor<int64_t> pos(HostTensor<int64_t>::Of({0}));
  const DeviceTensor<int64_t> loc(HostTensor<int64_t>::Of({1}));
  WriteArgs write;
  write.context = context;
  write.plan = plan_d.write();
  write.input_ids = ids.view();
  write.positions = pos.view();
  write.out_cache_loc = loc.view();
  Write(write);
  EXPECT_EQ(state.ToHost().record(1).real_kv_hash, -2965813710295743732LL);

  kv.at(1, 15) ^= 0x01;  // KV changed after the record was written
  kv_d.CopyFrom(kv);
  Verify(VerifyArgs{context, plan_d.verify(), false, std::nullopt});
  const CanaryState host = state.ToHost();
  ASSERT_EQ(host.rows().size(), 1u);
  EXPECT_EQ(host.rows()[0].slot_idx, 1);
  EXPECT_EQ(host.rows()[0].fail_reason_bits, FailReason::kVerifyRealKvHashMismatch);
}

}  // namespace
}  // namespace kvcanary
