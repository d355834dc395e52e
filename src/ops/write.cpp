// launch_canary_write_kernel: validation (spec/kernels.md §11, rows W1-W14) and dispatch.
#include "kvcanary/write.h"

#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "ops/check.h"
#include "ops/dispatch.h"
#include "ops/launch_context.h"

#if defined(KVC_HAVE_CUDA)
#include "cuda/backend.h"
#endif

namespace kvcanary {
namespace {

void Validate(const WriteArgs& a) {
  const LaunchContext& c = a.context;
  const WritePlanView& p = a.plan;
  check::AllPresent({{&c.canary_buf, "canary_buf"},
                     {&p.write_offsets, "plan.write_offsets"},
                     {&p.write_seed_slot_indices, "plan.write_seed_slot_indices"},
                     {&p.write_num_valid_reqs, "plan.write_num_valid_reqs"},
                     {&a.input_ids, "input_ids"},
                     {&a.positions, "positions"},
                     {&a.out_cache_loc, "out_cache_loc"},
                     {&c.violation_ring, "violation_ring"},
                     {&c.violation_write_index, "violation_write_index"},
                     {&c.slot_run_counter, "slot_run_counter"},
                     {&c.kernel_run_counter, "kernel_run_counter"},
                     {&c.enable_chain_position_assert, "enable_chain_position_assert"}});
  CheckSourceCountLimit(c);  // W1
  // W2.
  check::Contiguous(c.canary_buf, "canary_buf");
  check::Contiguous(p.write_offsets, "plan.write_offsets");
  check::Contiguous(p.write_seed_slot_indices, "plan.write_seed_slot_indices");
  check::Contiguous(p.write_num_valid_reqs, "plan.write_num_valid_reqs");
  check::Contiguous(a.input_ids, "input_ids");
  check::Contiguous(a.positions, "positions");
  check::Contiguous(a.out_cache_loc, "out_cache_loc");
  // W3-W5: the expected tensors exactly when the input assert is on.
  const bool has_expected =
      a.expected_input_tokens.defined() || a.expected_input_positions.defined();
  if (a.enable_write_input_assert) {
    if (!a.expected_input_tokens.defined() || !a.expected_input_positions.defined()) {
      ThrowError("kv-canary: expected input tensors are required when "
                 "enable_write_input_assert=True");
    }
    check::Contiguous(a.expected_input_tokens, "expected_input_tokens");
    check::Contiguous(a.expected_input_positions, "expected_input_positions");
  } else if (has_expected) {
    ThrowError("kv-canary: expected input tensors must be None when "
               "enable_write_input_assert=False");
  }
  // W6.
  CheckRingContiguous(c);
  check::Contiguous(c.enable_chain_position_assert, "enable_chain_position_assert");
  CheckSourceLayouts(c);
  CheckCanaryBuf(c, "canary_write");  // W7
  // W8.
  check::HasDType(p.write_seed_slot_indices, DType::kInt64, "plan.write_seed_slot_indices");
  check::Is1D(p.write_seed_slot_indices, "plan.write_seed_slot_indices");
  const int64_t capacity = p.write_seed_slot_indices.size(0);
  check::HasDType(p.write_offsets, DType::kInt64, "plan.write_offsets");
  check::Is1D(p.write_offsets, "plan.write_offsets");
  if (p.write_offsets.size(0) != capacity + 1) {
    ThrowError("kv-canary: canary_write: write_offsets.size(0) must equal write_req_capacity + 1 (",
               capacity + 1, "), got ", p.write_offsets.size(0));
  }
  check::Vector(p.write_num_valid_reqs, DType::kInt32, 1, "plan.write_num_valid_reqs");
  // W9.
  check::HasDType(a.input_ids, DType::kInt64, "input_ids");
  check::Is1D(a.input_ids, "input_ids");
  const int64_t num_tokens = a.input_ids.size(0);
  check::Vector(a.positions, DType::kInt64, num_tokens, "positions");
  check::Vector(a.out_cache_loc, DType::kInt64, num_tokens, "out_cache_loc");
  if (a.enable_write_input_assert) {
    check::Vector(a.expected_input_tokens, DType::kInt64, num_tokens, "expected_input_tokens");
    check::Vector(a.expected_input_positions, DType::kInt64, num_tokens,
                  "expected_input_positions");
  }
  // W10.
  CheckRingAndCounters(c);
  check::Vector(c.enable_chain_position_assert, DType::kInt32, 1, "enable_chain_position_assert");
  CheckSourceCountRange(c, "canary_write");  // W11
  // W12, then G8.
  CheckRealKvHashMode(c);
  CheckContextDevices(c);
  check::SameDevice(c.canary_buf, "canary_buf",
                    {{&c.enable_chain_position_assert, "enable_chain_position_assert"},
                     {&p.write_offsets, "plan.write_offsets"},
                     {&p.write_seed_slot_indices, "plan.write_seed_slot_indices"},
                     {&p.write_num_valid_reqs, "plan.write_num_valid_reqs"},
                     {&a.input_ids, "input_ids"},
                     {&a.positions, "positions"},
                     {&a.out_cache_loc, "out_cache_loc"},
                     {&a.expected_input_tokens, "expected_input_tokens"},
                     {&a.expected_input_positions, "expected_input_positions"}});
  check::Writable(c.canary_buf, "canary_buf");
  CheckContextWritable(c);
}

WriteParams ParamsOf(const WriteArgs& args, const LaunchContext& context) {
  WriteParams params;
  params.launch = LaunchParamsOf(context);
  params.offsets = args.plan.write_offsets.data_as<const int64_t>();
  params.seeds = args.plan.write_seed_slot_indices.data_as<const int64_t>();
  params.num_valid_reqs = args.plan.write_num_valid_reqs.data_as<const int32_t>();
  params.capacity = args.plan.write_seed_slot_indices.size(0);
  params.input_ids = args.input_ids.data_as<const int64_t>();
  params.positions = args.positions.data_as<const int64_t>();
  params.out_cache_loc = args.out_cache_loc.data_as<const int64_t>();
  params.num_tokens = args.input_ids.size(0);
  params.input_assert = args.enable_write_input_assert;
  if (args.enable_write_input_assert) {
    params.expected_tokens = args.expected_input_tokens.data_as<const int64_t>();
    params.expected_positions = args.expected_input_positions.data_as<const int64_t>();
  }
  params.enable_chain_position_assert =
      context.enable_chain_position_assert.data_as<const int32_t>();
  return params;
}

}  // namespace

void Write(const WriteArgs& args, StreamHandle stream) {
  ValidateWithPair(args, [](const auto& half) { Validate(half); });
  const WriteParams params = ParamsOf(args, args.context);
  const bool has_pair = args.paired_context.has_value();
  const WriteParams paired_params = has_pair ? ParamsOf(args, *args.paired_context) : params;
  switch (SelectBackend(args.context.canary_buf, "canary_buf")) {
    case Backend::kCpu:
      cpu::Write(params);
      if (has_pair) cpu::Write(paired_params);
      return;
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda::Write(params, has_pair ? &paired_params : nullptr,
                                  args.context.canary_buf.device().index, stream),
                      "canary_write");
#endif
      return;
  }
  (void)stream;
}

}  // namespace kvcanary
