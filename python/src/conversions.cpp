#include "conversions.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "dlpack_import.h"
#include "kvcanary/kvcanary.h"
#include "scalars.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

// The class a kType kvcanary::Error becomes; created once by Error_Register and never freed (it
// must outlive every module that may raise it).
PyObject* g_type_error_class = nullptr;

StreamHandle StreamOf(py::handle stream) {
  return reinterpret_cast<StreamHandle>(StreamArg(stream));
}

// One attribute of a plan or context object, imported under `prefix + attribute` (the name the
// op's own messages use).
TensorView ImportAttr(ImportScope& scope, py::handle object, const char* attribute,
                      std::string_view owner) {
  return scope.Import(AttrOf(object, attribute, owner), attribute);
}

// Imports each listed attribute of `object` into the matching member of `view`.
template <typename View, size_t N>
View PlanView_Import(py::handle object, ImportScope& scope, const std::string& prefix,
                     const std::pair<TensorView View::*, const char*> (&fields)[N]) {
  View view;
  const std::string owner = prefix.substr(0, prefix.size() - 1);  // "plan." -> "plan"
  for (const auto& [member, attribute] : fields) {
    view.*member = scope.Import(AttrOf(object, attribute, owner), prefix + attribute);
  }
  return view;
}

VerifyPlanView VerifyPlan_ToView(py::handle plan, ImportScope& scope, const std::string& prefix) {
  static const std::pair<TensorView VerifyPlanView::*, const char*> kFields[] = {
      {&VerifyPlanView::verify_slot_indices, "verify_slot_indices"},
      {&VerifyPlanView::verify_expected_tokens, "verify_expected_tokens"},
      {&VerifyPlanView::verify_expected_positions, "verify_expected_positions"},
      {&VerifyPlanView::verify_prev_slot_indices, "verify_prev_slot_indices"},
      {&VerifyPlanView::verify_num_valid, "verify_num_valid"},
      {&VerifyPlanView::enable, "enable"}};
  return PlanView_Import(plan, scope, prefix, kFields);
}

WritePlanView WritePlan_ToView(py::handle plan, ImportScope& scope, const std::string& prefix) {
  static const std::pair<TensorView WritePlanView::*, const char*> kFields[] = {
      {&WritePlanView::write_offsets, "write_offsets"},
      {&WritePlanView::write_seed_slot_indices, "write_seed_slot_indices"},
      {&WritePlanView::write_num_valid_reqs, "write_num_valid_reqs"}};
  return PlanView_Import(plan, scope, prefix, kFields);
}

RealKvSource RealKvSource_ToStruct(py::handle source, ImportScope& scope, const std::string& name) {
  RealKvSource out;
  out.tensor = scope.Import(AttrOf(source, "tensor", name), name + ".tensor");
  out.page_size = Int64Arg(AttrOf(source, "page_size", name), name + ".page_size");
  out.num_bytes_per_token =
      Int64Arg(AttrOf(source, "num_bytes_per_token", name), name + ".num_bytes_per_token");
  out.read_bytes = Int64Arg(AttrOf(source, "read_bytes", name), name + ".read_bytes");
  return out;
}

// real_kv_sources: a tuple or list (any other sequence, a str say, is refused).
py::sequence Sources_Check(py::handle sources) {
  if (!PyTuple_Check(sources.ptr()) && !PyList_Check(sources.ptr())) {
    ThrowTypeError("kv-canary: real_kv_sources must be a tuple of RealKvSource, got ",
                   TypeName(sources));
  }
  return py::reinterpret_borrow<py::sequence>(sources);
}

// The first `count` entries of `sources` into `out`, each named real_kv_sources[i].
void Sources_Import(const py::sequence& sources, ImportScope& scope, RealKvSource* out, int count) {
  for (int i = 0; i < count; ++i) {
    out[i] = RealKvSource_ToStruct(sources[i], scope, "real_kv_sources[" + std::to_string(i) + "]");
  }
}

