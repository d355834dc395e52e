// Runs the ops of a test written over host tensors on either backend, so one test checks the CPU
// and the CUDA backend against the same expectations (TEST_P over BackendParams()).
//
// On the CPU an op runs on the host tensors as they are. On CUDA every tensor the call names is
// copied into device memory (runtime::DeviceBuffer) with its shape, strides and alignment, the op
// runs there, and every copied region is copied back after the launch finished, so the host
// tensors hold the result either way. Views of overlapping host memory share one device copy.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "kvcanary/runtime/device_memory.h"
#include "testutil.h"

namespace kvcanary::testing {

enum class TestBackend { kCpu, kCuda };

inline std::vector<TestBackend> BackendParams() { return {TestBackend::kCpu, TestBackend::kCuda}; }
inline std::string BackendName(const ::testing::TestParamInfo<TestBackend>& info) {
  return info.param == TestBackend::kCpu ? "Cpu" : "Cuda";
}

class BackendRunner {
 public:
  explicit BackendRunner(TestBackend backend) : backend_(backend) {}

  bool on_cuda() const { return backend_ == TestBackend::kCuda; }
  // Whether this build and machine can run the backend (CUDA: the backend and a device).
  bool Available() const { return !on_cuda() || runtime::CudaDeviceAvailable(); }

  void Plan(PlanArgs args) { Call(args, &kvcanary::Plan); }
  void PlanOffsets(PlanOffsetsArgs args) { Call(args, &kvcanary::PlanOffsets); }
  void PlanEntries(PlanEntriesArgs args) { Call(args, &kvcanary::PlanEntries); }
  void Verify(VerifyArgs args) { Call(args, &kvcanary::Verify); }
  void FusedVerify(FusedVerifyArgs args) { Call(args, &kvcanary::FusedVerify); }
  void Write(WriteArgs args) { Call(args, &kvcanary::Write); }

  // The rows of one launch in the order the test may rely on: as recorded on the CPU, sorted on
  // CUDA (threads record concurrently, so only the multiset is defined there).
  std::vector<ViolationRow> InLaunchOrder(std::vector<ViolationRow> rows) const {
    return on_cuda() ? SortRows(std::move(rows)) : rows;
  }

 private:
  // One contiguous range of host memory and its device copy. The copy starts `lead` bytes into
  // its buffer so that device and host addresses agree modulo 256 (alignment is kept).
  struct Region {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    int64_t lead = 0;
    runtime::DeviceBuffer device;
  };

  static int64_t ExtentBytes(const TensorView& v) {
    if (v.numel() == 0) return 0;
    int64_t last = 0;
    for (int d = 0; d < v.ndim(); ++d) last += (v.size(d) - 1) * v.stride(d);
    return (last + 1) * ItemSize(v.dtype());
  }

  // Runs the op on the default stream (nullptr), on the CPU as given, on CUDA over device copies.
  template <typename Args>
  void Call(Args& args, void (*op)(const Args&, StreamHandle)) {
    if (!on_cuda()) {
      op(args, nullptr);
      return;
    }
    std::vector<Region> regions;
    ForEachView(args, [&](TensorView& v) { AddRange(regions, v); });
    const Device cuda = Device::CUDA(0);
    for (Region& r : regions) {
      r.lead = static_cast<int64_t>(r.begin % 256);
      const int64_t bytes = static_cast<int64_t>(r.end - r.begin);
      r.device = runtime::DeviceBuffer(cuda, r.lead + std::max<int64_t>(bytes, 16));
      runtime::CopyBytesAsync(r.device.data_as<char>() + r.lead, reinterpret_cast<void*>(r.begin),
                              bytes, cuda, nullptr);
    }
    ForEachView(args, [&](TensorView& v) { v = OnDevice(regions, v); });
    op(args, nullptr);
    for (const Region& r : regions) {
      runtime::CopyBytesAsync(reinterpret_cast<void*>(r.begin), r.device.data_as<char>() + r.lead,
                              static_cast<int64_t>(r.end - r.begin), cuda, nullptr);
    }
    runtime::SynchronizeStream(cuda, nullptr);
  }

  static void AddRange(std::vector<Region>& regions, const TensorView& v) {
    if (!v.defined()) return;
    uintptr_t begin = reinterpret_cast<uintptr_t>(v.data());
    uintptr_t end = begin + static_cast<uintptr_t>(ExtentBytes(v));
    // Merge with every region it overlaps or touches, so each byte has one device copy.
    for (auto it = regions.begin(); it != regions.end();) {
      if (it->begin <= end && begin <= it->end) {
        begin = std::min(begin, it->begin);
        end = std::max(end, it->end);
        it = regions.erase(it);
      } else {
        ++it;
      }
    }
    regions.push_back(Region{begin, end, 0, {}});
  }

