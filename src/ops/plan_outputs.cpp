#include "ops/plan_outputs.h"

#include "kvcanary/error.h"
#include "kvcanary/format.h"

namespace kvcanary {
namespace {

// A row the plan ops write and every other op reads.
sig::TensorSpec PlanArray(const TensorView& view, PlanNames names, std::string_view out_name,
                          std::string_view plan_name, std::string_view input_name, DType dtype,
                          sig::Extent length) {
  switch (names) {
    case PlanNames::kOut:
      return sig::Out(view, out_name, dtype, 1, length);
    case PlanNames::kPlan:
      return sig::In(view, plan_name, dtype, 1, length);
    case PlanNames::kInput:
    case PlanNames::kStored:
      break;
  }
  return sig::In(view, input_name, dtype, 1, length);
}

}  // namespace

sig::SpecList VerifyEntrySpecs(const VerifyPlanView& plan, PlanNames names, sig::Extent length) {
  const auto row = [&](const TensorView& view, std::string_view out, std::string_view plan_name,
                       std::string_view stored) {
    const std::string_view in = names == PlanNames::kStored ? stored : out.substr(4);
    return PlanArray(view, names, out, plan_name, in, DType::kInt64, length);
  };
  return {row(plan.verify_slot_indices, "out_verify_slot_indices", "plan.verify_slot_indices",
              "stored_entries.verify_slot_indices"),
          row(plan.verify_expected_tokens, "out_verify_expected_tokens",
              "plan.verify_expected_tokens", "stored_entries.verify_expected_tokens"),
          row(plan.verify_expected_positions, "out_verify_expected_positions",
              "plan.verify_expected_positions", "stored_entries.verify_expected_positions"),
          row(plan.verify_prev_slot_indices, "out_verify_prev_slot_indices",
              "plan.verify_prev_slot_indices", "stored_entries.verify_prev_slot_indices")};
}

sig::SpecList VerifyCountSpecs(const TensorView& num_valid, const TensorView& enable,
                               PlanNames names) {
  return {PlanArray(num_valid, names, "out_verify_num_valid", "plan.verify_num_valid",
                    "verify_num_valid", DType::kInt32, sig::Exactly(1)),
          PlanArray(enable, names, "out_verify_enable", "plan.enable", "verify_enable",
                    DType::kInt32, sig::Exactly(1))};
}

sig::SpecList WritePlanSpecs(const WritePlanView& plan, PlanNames names) {
  const auto row = [&](const TensorView& view, std::string_view out, std::string_view in,
                       DType dtype, sig::Extent length) {
    return PlanArray(view, names, out, in, out.substr(4), dtype, length);
  };
  return {row(plan.write_offsets, "out_write_offsets", "plan.write_offsets", DType::kInt64, {}),
          row(plan.write_seed_slot_indices, "out_write_seed_slot_indices",
              "plan.write_seed_slot_indices", DType::kInt64, {}),
          row(plan.write_num_valid_reqs, "out_write_num_valid_reqs", "plan.write_num_valid_reqs",
              DType::kInt32, sig::Exactly(1))};
}

sig::SpecList StageOneOutputSpecs(const WritePlanView& write, const TensorView& verify_num_valid,
                                  const TensorView& verify_enable) {
  const sig::SpecList w = WritePlanSpecs(write, PlanNames::kOut);
  const sig::SpecList counts = VerifyCountSpecs(verify_num_valid, verify_enable, PlanNames::kOut);
  return {w.all()[0], w.all()[1], counts.all()[0], counts.all()[1], w.all()[2]};
}

void CheckWritePlanSizes(const WritePlanView& plan, int64_t bs) {
  const int64_t write_offsets_len = plan.write_offsets.size(0);
  const int64_t write_req_capacity = plan.write_seed_slot_indices.size(0);
  if (write_offsets_len != write_req_capacity + 1) {
    ThrowError("kv-canary: write_offsets_len must equal write_req_capacity + 1, got ",
               write_offsets_len, " and ", write_req_capacity);
  }
  if (bs > write_req_capacity) {
    ThrowError("kv-canary: bs=", bs, " exceeds write_req_capacity=", write_req_capacity);
  }
}

void CheckCapacityFitsDeviceCount(int64_t capacity, const char* what) {
  if (capacity > kMaxDeviceCount) {
    ThrowError("kv-canary: ", what, " must be <= ", kMaxDeviceCount, ", got ", capacity);
  }
}

VerifyPlanOutParams VerifyPlanOutParamsOf(const VerifyPlanView& plan, int64_t capacity) {
  return VerifyPlanOutParams{plan.verify_slot_indices.data_as<int64_t>(),
                             plan.verify_expected_tokens.data_as<int64_t>(),
                             plan.verify_expected_positions.data_as<int64_t>(),
                             plan.verify_prev_slot_indices.data_as<int64_t>(),
                             plan.verify_num_valid.data_as<int32_t>(),
                             plan.enable.data_as<int32_t>(),
                             capacity};
}

WritePlanOutParams WritePlanOutParamsOf(const WritePlanView& plan) {
  return WritePlanOutParams{plan.write_offsets.data_as<int64_t>(), plan.write_offsets.size(0),
                            plan.write_seed_slot_indices.data_as<int64_t>(),
                            plan.write_num_valid_reqs.data_as<int32_t>()};
}

}  // namespace kvcanary
