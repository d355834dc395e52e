// Shared test helpers: owning host tensors, the canary state of one runtime (buffer, ring,
// counters), plan buffers, byte snapshots for "an invalid call wrote nothing", and an
// exact-message error assertion.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/record.h"
#include "kvcanary/kvcanary.h"

namespace kvcanary::testing {

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kUInt8;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<T, uint16_t>) return DType::kBFloat16;
}

// 64-byte aligned storage, so real-KV sources meet the 16-byte alignment rule.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const AlignedAllocator&) const { return true; }
};

// An owning, contiguous host tensor.
template <typename T>
class HostTensor {
 public:
  HostTensor() = default;
  explicit HostTensor(std::vector<int64_t> shape, T fill = T{}) : shape_(std::move(shape)) {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    values_.assign(n, fill);
  }
  HostTensor(std::vector<int64_t> shape, const std::vector<T>& values) : HostTensor(shape) {
    EXPECT_EQ(values.size(), values_.size());
    std::copy(values.begin(), values.end(), values_.begin());
  }
  // A 1-D tensor of the given values.
  static HostTensor Of(const std::vector<T>& values) {
    return HostTensor({static_cast<int64_t>(values.size())}, values);
  }

  TensorView view() const {
    return TensorView(const_cast<T*>(values_.data()), DTypeOf<T>(), Device::CPU(), shape_);
  }
  // The same memory seen with other shape/strides (for layout checks).
  TensorView view(std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                  bool writable = true) const {
    return TensorView(const_cast<T*>(values_.data()), DTypeOf<T>(), Device::CPU(), std::move(shape),
                      std::move(strides), writable);
  }
  TensorView read_only_view() const { return view(shape_, {}, false); }

  T& operator[](int64_t i) { return values_[i]; }
  const T& operator[](int64_t i) const { return values_[i]; }
  T& at(int64_t row, int64_t col) { return values_[row * shape_.back() + col]; }
  using Storage = std::vector<T, AlignedAllocator<T>>;
  Storage& values() { return values_; }
  const Storage& values() const { return values_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  T* data() { return values_.data(); }
  size_t bytes() const { return values_.size() * sizeof(T); }

 private:
  std::vector<int64_t> shape_;
  std::vector<T, AlignedAllocator<T>> values_;
};

// A copy of some buffers' bytes, to assert that a failed call changed none of them.
class ByteSnapshot {
 public:
  template <typename... Tensors>
  explicit ByteSnapshot(Tensors&... tensors) {
    (Add(tensors.data(), tensors.bytes()), ...);
  }
  void Add(const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    regions_.push_back({data, std::vector<uint8_t>(p, p + bytes)});
  }
  bool Unchanged() const {
    for (const auto& [data, copy] : regions_) {
      if (std::memcmp(data, copy.data(), copy.size()) != 0) return false;
    }
    return true;
  }

 private:
  std::vector<std::pair<const void*, std::vector<uint8_t>>> regions_;
};

// Views over a test's state or plan tensors, host or device alike (any type with these members).
template <typename State>
LaunchContext ContextOver(const State& s, int64_t tag) {
  LaunchContext context;
  context.canary_buf = s.canary.view();
  context.kernel_kind = tag;
  context.violation_ring = s.ring.view();
  context.violation_write_index = s.write_index.view();
  context.slot_run_counter = s.slot_run_counter.view();
  context.kernel_run_counter = s.kernel_run_counter.view();
  context.enable_chain_position_assert = s.chain_assert.view();
  return context;
}
template <typename Plan>
VerifyPlanView VerifyViewOver(const Plan& p) {
  return VerifyPlanView{p.slots.view(), p.tokens.view(),    p.positions.view(),
                        p.prevs.view(), p.num_valid.view(), p.enable.view()};
}
template <typename Plan>
WritePlanView WritePlanViewOver(const Plan& p) {
  return WritePlanView{p.offsets.view(), p.seeds.view(), p.num_valid_reqs.view()};
}

// The state one runtime shares across launches: a canary buffer, the ring and the counters.
struct CanaryState {
  explicit CanaryState(int64_t num_slots, int64_t ring_capacity = 16, int64_t stride_bytes = 32)
      : canary({num_slots, stride_bytes}),
        ring({ring_capacity, kViolationFields}),
        write_index({1}),
        slot_run_counter({1}),
        kernel_run_counter({1}),
        chain_assert({1}) {}

