#include "conversions.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "dlpack_import.h"
#include "kvcanary/kvcanary.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

// The class a kType kvcanary::Error becomes; created once by Error_Register and never freed (it
// must outlive every module that may raise it).
PyObject* g_type_error_class = nullptr;

StreamHandle StreamOf(StreamInt stream) { return reinterpret_cast<StreamHandle>(stream); }

// One attribute of a plan or context object, imported under `prefix + attribute` (the name the
// op's own messages use).
TensorView ImportAttr(ImportScope& scope, py::handle object, const char* attribute,
                      const std::string& prefix) {
  return scope.Import(object.attr(attribute), prefix + attribute);
}

VerifyPlanView VerifyPlan_ToView(py::handle plan, ImportScope& scope, const std::string& prefix) {
  VerifyPlanView view;
  view.verify_slot_indices = ImportAttr(scope, plan, "verify_slot_indices", prefix);
  view.verify_expected_tokens = ImportAttr(scope, plan, "verify_expected_tokens", prefix);
  view.verify_expected_positions = ImportAttr(scope, plan, "verify_expected_positions", prefix);
  view.verify_prev_slot_indices = ImportAttr(scope, plan, "verify_prev_slot_indices", prefix);
  view.verify_num_valid = ImportAttr(scope, plan, "verify_num_valid", prefix);
  view.enable = ImportAttr(scope, plan, "enable", prefix);
  return view;
}

WritePlanView WritePlan_ToView(py::handle plan, ImportScope& scope, const std::string& prefix) {
  WritePlanView view;
  view.write_offsets = ImportAttr(scope, plan, "write_offsets", prefix);
  view.write_seed_slot_indices = ImportAttr(scope, plan, "write_seed_slot_indices", prefix);
  view.write_num_valid_reqs = ImportAttr(scope, plan, "write_num_valid_reqs", prefix);
  return view;
}

RealKvSource RealKvSource_ToStruct(py::handle source, ImportScope& scope, const std::string& name) {
  RealKvSource out;
  out.tensor = scope.Import(source.attr("tensor"), name + ".tensor");
  out.page_size = source.attr("page_size").cast<int64_t>();
  out.num_bytes_per_token = source.attr("num_bytes_per_token").cast<int64_t>();
  out.read_bytes = source.attr("read_bytes").cast<int64_t>();
  return out;
}

// SGLang's VerifyOrWriteContext. A context with more than kMaxRealKvSources sources keeps its true
// count, so the op raises V1 / W1 for it; only the first kMaxRealKvSources are imported.
LaunchContext VerifyOrWriteContext_ToStruct(py::handle context, ImportScope& scope,
                                            bool with_chain_assert) {
  LaunchContext out;
  out.canary_buf = ImportAttr(scope, context, "canary_buf", "");
  out.kernel_kind = context.attr("kernel_kind").cast<int64_t>();
  out.violation_ring = ImportAttr(scope, context, "violation_ring", "");
  out.violation_write_index = ImportAttr(scope, context, "violation_write_index", "");
  out.slot_run_counter = ImportAttr(scope, context, "slot_run_counter", "");
  out.kernel_run_counter = ImportAttr(scope, context, "kernel_run_counter", "");
  const py::sequence sources = context.attr("real_kv_sources");
  out.num_real_kv_sources = static_cast<int>(py::len(sources));
  const int imported = std::min(out.num_real_kv_sources, kMaxRealKvSources);
  for (int i = 0; i < imported; ++i) {
    out.real_kv_sources[i] =
        RealKvSource_ToStruct(sources[i], scope, "real_kv_sources[" + std::to_string(i) + "]");
  }
  out.real_kv_hash_mode = context.attr("real_kv_hash_mode").cast<int32_t>();
  if (with_chain_assert) {
    out.enable_chain_position_assert =
        ImportAttr(scope, context, "enable_chain_position_assert", "");
  }
  return out;
}

std::optional<LaunchContext> PairedContext_ToStruct(py::handle paired, ImportScope& scope,
                                                    bool with_chain_assert) {
  if (paired.is_none()) return std::nullopt;
  return VerifyOrWriteContext_ToStruct(paired, scope, with_chain_assert);
}

void TranslateError(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const Error& e) {
    PyObject* type =
        e.category() == Error::Category::kType ? g_type_error_class : PyExc_ValueError;
    PyErr_SetString(type, e.what());
  }
}

}  // namespace