  static TensorView OnDevice(const std::vector<Region>& regions, const TensorView& v) {
    if (!v.defined()) return v;
    const auto at = reinterpret_cast<uintptr_t>(v.data());
    for (const Region& r : regions) {
      if (at < r.begin || at > r.end) continue;
      std::vector<int64_t> shape;
      std::vector<int64_t> strides;
      for (int d = 0; d < v.ndim(); ++d) {
        shape.push_back(v.size(d));
        strides.push_back(v.stride(d));
      }
      char* data = r.device.data_as<char>() + r.lead + (at - r.begin);
      return TensorView(data, v.dtype(), Device::CUDA(0), shape, strides, v.writable());
    }
    ADD_FAILURE() << "BackendRunner: a view outside every copied region";
    return v;
  }

  // Calls f on each of the views.
  template <typename F>
  static void Each(std::initializer_list<TensorView*> views, F&& f) {
    for (TensorView* v : views) f(*v);
  }

  // Every tensor of an op's arguments, sources included.
  template <typename F>
  static void ForEachView(PlanInputs& in, F&& f) {
    Each({&in.req_pool_indices, &in.prefix_lens, &in.extend_seq_lens, &in.req_to_token,
          &in.block_table, &in.full_to_swa_index_mapping, &in.req_to_verify_expected_tokens,
          &in.req_to_verify_expected_tokens_valid_lens, &in.verify_phase},
         f);
  }
  template <typename F>
  static void ForEachView(VerifyPlanView& p, F&& f) {
    Each({&p.verify_slot_indices, &p.verify_expected_tokens, &p.verify_expected_positions,
          &p.verify_prev_slot_indices, &p.verify_num_valid, &p.enable},
         f);
  }
  template <typename F>
  static void ForEachView(WritePlanView& p, F&& f) {
    Each({&p.write_offsets, &p.write_seed_slot_indices, &p.write_num_valid_reqs}, f);
  }
  template <typename F>
  static void ForEachView(LaunchContext& c, F&& f) {
    Each({&c.canary_buf, &c.violation_ring, &c.violation_write_index, &c.slot_run_counter,
          &c.kernel_run_counter, &c.enable_chain_position_assert},
         f);
    for (int i = 0; i < c.num_real_kv_sources; ++i) f(c.real_kv_sources[i].tensor);
  }
  template <typename F>
  static void ForEachView(std::optional<LaunchContext>& c, F&& f) {
    if (c.has_value()) ForEachView(*c, f);
  }
  template <typename F>
  static void ForEachView(PlanArgs& a, F&& f) {
    ForEachView(a.inputs, f);
    ForEachView(a.verify_plan_out, f);
    ForEachView(a.write_plan_out, f);
    f(a.verify_offsets_scratch);
  }
  template <typename F>
  static void ForEachView(PlanOffsetsArgs& a, F&& f) {
    ForEachView(a.inputs, f);
    Each({&a.out_verify_offsets_scratch, &a.out_write_offsets, &a.out_write_seed_slot_indices,
          &a.out_verify_num_valid, &a.out_verify_enable, &a.out_write_num_valid_reqs},
         f);
  }
  template <typename F>
  static void ForEachView(PlanEntriesArgs& a, F&& f) {
    ForEachView(a.inputs, f);
    Each({&a.verify_offsets_scratch, &a.verify_enable, &a.out_verify_slot_indices,
          &a.out_verify_expected_tokens, &a.out_verify_expected_positions,
          &a.out_verify_prev_slot_indices},
         f);
  }
  template <typename F>
  static void ForEachView(VerifyArgs& a, F&& f) {
    ForEachView(a.context, f);
    ForEachView(a.paired_context, f);
    ForEachView(a.plan, f);
  }
  template <typename F>
  static void ForEachView(FusedVerifyArgs& a, F&& f) {
    ForEachView(a.context, f);
    ForEachView(a.paired_context, f);
    ForEachView(a.inputs, f);
    Each({&a.verify_offsets_scratch, &a.verify_num_valid, &a.verify_enable}, f);
  }
  template <typename F>
  static void ForEachView(WriteArgs& a, F&& f) {
    ForEachView(a.context, f);
    ForEachView(a.paired_context, f);
    ForEachView(a.plan, f);
    Each({&a.input_ids, &a.positions, &a.out_cache_loc, &a.expected_input_tokens,
          &a.expected_input_positions},
         f);
  }

  TestBackend backend_;
};

// The fixture of a test that runs on both backends: `backend` runs its ops; the CUDA instance
// skips where this build or machine has no CUDA device.
class BackendTest : public ::testing::TestWithParam<TestBackend> {
 protected:
  void SetUp() override {
    if (!backend.Available()) GTEST_SKIP() << "no CUDA device";
  }
  BackendRunner backend{GetParam()};
};

}  // namespace kvcanary::testing

// Runs every TEST_P of `Fixture` (a BackendTest) on the CPU and on CUDA.
#define KVC_ON_EVERY_BACKEND(Fixture)                                                 \
  INSTANTIATE_TEST_SUITE_P(Backends, Fixture,                                         \
                           ::testing::ValuesIn(::kvcanary::testing::BackendParams()), \
                           ::kvcanary::testing::BackendName)