  LaunchContext Context(int64_t tag = static_cast<int64_t>(CanaryLaunchTag::kTailKFull)) const {
    return ContextOver(*this, tag);
  }

  Record record(int64_t slot) const {
    return LoadRecord(canary.values().data() + slot * canary.shape()[1]);
  }
  void set_record(int64_t slot, const Record& record) {
    StoreRecord(canary.data() + slot * canary.shape()[1], record);
  }
  // The recorded rows, min(write_index, capacity) of them.
  std::vector<ViolationRow> rows() const {
    const int64_t n = std::min<int64_t>(write_index[0], ring.shape()[0]);
    std::vector<ViolationRow> out;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t* c = ring.values().data() + i * kViolationFields;
      out.push_back(ViolationRow{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]});
    }
    return out;
  }

  HostTensor<uint8_t> canary;
  HostTensor<int64_t> ring;
  HostTensor<int32_t> write_index;
  HostTensor<int64_t> slot_run_counter;
  HostTensor<int64_t> kernel_run_counter;
  HostTensor<int32_t> chain_assert;
};

// Arbitrary records in slots [1, num_slots) of a K and a V buffer (V's token one more than K's in
// every third slot), seeded: a verify over them finds rows in both halves, not the same ones.
inline void FillArbitraryPair(CanaryState& k, CanaryState& v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int64_t slot = 1; slot < k.canary.shape()[0]; ++slot) {
    const Record record{int64_t(rng() % 100), int64_t(rng() % 8), int64_t(rng()), 0};
    k.set_record(slot, record);
    v.set_record(slot, Record{record.token + int64_t(slot % 3 == 0), record.position,
                              record.prev_hash, 0});
  }
}

// Verify and write plans of given capacities, as the Python allocate() makes them.
struct PlanBuffers {
  PlanBuffers(int64_t verify_capacity, int64_t write_capacity)
      : slots({verify_capacity}),
        tokens({verify_capacity}, -1),
        positions({verify_capacity}),
        prevs({verify_capacity}),
        num_valid({1}),
        enable({1}, 1),
        offsets({write_capacity + 1}),
        seeds({write_capacity}),
        num_valid_reqs({1}) {}

  VerifyPlanView verify() const { return VerifyViewOver(*this); }
  WritePlanView write() const { return WritePlanViewOver(*this); }

  HostTensor<int64_t> slots, tokens, positions, prevs;
  HostTensor<int32_t> num_valid, enable;
  HostTensor<int64_t> offsets, seeds;
  HostTensor<int32_t> num_valid_reqs;
};

// The first `n` elements of `t`, for comparisons.
template <typename T>
std::vector<T> Head(const HostTensor<T>& t, size_t n) {
  return std::vector<T>(t.values().begin(), t.values().begin() + static_cast<ptrdiff_t>(n));
}

// Violation rows in one canonical order: a launch whose rows several threads record (CUDA) is
// compared with another as a multiset.
inline std::vector<ViolationRow> SortRows(std::vector<ViolationRow> rows) {
  auto key = [](const ViolationRow& r) {
    return std::tie(r.kernel_kind, r.slot_idx, r.position, r.stored_token, r.expected_token,
                    r.stored_chain_hash, r.expected_aux, r.fail_reason_bits);
  };
  std::sort(rows.begin(), rows.end(),
            [&](const ViolationRow& a, const ViolationRow& b) { return key(a) < key(b); });
  return rows;
}

