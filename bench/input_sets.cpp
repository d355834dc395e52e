// Building, binding and running the rotated input sets.
#include "bench/input_sets.h"

#include <algorithm>
#include <stdexcept>

#include "bench/byte_counts.h"

namespace kvcanary::bench {
namespace {

DeviceTensor Zeroed(BenchDevice& device, DType dtype, int64_t length) {
  DeviceTensor tensor(device, dtype, {length});
  ZeroFill(tensor);
  return tensor;
}

void BuildSet(const Pool& pool, const CaseLayout& layout, int64_t first_request, InputSet& set) {
  BenchDevice& device = pool.device();
  const BenchCase& shape = layout.shape();
  const int64_t batch = shape.batch;
  set.first_request = first_request;
  set.verify_entries = batch * VerifiedPositions(shape);
  set.write_tokens = batch * shape.extend;

  std::vector<int64_t> rows(batch), input_ids, positions, out_cache_loc;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t request = first_request + b;
    rows[b] = layout.Row(request);
    for (int64_t i = 0; i < shape.extend; ++i) {
      const int64_t position = shape.prefix + i;
      input_ids.push_back(TokenAt(position));
      positions.push_back(position);
      out_cache_loc.push_back(layout.Slot(request, position));
    }
  }
  set.req_pool_indices = DeviceTensor(device, DType::kInt64, {batch});
  set.req_pool_indices.Upload(rows);
  set.prefix_lens = DeviceTensor(device, DType::kInt64, {batch});
  set.prefix_lens.Upload(std::vector<int64_t>(batch, shape.prefix));
  set.extend_seq_lens = DeviceTensor(device, DType::kInt64, {batch});
  set.extend_seq_lens.Upload(std::vector<int64_t>(batch, shape.extend));
  set.scratch = Zeroed(device, DType::kInt64, batch + 1);

  set.stores_entries =
      StoredEntriesPay(device.device().type, shape.verify_sample, shape.block_size > 0);
  const int64_t capacity = std::max<int64_t>(set.verify_entries, 1);
  set.verify_slots = Zeroed(device, DType::kInt64, capacity);
  set.verify_tokens = Zeroed(device, DType::kInt64, capacity);
  set.verify_positions = Zeroed(device, DType::kInt64, capacity);
  set.verify_prevs = Zeroed(device, DType::kInt64, capacity);
  set.verify_num_valid = Zeroed(device, DType::kInt32, 1);
  set.verify_enable = DeviceTensor(device, DType::kInt32, {1});
  set.verify_enable.Upload(std::vector<int32_t>{1});  // as VerifyPlan.allocate leaves it
  set.write_offsets = Zeroed(device, DType::kInt64, batch + 1);
  set.write_seeds = Zeroed(device, DType::kInt64, batch);
  set.write_num_valid_reqs = Zeroed(device, DType::kInt32, 1);

  set.input_ids = DeviceTensor(device, DType::kInt64, {set.write_tokens});
  set.input_ids.Upload(input_ids);
  set.positions = DeviceTensor(device, DType::kInt64, {set.write_tokens});
  set.positions.Upload(positions);
  set.out_cache_loc = DeviceTensor(device, DType::kInt64, {set.write_tokens});
  set.out_cache_loc.Upload(out_cache_loc);

  PlanArgs& plan = set.plan_args;
  plan.verify_plan_out = VerifyPlanView{set.verify_slots.view(),     set.verify_tokens.view(),
                                        set.verify_positions.view(), set.verify_prevs.view(),
                                        set.verify_num_valid.view(), set.verify_enable.view()};
  plan.write_plan_out = WritePlanView{set.write_offsets.view(), set.write_seeds.view(),
                                      set.write_num_valid_reqs.view()};
  plan.inputs.req_pool_indices = set.req_pool_indices.view();
  plan.inputs.prefix_lens = set.prefix_lens.view();
  plan.inputs.extend_seq_lens = set.extend_seq_lens.view();
  if (shape.block_size > 0) {
    plan.inputs.block_table = pool.block_table().view();
    plan.inputs.block_size = shape.block_size;
  } else {
    plan.inputs.req_to_token = pool.req_to_token().view();
  }
  if (shape.verify_sample > 1) {
    set.verify_phase = Zeroed(device, DType::kInt64, 1);
    plan.inputs.verify_sample = shape.verify_sample;
    plan.inputs.verify_phase = set.verify_phase.view();
  }
  plan.verify_capacity = capacity;
  plan.verify_offsets_scratch = set.scratch.view();
  set.offsets_plan_args = plan;
  set.offsets_plan_args.verify_plan_out = VerifyPlanView{TensorView(),
                                                         TensorView(),
                                                         TensorView(),
                                                         TensorView(),
                                                         set.verify_num_valid.view(),
                                                         set.verify_enable.view()};
}

}  // namespace

