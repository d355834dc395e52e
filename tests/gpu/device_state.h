// Device mirrors of testutil.h's CanaryState and PlanBuffers: the same members and view methods,
// so test code written against the host structs builds CUDA calls unchanged, plus ToHost() to
// read a result back for comparison. Also PlanOnCuda: one plan call from a host-described batch.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "device_buffer.h"
#include "testutil.h"

namespace kvcanary::testing {

// A canary buffer, ring and counters in device memory.
struct DeviceCanaryState {
  explicit DeviceCanaryState(const CanaryState& host)
      : canary(host.canary),
        ring(host.ring),
        write_index(host.write_index),
        slot_run_counter(host.slot_run_counter),
        kernel_run_counter(host.kernel_run_counter),
        chain_assert(host.chain_assert) {}

  LaunchContext Context(int64_t tag = static_cast<int64_t>(CanaryLaunchTag::kTailKFull)) const {
    LaunchContext context;
    context.canary_buf = canary.view();
    context.kernel_kind = tag;
    context.violation_ring = ring.view();
    context.violation_write_index = write_index.view();
    context.slot_run_counter = slot_run_counter.view();
    context.kernel_run_counter = kernel_run_counter.view();
    context.enable_chain_position_assert = chain_assert.view();
    return context;
  }

  CanaryState ToHost() const {
    CanaryState host(canary.shape()[0], ring.shape()[0], canary.shape()[1]);
    host.canary = canary.ToHost();
    host.ring = ring.ToHost();
    host.write_index = write_index.ToHost();
    host.slot_run_counter = slot_run_counter.ToHost();
    host.kernel_run_counter = kernel_run_counter.ToHost();
    host.chain_assert = chain_assert.ToHost();
    return host;
  }

  DeviceTensor<uint8_t> canary;
  DeviceTensor<int64_t> ring;
  DeviceTensor<int32_t> write_index;
  DeviceTensor<int64_t> slot_run_counter;
  DeviceTensor<int64_t> kernel_run_counter;
  DeviceTensor<int32_t> chain_assert;
};

// Verify and write plans in device memory.
struct DevicePlanBuffers {
  explicit DevicePlanBuffers(const PlanBuffers& host)
      : slots(host.slots),
        tokens(host.tokens),
        positions(host.positions),
        prevs(host.prevs),
        num_valid(host.num_valid),
        enable(host.enable),
        offsets(host.offsets),
        seeds(host.seeds),
        num_valid_reqs(host.num_valid_reqs) {}

  VerifyPlanView verify() const {
    return VerifyPlanView{slots.view(), tokens.view(),    positions.view(),
                          prevs.view(), num_valid.view(), enable.view()};
  }
  WritePlanView write() const {
    return WritePlanView{offsets.view(), seeds.view(), num_valid_reqs.view()};
  }

  PlanBuffers ToHost() const {
    PlanBuffers host(slots.shape()[0], seeds.shape()[0]);
    host.slots = slots.ToHost();
    host.tokens = tokens.ToHost();
    host.positions = positions.ToHost();
    host.prevs = prevs.ToHost();
    host.num_valid = num_valid.ToHost();
    host.enable = enable.ToHost();
    host.offsets = offsets.ToHost();
    host.seeds = seeds.ToHost();
    host.num_valid_reqs = num_valid_reqs.ToHost();
    return host;
  }

  DeviceTensor<int64_t> slots, tokens, positions, prevs;
  DeviceTensor<int32_t> num_valid, enable;
  DeviceTensor<int64_t> offsets, seeds;
  DeviceTensor<int32_t> num_valid_reqs;
};

// One plan call's batch and options.
struct PlanBatch {
  std::vector<int64_t> rp, prefix, extend;
  int64_t window = 0;
  const HostTensor<int64_t>* lut = nullptr;
  const HostTensor<int32_t>* pool = nullptr;
  const HostTensor<int64_t>* valid_lens = nullptr;
  int64_t offset = 0;
};

// Runs the plan on CUDA into `plan`; the verify capacity is the plan's.
inline void PlanOnCuda(const DevicePlanBuffers& plan, const HostTensor<int32_t>& table,
                       const PlanBatch& in) {
  const DeviceTensor<int64_t> rp(HostTensor<int64_t>::Of(in.rp));
  const DeviceTensor<int64_t> prefix(HostTensor<int64_t>::Of(in.prefix));
  const DeviceTensor<int64_t> extend(HostTensor<int64_t>::Of(in.extend));
  const DeviceTensor<int32_t> table_d(table);
  std::optional<DeviceTensor<int64_t>> lut, valid_lens;
  std::optional<DeviceTensor<int32_t>> pool;
  if (in.lut) lut.emplace(*in.lut);
  if (in.pool) pool.emplace(*in.pool);
  if (in.valid_lens) valid_lens.emplace(*in.valid_lens);
  PlanArgs args;
  args.verify_plan_out = plan.verify();
  args.write_plan_out = plan.write();
  args.inputs.req_pool_indices = rp.view();
  args.inputs.prefix_lens = prefix.view();
  args.inputs.extend_seq_lens = extend.view();
  args.inputs.req_to_token = table_d.view();
  args.inputs.swa_window_size = in.window;
  args.inputs.full_to_swa_index_mapping = lut ? lut->view() : TensorView();
  args.inputs.req_to_verify_expected_tokens = pool ? pool->view() : TensorView();
  args.inputs.req_to_verify_expected_tokens_valid_lens = valid_lens ? valid_lens->view() : TensorView();
  args.inputs.kv_token_id_vs_position_offset = in.offset;
  args.verify_capacity = plan.slots.shape()[0];
  Plan(args);
}

}  // namespace kvcanary::testing