// A plan call that writes into `plan` (its entry arrays and write plan; the capacity is its
// arrays') and reads this batch and table; the other inputs are left for the caller.
// Plan is PlanBuffers or the GPU tests' DevicePlanBuffers.
// The batch and table every plan stage reads; the optional inputs are left for the caller.
// PlanEntries and FusedVerify do not read extend_seq_lens: pass TensorView() there.
inline ::kvcanary::PlanInputs BatchInputs(const TensorView& req_pool_indices,
                                          const TensorView& prefix_lens,
                                          const TensorView& extend_seq_lens,
                                          const TensorView& req_to_token) {
  ::kvcanary::PlanInputs inputs;
  inputs.req_pool_indices = req_pool_indices;
  inputs.prefix_lens = prefix_lens;
  inputs.extend_seq_lens = extend_seq_lens;
  inputs.req_to_token = req_to_token;
  return inputs;
}

template <typename Plan>
PlanArgs PlanCallOver(const Plan& plan, const TensorView& req_pool_indices,
                      const TensorView& prefix_lens, const TensorView& extend_seq_lens,
                      const TensorView& req_to_token) {
  PlanArgs args;
  args.verify_plan_out = plan.verify();
  args.write_plan_out = plan.write();
  args.inputs = BatchInputs(req_pool_indices, prefix_lens, extend_seq_lens, req_to_token);
  args.verify_capacity = plan.slots.shape()[0];
  return args;
}

// A first-stage call over `inputs` that writes `plan`'s write plan and counts and `scratch`.
// Plan is any type with PlanBuffers' write-plan and count members.
template <typename Plan>
PlanOffsetsArgs OffsetsCallOver(const Plan& plan, const TensorView& scratch,
                                const ::kvcanary::PlanInputs& inputs, int64_t verify_capacity) {
  return {.inputs = inputs,
          .out_verify_offsets_scratch = scratch,
          .out_write_offsets = plan.offsets.view(),
          .out_write_seed_slot_indices = plan.seeds.view(),
          .out_verify_num_valid = plan.num_valid.view(),
          .out_verify_enable = plan.enable.view(),
          .out_write_num_valid_reqs = plan.num_valid_reqs.view(),
          .verify_capacity = verify_capacity};
}

// A write of these tokens (ids, positions, slots) under `plan`'s write plan.
template <typename Plan>
WriteArgs WriteCallOver(const LaunchContext& context, const Plan& plan, const TensorView& input_ids,
                        const TensorView& positions, const TensorView& out_cache_loc) {
  WriteArgs args;
  args.context = context;
  args.plan = plan.write();
  args.input_ids = input_ids;
  args.positions = positions;
  args.out_cache_loc = out_cache_loc;
  return args;
}

}  // namespace kvcanary::testing

namespace kvcanary {

// Equality and printing for assertions (found by argument-dependent lookup).
inline bool operator==(const ViolationRow& a, const ViolationRow& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}
inline std::ostream& operator<<(std::ostream& out, const ViolationRow& r) {
  return out << "[" << r.kernel_kind << ", " << r.slot_idx << ", " << r.position << ", "
             << r.stored_token << ", " << r.expected_token << ", " << r.stored_chain_hash << ", "
             << r.expected_aux << ", " << r.fail_reason_bits << "]";
}
inline bool operator==(const Record& a, const Record& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}
inline std::ostream& operator<<(std::ostream& out, const Record& r) {
  return out << "(" << r.token << ", " << r.position << ", " << r.prev_hash << ", "
             << r.real_kv_hash << ")";
}

}  // namespace kvcanary

// Asserts that `statement` throws kvcanary::Error with exactly `message`.
#define EXPECT_KVC_ERROR(statement, message)                      \
  do {                                                            \
    try {                                                         \
      statement;                                                  \
      ADD_FAILURE() << "expected kvcanary::Error: " << (message); \
    } catch (const ::kvcanary::Error& error) {                    \
      EXPECT_EQ(std::string(error.what()), std::string(message)); \
    }                                                             \
  } while (0)