int64_t VerifiedPositions(const BenchCase& shape) {
  int64_t count = 0;
  for (int64_t p = 0; p < shape.prefix; ++p) {
    const bool sampled = (p / kVerifySampleRun) % shape.verify_sample == 0;
    if (sampled || p == shape.prefix - 1) count += 1;
  }
  return count;
}

int64_t InputSetBytes(const BenchCase& shape) {
  return VerifyBytes(shape.batch * VerifiedPositions(shape), kCheckVerifyExpectedToken, 1) +
         WriteBytes(shape.batch * shape.extend, 1);
}

int64_t NumInputSets(const Suite& suite, const BenchCase& shape) {
  const int64_t bytes = std::max<int64_t>(InputSetBytes(shape), 1);
  const int64_t wanted =
      std::clamp((kRotationBytes + bytes - 1) / bytes, kMinInputSets, kMaxInputSets);
  const int64_t fit = (suite.req_to_token_rows - 1) / shape.batch;
  if (fit < kMinInputSets) {
    throw std::invalid_argument("bench case " + shape.name + ": req_to_token has rows for " +
                                std::to_string(fit) + " batches");
  }
  return std::min(wanted, fit);
}

std::vector<InputSet> MakeInputSets(const Pool& pool, const CaseLayout& layout, int64_t count) {
  std::vector<InputSet> sets(count);
  for (int64_t k = 0; k < count; ++k) {
    BuildSet(pool, layout, k * layout.shape().batch, sets[k]);
  }
  return sets;
}

void BindMode(std::vector<InputSet>& sets, const Pool& pool, RealData mode) {
  for (InputSet& set : sets) {
    for (int t = 0; t < 4; ++t) {
      const LaunchContext context = pool.Context(kStepTags[t], mode);
      VerifyArgs& verify = set.verify_args[t];
      verify.context = context;
      verify.plan = set.plan_args.verify_plan_out;
      verify.check_verify_expected_token = kCheckVerifyExpectedToken;
      FusedVerifyArgs& fused = set.fused_verify_args[t];
      const PlanArgs& plan = set.offsets_plan_args;
      fused = FusedVerifyArgs{.inputs = plan.inputs,
                              .verify_offsets_scratch = plan.verify_offsets_scratch,
                              .verify_num_valid = plan.verify_plan_out.verify_num_valid,
                              .verify_enable = plan.verify_plan_out.enable,
                              .verify_capacity = plan.verify_capacity};
      fused.context = context;
      fused.check_verify_expected_token = kCheckVerifyExpectedToken;
      WriteArgs& write = set.write_args[t];
      write.context = context;
      write.plan = set.plan_args.write_plan_out;
      write.input_ids = set.input_ids.view();
      write.positions = set.positions.view();
      write.out_cache_loc = set.out_cache_loc.view();
    }
  }
}

// kStepTags holds (HEAD K, HEAD V, TAIL K, TAIL V): each endpoint's K launch carries its V half
// as the paired context, so the plan is read once per endpoint and the two chains overlap.
namespace {

template <typename Args>
Args PairedLaunch(const std::array<Args, 4>& args, int k) {
  Args launch = args[k];
  launch.paired_context = args[k + 1].context;
  return launch;
}

}  // namespace

void RunStep(const InputSet& set, StreamHandle stream, bool store_entries) {
  for (int k = 0; k < 4; k += 2) {  // HEAD (with the plan), then TAIL
    FusedVerifyArgs verify = PairedLaunch(set.fused_verify_args, k);
    if (store_entries) verify.stored_entries = set.plan_args.verify_plan_out;
    FusedStage({.plan = k == 0 ? std::optional<PlanArgs>(set.offsets_plan_args) : std::nullopt,
                .verify = verify,
                .write = PairedLaunch(set.write_args, k)},
               stream);
  }
}

void RunPlannedStep(const InputSet& set, StreamHandle stream) {
  Plan(set.plan_args, stream);
  for (int k = 0; k < 4; k += 2) {
    Verify(PairedLaunch(set.verify_args, k), stream);
    Write(PairedLaunch(set.write_args, k), stream);
  }
}

int StepTagIndex(CanaryLaunchTag tag) {
  for (int t = 0; t < 4; ++t) {
    if (kStepTags[t] == tag) return t;
  }
  throw std::logic_error("bench: not a step tag");
}

}  // namespace kvcanary::bench
