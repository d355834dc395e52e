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

// One tensor attribute of a context, imported under the attribute's name (the name the op's own
// messages use); `owner` names the object when the attribute is missing.
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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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