void Error_Register(py::module_& module) {
  if (g_type_error_class == nullptr) {
    py::tuple bases = py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_TypeError));
    g_type_error_class =
        PyErr_NewException("kvcanary._kvcanary.KvCanaryTypeError", bases.ptr(), nullptr);
    if (g_type_error_class == nullptr) throw py::error_already_set();
  }
  module.attr("KvCanaryTypeError") = py::handle(g_type_error_class);
  py::register_local_exception_translator(&TranslateError);
}

void Plan_Launch(py::handle verify_plan_out, py::handle write_plan_out,
                 py::handle req_pool_indices, py::handle prefix_lens, py::handle extend_seq_lens,
                 py::handle req_to_token, int64_t swa_window_size,
                 py::handle full_to_swa_index_mapping, int64_t verify_capacity,
                 py::handle req_to_verify_expected_tokens,
                 py::handle req_to_verify_expected_tokens_valid_lens,
                 int64_t kv_token_id_vs_position_offset, py::handle verify_offsets_scratch,
                 std::optional<int64_t> req_to_token_stride0, StreamInt stream) {
  ImportScope scope;
  PlanArgs args;
  args.verify_plan_out = VerifyPlan_ToView(verify_plan_out, scope, "verify_plan_out.");
  args.write_plan_out = WritePlan_ToView(write_plan_out, scope, "write_plan_out.");
  args.inputs.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.inputs.prefix_lens = scope.Import(prefix_lens, "prefix_lens");
  args.inputs.extend_seq_lens = scope.Import(extend_seq_lens, "extend_seq_lens");
  args.inputs.req_to_token = scope.Import(req_to_token, "req_to_token");
  args.inputs.swa_window_size = swa_window_size;
  args.inputs.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.verify_capacity = verify_capacity;
  args.inputs.req_to_verify_expected_tokens =
      scope.Import(req_to_verify_expected_tokens, "req_to_verify_expected_tokens");
  args.inputs.req_to_verify_expected_tokens_valid_lens = scope.Import(
      req_to_verify_expected_tokens_valid_lens, "req_to_verify_expected_tokens_valid_lens");
  args.inputs.kv_token_id_vs_position_offset = kv_token_id_vs_position_offset;
  args.verify_offsets_scratch = scope.Import(verify_offsets_scratch, "verify_offsets_scratch");
  args.inputs.req_to_token_stride0 = req_to_token_stride0;
  args.inputs.require_contiguous_req_to_token = true;  // SGLang's O1, kept by the Python launchers
  py::gil_scoped_release release;
  Plan(args, StreamOf(stream));
}

void PlanOffsets_Launch(py::handle req_pool_indices, py::handle prefix_lens,
                        py::handle extend_seq_lens, py::handle req_to_token,
                        py::handle full_to_swa_index_mapping, py::handle out_verify_offsets_scratch,
                        py::handle out_write_offsets, py::handle out_write_seed_slot_indices,
                        py::handle out_verify_num_valid, py::handle out_verify_enable,
                        py::handle out_write_num_valid_reqs, int64_t swa_window_size,
                        int64_t verify_capacity, std::optional<int64_t> req_to_token_stride0,
                        std::optional<int64_t> lut_len, StreamInt stream) {
  ImportScope scope;
  PlanOffsetsArgs args;
  args.inputs.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.inputs.prefix_lens = scope.Import(prefix_lens, "prefix_lens");
  args.inputs.extend_seq_lens = scope.Import(extend_seq_lens, "extend_seq_lens");
  args.inputs.req_to_token = scope.Import(req_to_token, "req_to_token");
  args.inputs.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.out_verify_offsets_scratch =
      scope.Import(out_verify_offsets_scratch, "out_verify_offsets_scratch");
  args.out_write_offsets = scope.Import(out_write_offsets, "out_write_offsets");
  args.out_write_seed_slot_indices =
      scope.Import(out_write_seed_slot_indices, "out_write_seed_slot_indices");
  args.out_verify_num_valid = scope.Import(out_verify_num_valid, "out_verify_num_valid");
  args.out_verify_enable = scope.Import(out_verify_enable, "out_verify_enable");
  args.out_write_num_valid_reqs =
      scope.Import(out_write_num_valid_reqs, "out_write_num_valid_reqs");
  args.inputs.swa_window_size = swa_window_size;
  args.verify_capacity = verify_capacity;
  args.inputs.req_to_token_stride0 = req_to_token_stride0;
  args.lut_len = lut_len;
  args.inputs.require_contiguous_req_to_token = true;
  py::gil_scoped_release release;
  PlanOffsets(args, StreamOf(stream));
}