// SGLang's VerifyOrWriteContext, passed as `owner` (context or paired_context). A context with
// more than kMaxRealKvSources sources keeps its true count, so the op raises V1 / W1 for it; only
// the first kMaxRealKvSources are imported.
LaunchContext VerifyOrWriteContext_ToStruct(py::handle context, ImportScope& scope,
                                            bool with_chain_assert, std::string_view owner) {
  LaunchContext out;
  out.canary_buf = ImportAttr(scope, context, "canary_buf", owner);
  out.kernel_kind = Int64Arg(AttrOf(context, "kernel_kind", owner), "kernel_kind");
  out.violation_ring = ImportAttr(scope, context, "violation_ring", owner);
  out.violation_write_index = ImportAttr(scope, context, "violation_write_index", owner);
  out.slot_run_counter = ImportAttr(scope, context, "slot_run_counter", owner);
  out.kernel_run_counter = ImportAttr(scope, context, "kernel_run_counter", owner);
  const py::sequence sources = Sources_Check(AttrOf(context, "real_kv_sources", owner));
  out.num_real_kv_sources = static_cast<int>(py::len(sources));
  Sources_Import(sources, scope, out.real_kv_sources.data(),
                 std::min(out.num_real_kv_sources, kMaxRealKvSources));
  out.real_kv_hash_mode =
      Int32Arg(AttrOf(context, "real_kv_hash_mode", owner), "real_kv_hash_mode");
  if (with_chain_assert) {
    out.enable_chain_position_assert =
        ImportAttr(scope, context, "enable_chain_position_assert", owner);
  }
  return out;
}

std::optional<LaunchContext> PairedContext_ToStruct(py::handle paired, ImportScope& scope,
                                                    bool with_chain_assert) {
  if (paired.is_none()) return std::nullopt;
  return VerifyOrWriteContext_ToStruct(paired, scope, with_chain_assert, "paired_context");
}

