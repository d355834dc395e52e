// Device mirrors of testutil.h's CanaryState and PlanBuffers: the same members and view methods,
// so test code written against the host structs builds CUDA calls unchanged, plus ToHost() to
// read a result back for comparison. Also PlanOnCuda: one plan call from a host-described batch.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "device_buffer.h"
#include "testutil.h"

namespace kvcanary::testing {

// The tensors of a canary state (host or device), in one order: what a mirror copies member by
// member.
template <typename State>
auto CanaryStateTensors(State& s) {
  return std::tie(s.canary, s.ring, s.write_index, s.slot_run_counter, s.kernel_run_counter,
                  s.chain_assert);
}

// The tensors of plan buffers (host or device), in one order.
template <typename Plan>
auto PlanTensors(Plan& p) {
  return std::tie(p.slots, p.tokens, p.positions, p.prevs, p.num_valid, p.enable, p.offsets,
                  p.seeds, p.num_valid_reqs);
}

// Calls copy(to[i], from[i]) for each member of two tuples of references of one length.
template <typename To, typename From, typename Copy>
void CopyEachTensor(To to, From from, Copy copy) {
  static_assert(std::tuple_size_v<To> == std::tuple_size_v<From>);
  [&]<size_t... I>(std::index_sequence<I...>) {
    (copy(std::get<I>(to), std::get<I>(from)), ...);
  }(std::make_index_sequence<std::tuple_size_v<To>>{});
}

// Fills a device tensor (default-constructed) from its host twin.
inline constexpr auto kToDevice = [](auto& device, const auto& host) {
  device = std::remove_cvref_t<decltype(device)>(host);
};
// Reads a device tensor back into its host twin.
inline constexpr auto kToHost = [](auto& host, const auto& device) { host = device.ToHost(); };

// A canary buffer, ring and counters in device memory.
struct DeviceCanaryState {
  explicit DeviceCanaryState(const CanaryState& host) {
    CopyEachTensor(CanaryStateTensors(*this), CanaryStateTensors(host), kToDevice);
  }

  LaunchContext Context(int64_t tag = static_cast<int64_t>(CanaryLaunchTag::kTailKFull)) const {
    return ContextOver(*this, tag);
  }

  CanaryState ToHost() const {
    CanaryState host(canary.shape()[0], ring.shape()[0], canary.shape()[1]);
    CopyEachTensor(CanaryStateTensors(host), CanaryStateTensors(*this), kToHost);
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
  explicit DevicePlanBuffers(const PlanBuffers& host) {
    CopyEachTensor(PlanTensors(*this), PlanTensors(host), kToDevice);
  }

  VerifyPlanView verify() const { return VerifyViewOver(*this); }
  WritePlanView write() const { return WritePlanViewOver(*this); }

  PlanBuffers ToHost() const {
    PlanBuffers host(slots.shape()[0], seeds.shape()[0]);
    CopyEachTensor(PlanTensors(host), PlanTensors(*this), kToHost);
    return host;
  }

  DeviceTensor<int64_t> slots, tokens, positions, prevs;
  DeviceTensor<int32_t> num_valid, enable;
  DeviceTensor<int64_t> offsets, seeds;
  DeviceTensor<int32_t> num_valid_reqs;
};

}  // namespace kvcanary::testing