void PlanEntries_Launch(py::handle req_pool_indices, py::handle prefix_lens,
                        py::handle req_to_token, py::handle full_to_swa_index_mapping,
                        py::handle verify_offsets_scratch, py::handle verify_enable,
                        py::handle req_to_verify_expected_tokens,
                        py::handle req_to_verify_expected_tokens_valid_lens,
                        py::handle out_verify_slot_indices, py::handle out_verify_expected_tokens,
                        py::handle out_verify_expected_positions,
                        py::handle out_verify_prev_slot_indices,
                        int64_t kv_token_id_vs_position_offset, int64_t swa_window_size,
                        StreamInt stream) {
  ImportScope scope;
  PlanEntriesArgs args;
  args.inputs.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.inputs.prefix_lens = scope.Import(prefix_lens, "prefix_lens");
  args.inputs.req_to_token = scope.Import(req_to_token, "req_to_token");
  args.inputs.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.verify_offsets_scratch = scope.Import(verify_offsets_scratch, "verify_offsets_scratch");
  args.verify_enable = scope.Import(verify_enable, "verify_enable");
  args.inputs.req_to_verify_expected_tokens =
      scope.Import(req_to_verify_expected_tokens, "req_to_verify_expected_tokens");
  args.inputs.req_to_verify_expected_tokens_valid_lens = scope.Import(
      req_to_verify_expected_tokens_valid_lens, "req_to_verify_expected_tokens_valid_lens");
  args.out_verify_slot_indices = scope.Import(out_verify_slot_indices, "out_verify_slot_indices");
  args.out_verify_expected_tokens =
      scope.Import(out_verify_expected_tokens, "out_verify_expected_tokens");
  args.out_verify_expected_positions =
      scope.Import(out_verify_expected_positions, "out_verify_expected_positions");
  args.out_verify_prev_slot_indices =
      scope.Import(out_verify_prev_slot_indices, "out_verify_prev_slot_indices");
  args.inputs.kv_token_id_vs_position_offset = kv_token_id_vs_position_offset;
  args.inputs.swa_window_size = swa_window_size;
  args.inputs.require_contiguous_req_to_token = true;
  py::gil_scoped_release release;
  PlanEntries(args, StreamOf(stream));
}

void SwaTranslate_Launch(py::handle slot_indices, py::handle full_to_swa_index_mapping,
                         py::handle out_slot_indices, StreamInt stream) {
  ImportScope scope;
  SwaTranslateArgs args;
  args.slot_indices = scope.Import(slot_indices, "slot_indices");
  args.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.out_slot_indices = scope.Import(out_slot_indices, "out_slot_indices");
  py::gil_scoped_release release;
  SwaTranslate(args, StreamOf(stream));
}

void Verify_Launch(py::handle context, py::handle plan, bool check_verify_expected_token,
                   py::handle paired_context, StreamInt stream) {
  ImportScope scope;
  VerifyArgs args;
  args.context = VerifyOrWriteContext_ToStruct(context, scope, /*with_chain_assert=*/false);
  args.plan = VerifyPlan_ToView(plan, scope, "plan.");
  args.check_verify_expected_token = check_verify_expected_token;
  args.paired_context = PairedContext_ToStruct(paired_context, scope, false);
  py::gil_scoped_release release;
  Verify(args, StreamOf(stream));
}

