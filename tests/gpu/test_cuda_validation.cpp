// Validation on CUDA tensors. The checks are device-agnostic and tested on
// the CPU (tests/test_validation_*.cpp); this only confirms that a CUDA call goes through the same
// path: the same exact message, and nothing written to device memory.
#include <gtest/gtest.h>

#include <optional>
#include <string>
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

class CudaValidation : public testing::DeviceTest {};

// The message a CPU call raises (empty if none).
template <typename Call>
std::string CpuMessage(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST_F(CudaValidation, BadArgumentsRaiseTheCpuMessageAndWriteNothing) {
  // Non-trivial contents, so "unchanged" means something.
  CanaryState host(16, 8);
  testing::Rng rng(0xBAD);
  rng.Fill(host.canary.values());
  rng.Fill(host.ring.values());
  host.write_index[0] = 3;
  host.slot_run_counter[0] = 5;
  host.kernel_run_counter[0] = 7;
  PlanBuffers plan(8, 4);
  rng.Fill(plan.slots.values());
  rng.Fill(plan.offsets.values());
  const HostTensor<int64_t> ids = HostTensor<int64_t>::Of({1, 2, 3});
  const HostTensor<int64_t> short_positions = HostTensor<int64_t>::Of({0, 1});
  const HostTensor<int64_t> loc = HostTensor<int64_t>::Of({1, 2, 3});
  const HostTensor<int64_t> rp = HostTensor<int64_t>::Of({1});
  const HostTensor<int32_t> table({2, 4});

  const DeviceCanaryState state_d(host);
  const DevicePlanBuffers plan_d(plan);
  const DeviceTensor<int64_t> ids_d(ids), short_positions_d(short_positions), loc_d(loc), rp_d(rp);
  const DeviceTensor<int32_t> table_d(table);

  auto write = [](const auto& state, const auto& p, const TensorView& i, const TensorView& pos,
                  const TensorView& l) {
    WriteArgs args;
    args.context = state.Context();
    args.plan = p.write();
    args.input_ids = i;
    args.positions = pos;
    args.out_cache_loc = l;
    Write(args);
  };
  auto verify_with_five_sources = [](const auto& state, const auto& p) {
    VerifyArgs args{state.Context(), p.verify(), false, std::nullopt};
    args.context.num_real_kv_sources = 5;
    Verify(args);
  };
  auto plan_with_wrong_capacity = [](const auto& p, const TensorView& r, const TensorView& t) {
    PlanArgs args = testing::PlanCallOver(p, r, r, r, t);
    args.verify_capacity = 7;
    Plan(args);
  };

  // Write: positions one short (G5).
  const std::string write_message =
      CpuMessage([&] { write(host, plan, ids.view(), short_positions.view(), loc.view()); });
  EXPECT_EQ(write_message, "kv-canary: positions length must be 3, got 2");
  EXPECT_KVC_ERROR(write(state_d, plan_d, ids_d.view(), short_positions_d.view(), loc_d.view()),
                   write_message);
  // Verify: more sources than the ABI holds (V1).
  const std::string verify_message = CpuMessage([&] { verify_with_five_sources(host, plan); });
  EXPECT_EQ(verify_message,
            "kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5");
  EXPECT_KVC_ERROR(verify_with_five_sources(state_d, plan_d), verify_message);
  // Plan: verify_capacity that does not match the plan (P3).
  const std::string plan_message =
      CpuMessage([&] { plan_with_wrong_capacity(plan, rp.view(), table.view()); });
  EXPECT_EQ(plan_message,
            "kv-canary: launch_canary_plan_kernels verify_capacity=7 does not match "
            "verify_plan_out.verify_slot_indices.shape[0]=8");
  EXPECT_KVC_ERROR(plan_with_wrong_capacity(plan_d, rp_d.view(), table_d.view()), plan_message);
  // One host tensor among CUDA tensors (G7), a mistake only a CUDA call can make.
  EXPECT_KVC_ERROR(write(state_d, plan_d, ids_d.view(), ids.view(), loc_d.view()),
                   "kv-canary: positions must be on canary_buf's device cuda:0, got cpu");

  // Nothing reached the device: records, ring, counters and plans are as they were.
  testing::ExpectSameState(host, state_d.ToHost(), "after the failed calls");
  testing::ExpectSamePlan(plan, plan_d.ToHost(), "after the failed calls");
}

// A broken offsets/entries contract (enable set, a total past the entry arrays) is raised by the
// CPU backend, which sees the total; the CUDA kernel cannot raise and writes nothing, where
// SGLang's traps and ends the context. The context stays usable: the same arrays then take a
// valid call.
TEST_F(CudaValidation, ABrokenEntriesContractWritesNothingAndLeavesTheContextUsable) {
  HostTensor<int32_t> table({3, 8});
  for (size_t i = 0; i < table.values().size(); ++i) table.values()[i] = static_cast<int32_t>(i);
  const DeviceTensor<int64_t> rp(HostTensor<int64_t>::Of({1, 2}));
  const DeviceTensor<int64_t> prefix(HostTensor<int64_t>::Of({3, 2}));
  const DeviceTensor<int32_t> table_d(table);
  DeviceTensor<int64_t> scratch(HostTensor<int64_t>::Of({0, 3, 5}));  // 5 entries
  const DeviceTensor<int32_t> enable(HostTensor<int32_t>::Of({1}));
  const HostTensor<int64_t> poison({4}, 0x5A5A5A5A);
  std::vector<DeviceTensor<int64_t>> out;
  for (int i = 0; i < 4; ++i) out.emplace_back(poison);  // 4 < 5: the contract is broken
  PlanEntriesArgs args;
  args.inputs.req_pool_indices = rp.view();
  args.inputs.prefix_lens = prefix.view();
  args.inputs.req_to_token = table_d.view();
  args.verify_offsets_scratch = scratch.view();
  args.verify_enable = enable.view();
  args.out_verify_slot_indices = out[0].view();
  args.out_verify_expected_tokens = out[1].view();
  args.out_verify_expected_positions = out[2].view();
  args.out_verify_prev_slot_indices = out[3].view();

  PlanEntries(args);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (const DeviceTensor<int64_t>& array : out)
    EXPECT_EQ(array.ToHost().values(), poison.values());

  scratch.CopyFrom(HostTensor<int64_t>::Of({0, 3, 3}));  // row 1 verifies nothing: 3 entries
  PlanEntries(args);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto slots = out[0].ToHost().values();
  EXPECT_EQ(std::vector<int64_t>(slots.begin(), slots.begin() + 3),
            (std::vector<int64_t>{8, 9, 10}));  // req_to_token row 1, positions 0 to 2
  EXPECT_EQ(slots[3], poison.values()[3]);
}

}  // namespace
}  // namespace kvcanary
