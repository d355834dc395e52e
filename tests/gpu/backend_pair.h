// One forward step's tensors on one backend. BackendStep is built from a StepInputs by the same
// code for the CPU (host tensors, testutil.h's CanaryState and PlanBuffers) and for CUDA (their
// device mirrors), so the two calls of a differential test differ only in where the tensors live.
// Also the comparisons of the two backends' outputs: bytes everywhere, except the violation ring,
// whose rows are compared as a multiset (the CUDA row order across threads is
// unspecified).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "device_state.h"
#include "plan_args.h"
#include "step_inputs.h"
#include "testutil.h"

namespace kvcanary::testing {

template <template <typename> class Buf, typename T>
std::optional<Buf<T>> MirrorOptional(const std::optional<HostTensor<T>>& host) {
  if (!host.has_value()) return std::nullopt;
  return std::optional<Buf<T>>(std::in_place, *host);
}

template <typename B>
TensorView ViewOf(const std::optional<B>& tensor) {
  return tensor.has_value() ? tensor->view() : TensorView();
}

// One half of a K/V pair on one backend.
template <typename State, template <typename> class Buf>
struct BackendHalf {
  explicit BackendHalf(const HalfInputs& in) : state(in.state), tag(in.tag), geometry(&in.sources) {
    for (const KvSourceInput& source : in.sources) bytes.emplace_back(source.bytes);
    if (in.layered) layer_table.emplace(LayerAddresses(Views()));  // this backend's addresses
  }

  std::vector<TensorView> Views() const {
    std::vector<TensorView> views;
    for (const Buf<uint8_t>& b : bytes) views.push_back(b.view());
    return views;
  }
  LaunchContext Context(RealKvHashMode mode) const {
    return WithSources(state.Context(tag), Views(), *geometry, mode, ViewOf(layer_table));
  }

  State state;
  int64_t tag;
  const std::vector<KvSourceInput>* geometry;
  std::vector<Buf<uint8_t>> bytes;
  std::optional<Buf<int64_t>> layer_table;
};

// The step on one backend. REQUIRES: `in` outlives it.
template <typename State, typename Plan, template <typename> class Buf>
struct BackendStep {
  explicit BackendStep(const StepInputs& in)
      : inputs(in),
        primary(in.primary),
        plan(in.plan),
        req_pool_indices(in.req_pool_indices),
        prefix_lens(in.prefix_lens),
        extend_seq_lens(in.extend_seq_lens),
        req_to_token(in.req_to_token),
        block_table32(MirrorOptional<Buf>(in.block_table32)),
        block_table64(MirrorOptional<Buf>(in.block_table64)),
        lut(MirrorOptional<Buf>(in.lut)),
        verify_phase(MirrorOptional<Buf>(in.verify_phase)),
        pool(MirrorOptional<Buf>(in.pool)),
        valid_lens(MirrorOptional<Buf>(in.valid_lens)),
        scratch(MirrorOptional<Buf>(in.scratch)),
        stage_scratch(HostTensor<int64_t>({kPlanOffsetsScratchMinLength}, -3)),
        fused_scratch(HostTensor<int64_t>({in.req_pool_indices.shape()[0] + 1}, -3)),
        input_ids(in.input_ids),
        positions(in.positions),
        out_cache_loc(in.out_cache_loc),
        expected_tokens(MirrorOptional<Buf>(in.expected_tokens)),
        expected_positions(MirrorOptional<Buf>(in.expected_positions)) {
    if (in.paired.has_value()) paired.emplace(*in.paired);
  }

  LaunchContext Context() const { return primary.Context(inputs.mode); }
  // The V half: its own buffer, counters and sources; rows go to the primary's ring.
  std::optional<LaunchContext> PairedContext() const {
    if (!paired.has_value()) return std::nullopt;
    LaunchContext context = paired->Context(inputs.mode);
    context.violation_ring = primary.state.ring.view();
    context.violation_write_index = primary.state.write_index.view();
    return context;
  }

  // req_to_token as the plan sees it: the whole tensor, or its first columns (a row view).
  TensorView TableView() const {
    if (inputs.req_to_token_width == 0) return req_to_token.view();
    const int64_t pitch = inputs.req_to_token.shape()[1];
    return req_to_token.view({inputs.req_to_token.shape()[0], inputs.req_to_token_width},
                             {pitch, 1});
  }

  // The inputs all three plan calls read: the batch, the table, the SWA window and LUT.
  PlanInputs SharedPlanInputs() const {
    PlanInputs in;
    in.req_pool_indices = req_pool_indices.view();
    in.prefix_lens = prefix_lens.view();
    if (inputs.block_size > 0) {
      in.block_table = block_table64.has_value() ? ViewOf(block_table64) : ViewOf(block_table32);
      in.block_size = inputs.block_size;
    } else {
      in.req_to_token = TableView();
    }
    in.swa_window_size = inputs.window;
    in.full_to_swa_index_mapping = ViewOf(lut);
    in.verify_sample = inputs.verify_sample;
    in.verify_phase = ViewOf(verify_phase);
    return in;
  }
  // The expected-token pool that Plan and PlanEntries read.
  void AddTokenPool(PlanInputs& in) const {
    in.req_to_verify_expected_tokens = ViewOf(pool);
    in.req_to_verify_expected_tokens_valid_lens = ViewOf(valid_lens);
    in.kv_token_id_vs_position_offset = inputs.pool_offset;
  }