void FusedVerify_Launch(py::handle context, py::handle req_pool_indices, py::handle prefix_lens,
                        py::handle req_to_token, int64_t swa_window_size,
                        py::handle full_to_swa_index_mapping,
                        py::handle req_to_verify_expected_tokens,
                        py::handle req_to_verify_expected_tokens_valid_lens,
                        int64_t kv_token_id_vs_position_offset, py::handle verify_offsets_scratch,
                        py::handle verify_num_valid, py::handle verify_enable,
                        int64_t verify_capacity, bool check_verify_expected_token,
                        py::handle paired_context, std::optional<int64_t> req_to_token_stride0,
                        StreamInt stream) {
  ImportScope scope;
  FusedVerifyArgs args;
  args.context = VerifyOrWriteContext_ToStruct(context, scope, /*with_chain_assert=*/false);
  args.paired_context = PairedContext_ToStruct(paired_context, scope, false);
  args.check_verify_expected_token = check_verify_expected_token;
  args.inputs.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.inputs.prefix_lens = scope.Import(prefix_lens, "prefix_lens");
  args.inputs.req_to_token = scope.Import(req_to_token, "req_to_token");
  args.inputs.req_to_token_stride0 = req_to_token_stride0;
  args.inputs.swa_window_size = swa_window_size;
  args.inputs.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.inputs.req_to_verify_expected_tokens =
      scope.Import(req_to_verify_expected_tokens, "req_to_verify_expected_tokens");
  args.inputs.req_to_verify_expected_tokens_valid_lens = scope.Import(
      req_to_verify_expected_tokens_valid_lens, "req_to_verify_expected_tokens_valid_lens");
  args.inputs.kv_token_id_vs_position_offset = kv_token_id_vs_position_offset;
  args.verify_offsets_scratch = scope.Import(verify_offsets_scratch, "verify_offsets_scratch");
  args.verify_num_valid = scope.Import(verify_num_valid, "verify_num_valid");
  args.verify_enable = scope.Import(verify_enable, "verify_enable");
  args.verify_capacity = verify_capacity;
  py::gil_scoped_release release;
  FusedVerify(args, StreamOf(stream));
}

void Write_Launch(py::handle context, py::handle plan, py::handle input_ids, py::handle positions,
                  py::handle out_cache_loc, bool enable_write_input_assert,
                  py::handle expected_input_tokens, py::handle expected_input_positions,
                  py::handle paired_context, StreamInt stream) {
  ImportScope scope;
  WriteArgs args;
  args.context = VerifyOrWriteContext_ToStruct(context, scope, /*with_chain_assert=*/true);
  args.plan = WritePlan_ToView(plan, scope, "plan.");
  args.input_ids = scope.Import(input_ids, "input_ids");
  args.positions = scope.Import(positions, "positions");
  args.out_cache_loc = scope.Import(out_cache_loc, "out_cache_loc");
  args.enable_write_input_assert = enable_write_input_assert;
  args.expected_input_tokens = scope.Import(expected_input_tokens, "expected_input_tokens");
  args.expected_input_positions =
      scope.Import(expected_input_positions, "expected_input_positions");
  args.paired_context = PairedContext_ToStruct(paired_context, scope, true);
  py::gil_scoped_release release;
  Write(args, StreamOf(stream));
}

void Scatter_Launch(py::handle flat_in, py::handle offsets, py::handle req_pool_indices,
                    py::handle pool_out, StreamInt stream) {
  ImportScope scope;
  ScatterArgs args;
  args.flat_in = scope.Import(flat_in, "flat_in");
  args.offsets = scope.Import(offsets, "offsets");
  args.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.pool_out = scope.Import(pool_out, "pool_out");
  py::gil_scoped_release release;
  Scatter(args, StreamOf(stream));
}

void RealKvSource_Validate(py::handle tensor, int64_t page_size, int64_t num_bytes_per_token,
                           int64_t read_bytes) {
  ImportScope scope;
  MakeRealKvSource(scope.Import(tensor, "RealKvSource.tensor"), page_size, num_bytes_per_token,
                   read_bytes);
}

uint64_t RealKvSource_Hash(py::sequence real_kv_sources, int64_t slot_idx,
                           int32_t real_kv_hash_mode) {
  ImportScope scope;
  std::vector<RealKvSource> sources;
  for (size_t i = 0; i < py::len(real_kv_sources); ++i) {
    sources.push_back(RealKvSource_ToStruct(real_kv_sources[i], scope,
                                            "real_kv_sources[" + std::to_string(i) + "]"));
  }
  py::gil_scoped_release release;
  return RealKvHash(sources.data(), static_cast<int>(sources.size()), real_kv_hash_mode,
                    slot_idx);
}

uint64_t CanaryBuf_SlotHash(py::handle canary_buf, int64_t slot_idx) {
  ImportScope scope;
  TensorView buf = scope.Import(canary_buf, "canary_buf");
  // The int64 view [N, stride / 8] of a canary buffer is the same bytes as uint8 [N, stride].
  if (buf.defined() && buf.dtype() == DType::kInt64 && buf.ndim() == 2 && buf.stride(1) == 1) {
    buf = TensorView(buf.data(), DType::kUInt8, buf.device(), {buf.size(0), buf.size(1) * 8},
                     {buf.stride(0) * 8, 1}, buf.writable());
  }
  return ComputeSlotHash(buf, slot_idx);
}

}  // namespace kvcanary::python