void TranslateError(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const Error& e) {
    PyObject* type = e.category() == Error::Category::kType ? g_type_error_class : PyExc_ValueError;
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

void Plan_Launch(py::handle verify_plan_out, py::handle write_plan_out, py::handle req_pool_indices,
                 py::handle prefix_lens, py::handle extend_seq_lens, py::handle req_to_token,
                 py::handle swa_window_size, py::handle full_to_swa_index_mapping,
                 py::handle verify_capacity, py::handle req_to_verify_expected_tokens,
                 py::handle req_to_verify_expected_tokens_valid_lens,
                 py::handle kv_token_id_vs_position_offset, py::handle verify_offsets_scratch,
                 py::handle req_to_token_stride0, py::handle stream) {
  ImportScope scope;
  PlanArgs args;
  args.verify_plan_out = VerifyPlan_ToView(verify_plan_out, scope, "verify_plan_out.");
  args.write_plan_out = WritePlan_ToView(write_plan_out, scope, "write_plan_out.");
  args.inputs.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.inputs.prefix_lens = scope.Import(prefix_lens, "prefix_lens");
  args.inputs.extend_seq_lens = scope.Import(extend_seq_lens, "extend_seq_lens");
  args.inputs.req_to_token = scope.Import(req_to_token, "req_to_token");
  args.inputs.swa_window_size = Int64Arg(swa_window_size, "swa_window_size");
  args.inputs.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.verify_capacity = Int64Arg(verify_capacity, "verify_capacity");
  args.inputs.req_to_verify_expected_tokens =
      scope.Import(req_to_verify_expected_tokens, "req_to_verify_expected_tokens");
  args.inputs.req_to_verify_expected_tokens_valid_lens = scope.Import(
      req_to_verify_expected_tokens_valid_lens, "req_to_verify_expected_tokens_valid_lens");
  args.inputs.kv_token_id_vs_position_offset =
      Int64Arg(kv_token_id_vs_position_offset, "kv_token_id_vs_position_offset");
  args.verify_offsets_scratch = scope.Import(verify_offsets_scratch, "verify_offsets_scratch");
  args.inputs.req_to_token_stride0 = OptionalInt64Arg(req_to_token_stride0, "req_to_token_stride0");
  args.inputs.require_contiguous_req_to_token = true;  // SGLang's O1, kept by the Python launchers
  const StreamHandle on_stream = StreamOf(stream);     // reads Python objects: before the release
  py::gil_scoped_release release;
  Plan(args, on_stream);
}

void PlanOffsets_Launch(py::handle req_pool_indices, py::handle prefix_lens,
                        py::handle extend_seq_lens, py::handle req_to_token,
                        py::handle full_to_swa_index_mapping, py::handle out_verify_offsets_scratch,
                        py::handle out_write_offsets, py::handle out_write_seed_slot_indices,
                        py::handle out_verify_num_valid, py::handle out_verify_enable,
                        py::handle out_write_num_valid_reqs, py::handle swa_window_size,
                        py::handle verify_capacity, py::handle req_to_token_stride0,
                        py::handle lut_len, py::handle stream) {
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
  args.inputs.swa_window_size = Int64Arg(swa_window_size, "swa_window_size");
  args.verify_capacity = Int64Arg(verify_capacity, "verify_capacity");
  args.inputs.req_to_token_stride0 = OptionalInt64Arg(req_to_token_stride0, "req_to_token_stride0");
  args.lut_len = OptionalInt64Arg(lut_len, "lut_len");
  args.inputs.require_contiguous_req_to_token = true;
  const StreamHandle on_stream = StreamOf(stream);  // reads Python objects: before the release
  py::gil_scoped_release release;
  PlanOffsets(args, on_stream);
}

void PlanEntries_Launch(py::handle req_pool_indices, py::handle prefix_lens,
                        py::handle req_to_token, py::handle full_to_swa_index_mapping,
                        py::handle verify_offsets_scratch, py::handle verify_enable,
                        py::handle req_to_verify_expected_tokens,
                        py::handle req_to_verify_expected_tokens_valid_lens,
                        py::handle out_verify_slot_indices, py::handle out_verify_expected_tokens,
                        py::handle out_verify_expected_positions,
                        py::handle out_verify_prev_slot_indices,
                        py::handle kv_token_id_vs_position_offset, py::handle swa_window_size,
                        py::handle stream) {
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
  args.inputs.kv_token_id_vs_position_offset =
      Int64Arg(kv_token_id_vs_position_offset, "kv_token_id_vs_position_offset");
  args.inputs.swa_window_size = Int64Arg(swa_window_size, "swa_window_size");
  args.inputs.require_contiguous_req_to_token = true;
  const StreamHandle on_stream = StreamOf(stream);  // reads Python objects: before the release
  py::gil_scoped_release release;
  PlanEntries(args, on_stream);
}

void SwaTranslate_Launch(py::handle slot_indices, py::handle full_to_swa_index_mapping,
                         py::handle out_slot_indices, py::handle stream) {
  ImportScope scope;
  SwaTranslateArgs args;
  args.slot_indices = scope.Import(slot_indices, "slot_indices");
  args.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.out_slot_indices = scope.Import(out_slot_indices, "out_slot_indices");
  const StreamHandle on_stream = StreamOf(stream);  // reads Python objects: before the release
  py::gil_scoped_release release;
  SwaTranslate(args, on_stream);
}

void Verify_Launch(py::handle context, py::handle plan, py::handle check_verify_expected_token,
                   py::handle paired_context, py::handle stream) {
  ImportScope scope;
  VerifyArgs args;
  args.context =
      VerifyOrWriteContext_ToStruct(context, scope, /*with_chain_assert=*/false, "context");
  args.plan = VerifyPlan_ToView(plan, scope, "plan.");
  args.check_verify_expected_token =
      BoolArg(check_verify_expected_token, "check_verify_expected_token");
  args.paired_context = PairedContext_ToStruct(paired_context, scope, false);
  const StreamHandle on_stream = StreamOf(stream);  // reads Python objects: before the release
  py::gil_scoped_release release;
  Verify(args, on_stream);
}

void FusedVerify_Launch(py::handle context, py::handle req_pool_indices, py::handle prefix_lens,
                        py::handle req_to_token, py::handle swa_window_size,
                        py::handle full_to_swa_index_mapping,
                        py::handle req_to_verify_expected_tokens,
                        py::handle req_to_verify_expected_tokens_valid_lens,
                        py::handle kv_token_id_vs_position_offset,
                        py::handle verify_offsets_scratch, py::handle verify_num_valid,
                        py::handle verify_enable, py::handle verify_capacity,
                        py::handle check_verify_expected_token, py::handle paired_context,
                        py::handle req_to_token_stride0, py::handle stream) {
  ImportScope scope;
  FusedVerifyArgs args;
  args.context =
      VerifyOrWriteContext_ToStruct(context, scope, /*with_chain_assert=*/false, "context");
  args.paired_context = PairedContext_ToStruct(paired_context, scope, false);
  args.check_verify_expected_token =
      BoolArg(check_verify_expected_token, "check_verify_expected_token");
  args.inputs.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.inputs.prefix_lens = scope.Import(prefix_lens, "prefix_lens");
  args.inputs.req_to_token = scope.Import(req_to_token, "req_to_token");
  args.inputs.req_to_token_stride0 = OptionalInt64Arg(req_to_token_stride0, "req_to_token_stride0");
  args.inputs.swa_window_size = Int64Arg(swa_window_size, "swa_window_size");
  args.inputs.full_to_swa_index_mapping =
      scope.Import(full_to_swa_index_mapping, "full_to_swa_index_mapping");
  args.inputs.req_to_verify_expected_tokens =
      scope.Import(req_to_verify_expected_tokens, "req_to_verify_expected_tokens");
  args.inputs.req_to_verify_expected_tokens_valid_lens = scope.Import(
      req_to_verify_expected_tokens_valid_lens, "req_to_verify_expected_tokens_valid_lens");
  args.inputs.kv_token_id_vs_position_offset =
      Int64Arg(kv_token_id_vs_position_offset, "kv_token_id_vs_position_offset");
  args.verify_offsets_scratch = scope.Import(verify_offsets_scratch, "verify_offsets_scratch");
  args.verify_num_valid = scope.Import(verify_num_valid, "verify_num_valid");
  args.verify_enable = scope.Import(verify_enable, "verify_enable");
  args.verify_capacity = Int64Arg(verify_capacity, "verify_capacity");
  const StreamHandle on_stream = StreamOf(stream);  // reads Python objects: before the release
  py::gil_scoped_release release;
  FusedVerify(args, on_stream);
}

void Write_Launch(py::handle context, py::handle plan, py::handle input_ids, py::handle positions,
                  py::handle out_cache_loc, py::handle enable_write_input_assert,
                  py::handle expected_input_tokens, py::handle expected_input_positions,
                  py::handle paired_context, py::handle stream) {
  ImportScope scope;
  WriteArgs args;
  args.context =
      VerifyOrWriteContext_ToStruct(context, scope, /*with_chain_assert=*/true, "context");
  args.plan = WritePlan_ToView(plan, scope, "plan.");
  args.input_ids = scope.Import(input_ids, "input_ids");
  args.positions = scope.Import(positions, "positions");
  args.out_cache_loc = scope.Import(out_cache_loc, "out_cache_loc");
  args.enable_write_input_assert = BoolArg(enable_write_input_assert, "enable_write_input_assert");
  args.expected_input_tokens = scope.Import(expected_input_tokens, "expected_input_tokens");
  args.expected_input_positions =
      scope.Import(expected_input_positions, "expected_input_positions");
  args.paired_context = PairedContext_ToStruct(paired_context, scope, true);
  const StreamHandle on_stream = StreamOf(stream);  // reads Python objects: before the release
  py::gil_scoped_release release;
  Write(args, on_stream);
}

void Scatter_Launch(py::handle flat_in, py::handle offsets, py::handle req_pool_indices,
                    py::handle pool_out, py::handle stream) {
  ImportScope scope;
  ScatterArgs args;
  args.flat_in = scope.Import(flat_in, "flat_in");
  args.offsets = scope.Import(offsets, "offsets");
  args.req_pool_indices = scope.Import(req_pool_indices, "req_pool_indices");
  args.pool_out = scope.Import(pool_out, "pool_out");
  const StreamHandle on_stream = StreamOf(stream);  // reads Python objects: before the release
  py::gil_scoped_release release;
  Scatter(args, on_stream);
}

void RealKvSource_Validate(py::handle tensor, py::handle page_size, py::handle num_bytes_per_token,
                           py::handle read_bytes) {
  ImportScope scope;
  MakeRealKvSource(scope.Import(tensor, "RealKvSource.tensor"),
                   Int64Arg(page_size, "RealKvSource.page_size"),
                   Int64Arg(num_bytes_per_token, "RealKvSource.num_bytes_per_token"),
                   Int64Arg(read_bytes, "RealKvSource.read_bytes"));
}

uint64_t RealKvSource_Hash(py::handle real_kv_sources, py::handle slot_idx,
                           py::handle real_kv_hash_mode) {
  ImportScope scope;
  const py::sequence given = Sources_Check(real_kv_sources);
  std::vector<RealKvSource> sources(py::len(given));
  Sources_Import(given, scope, sources.data(), static_cast<int>(sources.size()));
  const int32_t mode = Int32Arg(real_kv_hash_mode, "real_kv_hash_mode");
  const int64_t slot = Int64Arg(slot_idx, "slot_idx");
  py::gil_scoped_release release;
  return RealKvHash(sources.data(), static_cast<int>(sources.size()), mode, slot);
}

uint64_t CanaryBuf_SlotHash(py::handle canary_buf, py::handle slot_idx) {
  ImportScope scope;
  TensorView buf = scope.Import(canary_buf, "canary_buf");
  // The int64 view [N, stride / 8] of a canary buffer is the same bytes as uint8 [N, stride].
  if (buf.defined() && buf.dtype() == DType::kInt64 && buf.ndim() == 2 && buf.stride(1) == 1) {
    buf = TensorView(buf.data(), DType::kUInt8, buf.device(), {buf.size(0), buf.size(1) * 8},
                     {buf.stride(0) * 8, 1}, buf.writable());
  }
  return ComputeSlotHash(buf, Int64Arg(slot_idx, "slot_idx"));
}

}  // namespace kvcanary::python