  PlanArgs PlanArgsOf() const {
    PlanArgs a;
    a.verify_plan_out = plan.verify();
    a.write_plan_out = plan.write();
    a.inputs = SharedPlanInputs();
    a.inputs.extend_seq_lens = extend_seq_lens.view();
    if (inputs.req_to_token_width > 0) {
      a.inputs.req_to_token_stride0 = inputs.req_to_token.shape()[1];
    }
    AddTokenPool(a.inputs);
    a.verify_capacity = plan.slots.shape()[0];
    a.verify_offsets_scratch = ViewOf(scratch);
    return a;
  }
  // The two stages of the plan (REQUIRES bs <= 4096); the offsets go to stage_scratch.
  PlanOffsetsArgs OffsetsArgsOf() const {
    PlanOffsetsArgs a;
    a.inputs = SharedPlanInputs();
    a.inputs.extend_seq_lens = extend_seq_lens.view();
    SetPlanOffsetsOutputs(a, plan, stage_scratch);
    a.verify_capacity = plan.slots.shape()[0];
    return a;
  }
  PlanEntriesArgs EntriesArgsOf() const {
    PlanInputs in = SharedPlanInputs();
    AddTokenPool(in);
    return PlanEntriesArgs{.inputs = in,
                           .verify_offsets_scratch = stage_scratch.view(),
                           .verify_enable = plan.enable.view(),
                           .out_verify_slot_indices = plan.slots.view(),
                           .out_verify_expected_tokens = plan.tokens.view(),
                           .out_verify_expected_positions = plan.positions.view(),
                           .out_verify_prev_slot_indices = plan.prevs.view()};
  }
  // The offsets-only plan that feeds FusedVerify: the counts and write plan into `plan` (its
  // entry arrays stay as they were), the offsets into fused_scratch. With stored entries it is
  // given the largest capacity, as the runtime's bound: every step fits the plan, not always the
  // arrays, so both ways of getting an entry run.
  PlanArgs OffsetsOnlyPlanArgsOf(bool stored = false) const {
    PlanArgs a = PlanArgsOf();
    if (stored) a.verify_capacity = kMaxDeviceCount;
    a.verify_plan_out = VerifyPlanView{TensorView(), TensorView(),          TensorView(),
                                       TensorView(), plan.num_valid.view(), plan.enable.view()};
    a.verify_offsets_scratch = fused_scratch.view();
    return a;
  }
  // stored: the plan buffers' entry arrays are the verify's stored entries.
  FusedVerifyArgs FusedVerifyArgsOf(bool stored = false) const {
    const PlanArgs plan = OffsetsOnlyPlanArgsOf(stored);
    FusedVerifyArgs a{.inputs = plan.inputs,
                      .verify_offsets_scratch = plan.verify_offsets_scratch,
                      .verify_num_valid = plan.verify_plan_out.verify_num_valid,
                      .verify_enable = plan.verify_plan_out.enable,
                      .verify_capacity = plan.verify_capacity};
    a.context = Context();
    a.paired_context = PairedContext();
    a.check_verify_expected_token = inputs.check_token;
    if (stored) a.stored_entries = this->plan.verify();
    return a;
  }
  // A fused stage: HEAD (with_plan: the offsets-only plan first) or TAIL (a sampled case's TAIL
  // advances the phases last), the write after the verify.
  // stored: HEAD stores its entries into the plan buffers' arrays and both verifies read them.
  FusedStageArgs FusedStageArgsOf(bool with_plan, bool stored = false) const {
    FusedStageArgs args{
        .plan = with_plan ? std::optional<PlanArgs>(OffsetsOnlyPlanArgsOf(stored)) : std::nullopt,
        .verify = FusedVerifyArgsOf(stored),
        .write = WriteArgsOf()};
    if (!with_plan && verify_phase.has_value()) {
      args.advance_phase = AdvanceVerifyPhaseArgs{verify_phase->view(), req_pool_indices.view()};
    }
    return args;
  }
  VerifyArgs VerifyArgsOf() const {
    VerifyArgs a;
    a.context = Context();
    a.plan = plan.verify();
    a.check_verify_expected_token = inputs.check_token;
    a.paired_context = PairedContext();
    return a;
  }
  // out_cache_loc translated in place through the LUT. REQUIRES: a LUT.
  SwaTranslateArgs TranslateArgsOf() const {
    return SwaTranslateArgs{out_cache_loc.view(), lut->view(), out_cache_loc.view()};
  }
  WriteArgs WriteArgsOf() const {
    WriteArgs a = WriteCall(Context(), plan.write(), input_ids.view(), positions.view(),
                            out_cache_loc.view());
    a.enable_write_input_assert = expected_tokens.has_value();
    a.expected_input_tokens = ViewOf(expected_tokens);
    a.expected_input_positions = ViewOf(expected_positions);
    a.paired_context = PairedContext();
    return a;
  }

