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
    return ContextOver(*this, tag);
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

  VerifyPlanView verify() const { return VerifyViewOver(*this); }
  WritePlanView write() const { return WritePlanViewOver(*this); }

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

}  // namespace kvcanary::testing