  const StepInputs& inputs;
  BackendHalf<State, Buf> primary;
  std::optional<BackendHalf<State, Buf>> paired;
  Plan plan;
  Buf<int64_t> req_pool_indices, prefix_lens, extend_seq_lens;
  Buf<int32_t> req_to_token;
  std::optional<Buf<int32_t>> block_table32;
  std::optional<Buf<int64_t>> block_table64;
  std::optional<Buf<int64_t>> lut;
  std::optional<Buf<int64_t>> verify_phase;
  std::optional<Buf<int32_t>> pool;
  std::optional<Buf<int64_t>> valid_lens, scratch;
  Buf<int64_t> stage_scratch;
  Buf<int64_t> fused_scratch;
  Buf<int64_t> input_ids, positions, out_cache_loc;
  std::optional<Buf<int64_t>> expected_tokens, expected_positions;
};

using CpuStep = BackendStep<CanaryState, PlanBuffers, HostTensor>;
using CudaStep = BackendStep<DeviceCanaryState, DevicePlanBuffers, DeviceTensor>;

// Element-wise byte equality, reporting the count and the first difference.
template <typename T>
void ExpectSameTensor(const HostTensor<T>& cpu, const HostTensor<T>& cuda,
                      const std::string& what) {
  ASSERT_EQ(cpu.shape(), cuda.shape()) << what;
  int64_t mismatches = 0;
  int64_t first = -1;
  for (size_t i = 0; i < cpu.values().size(); ++i) {
    if (std::memcmp(&cpu.values()[i], &cuda.values()[i], sizeof(T)) != 0) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++mismatches;
    }
  }
  if (mismatches > 0) {
    ADD_FAILURE() << what << ": " << mismatches << " of " << cpu.values().size()
                  << " elements differ; first at flat index " << first << ": cpu " << +cpu[first]
                  << ", cuda " << +cuda[first];
  }
}

inline void ExpectSamePlan(const PlanBuffers& cpu, const PlanBuffers& cuda,
                           const std::string& what) {
  // Whole arrays: both start from the same stale contents, and the plan fixes its footprint, so
  // what a backend leaves unwritten must match too.
  ExpectSameTensor(cpu.slots, cuda.slots, what + ": verify_slot_indices");
  ExpectSameTensor(cpu.tokens, cuda.tokens, what + ": verify_expected_tokens");
  ExpectSameTensor(cpu.positions, cuda.positions, what + ": verify_expected_positions");
  ExpectSameTensor(cpu.prevs, cuda.prevs, what + ": verify_prev_slot_indices");
  ExpectSameTensor(cpu.num_valid, cuda.num_valid, what + ": verify_num_valid");
  ExpectSameTensor(cpu.enable, cuda.enable, what + ": enable");
  ExpectSameTensor(cpu.offsets, cuda.offsets, what + ": write_offsets");
  ExpectSameTensor(cpu.seeds, cuda.seeds, what + ": write_seed_slot_indices");
  ExpectSameTensor(cpu.num_valid_reqs, cuda.num_valid_reqs, what + ": write_num_valid_reqs");
}

// Records, counters and flags byte for byte; the valid ring rows as a multiset; the ring rows past
// them (never written) byte for byte.
inline void ExpectSameState(const CanaryState& cpu, const CanaryState& cuda,
                            const std::string& what) {
  ExpectSameTensor(cpu.canary, cuda.canary,
                   what + ": canary_buf (stride " + std::to_string(cpu.canary.shape()[1]) + ")");
  ExpectSameTensor(cpu.write_index, cuda.write_index, what + ": violation_write_index");
  ExpectSameTensor(cpu.slot_run_counter, cuda.slot_run_counter, what + ": slot_run_counter");
  ExpectSameTensor(cpu.kernel_run_counter, cuda.kernel_run_counter, what + ": kernel_run_counter");
  ExpectSameTensor(cpu.chain_assert, cuda.chain_assert, what + ": enable_chain_position_assert");
  EXPECT_EQ(SortRows(cpu.rows()), SortRows(cuda.rows())) << what << ": violation rows";
  ASSERT_EQ(cpu.ring.shape(), cuda.ring.shape());
  const size_t valid = cpu.rows().size() * kViolationFields;
  EXPECT_TRUE(std::equal(cpu.ring.values().begin() + valid, cpu.ring.values().end(),
                         cuda.ring.values().begin() + valid))
      << what << ": ring rows past the recorded ones";
}

inline void ExpectSameStates(const CpuStep& cpu, const CudaStep& cuda, const std::string& what) {
  ExpectSameState(cpu.primary.state, cuda.primary.state.ToHost(), what);
  if (cpu.paired.has_value()) {
    ExpectSameState(cpu.paired->state, cuda.paired->state.ToHost(), what + " (paired half)");
  }
}

}  // namespace kvcanary::testing
