#include "launchers.h"

#include <cstddef>
#include <utility>

#include "conversions.h"
#include "kvcanary/error.h"
#include "scalars.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

// One call's keyword arguments (or a fused stage's part), read by name; a keyword not passed
// reads as None.
class Keywords {
 public:
  explicit Keywords(const py::dict& kwargs) : kwargs_(kwargs) {}

  py::handle operator[](const char* name) const {
    PyObject* value = PyDict_GetItemString(kwargs_.ptr(), name);
    return py::handle(value != nullptr ? value : Py_None);  // borrowed either way
  }
  bool has(const char* name) const { return PyDict_GetItemString(kwargs_.ptr(), name) != nullptr; }
  int64_t Int(const char* name) const { return Int64Arg((*this)[name], name); }
  bool Flag(const char* name) const { return BoolArg((*this)[name], name); }

 private:
  const py::dict& kwargs_;
};

// A tensor keyword and the member of the op's struct it fills.
template <typename Struct>
using TensorField = std::pair<const char*, TensorView Struct::*>;

template <typename Struct, size_t N>
void ImportTensors(const Keywords& kw, ImportScope& scope, Struct& out,
                   const TensorField<Struct> (&fields)[N]) {
  for (const auto& [name, member] : fields) out.*member = scope.Import(kw[name], name);
}

// The PlanInputs every plan-shaped launcher shares; a launcher without one of the keywords
// (plan_entries has no extend_seq_lens) leaves that field at its default.
void PlanInputs_Import(const Keywords& kw, ImportScope& scope, PlanInputs& inputs) {
  static const TensorField<PlanInputs> kTensors[] = {
      {"req_pool_indices", &PlanInputs::req_pool_indices},
      {"prefix_lens", &PlanInputs::prefix_lens},
      {"extend_seq_lens", &PlanInputs::extend_seq_lens},
      {"req_to_token", &PlanInputs::req_to_token},
      {"full_to_swa_index_mapping", &PlanInputs::full_to_swa_index_mapping},
      {"req_to_verify_expected_tokens", &PlanInputs::req_to_verify_expected_tokens},
      {"req_to_verify_expected_tokens_valid_lens",
       &PlanInputs::req_to_verify_expected_tokens_valid_lens},
      {"block_table", &PlanInputs::block_table},
      {"verify_phase", &PlanInputs::verify_phase}};
  ImportTensors(kw, scope, inputs, kTensors);
  inputs.swa_window_size = kw.Int("swa_window_size");
  for (const auto& [name, member] :
       {std::pair{"kv_token_id_vs_position_offset", &PlanInputs::kv_token_id_vs_position_offset},
        std::pair{"block_size", &PlanInputs::block_size},
        std::pair{"verify_sample", &PlanInputs::verify_sample}}) {
    if (kw.has(name)) inputs.*member = kw.Int(name);
  }
  inputs.req_to_token_stride0 =
      OptionalInt64Arg(kw["req_to_token_stride0"], "req_to_token_stride0");
  inputs.require_contiguous_req_to_token = true;  // SGLang's O1, kept by the Python launchers
}

// Runs `op` on `args` on the call's stream, with the GIL released.
template <typename Args>
void Run(void (*op)(const Args&, StreamHandle), const Args& args, const Keywords& kw) {
  const auto stream = reinterpret_cast<StreamHandle>(StreamArg(kw["stream"]));
  py::gil_scoped_release release;
  op(args, stream);
}

PlanArgs Plan_Import(const Keywords& kw, ImportScope& scope) {
  PlanArgs args;
  args.verify_plan_out = VerifyPlan_ToView(kw["verify_plan_out"], scope, "verify_plan_out.");
  args.write_plan_out = WritePlan_ToView(kw["write_plan_out"], scope, "write_plan_out.");
  PlanInputs_Import(kw, scope, args.inputs);
  args.verify_offsets_scratch =
      scope.Import(kw["verify_offsets_scratch"], "verify_offsets_scratch");
  args.verify_capacity = kw.Int("verify_capacity");
  return args;
}

FusedVerifyArgs FusedVerify_Import(const Keywords& kw, ImportScope& scope) {
  static const TensorField<FusedVerifyArgs> kTensors[] = {
      {"verify_offsets_scratch", &FusedVerifyArgs::verify_offsets_scratch},
      {"verify_num_valid", &FusedVerifyArgs::verify_num_valid},
      {"verify_enable", &FusedVerifyArgs::verify_enable}};
  FusedVerifyArgs args;
  args.context = VerifyOrWriteContext_ToStruct(kw["context"], scope, false, "context");
  args.paired_context = PairedContext_ToStruct(kw["paired_context"], scope, false);
  args.check_verify_expected_token = kw.Flag("check_verify_expected_token");
  PlanInputs_Import(kw, scope, args.inputs);
  ImportTensors(kw, scope, args, kTensors);
  args.verify_capacity = kw.Int("verify_capacity");
  if (!kw["stored_entries"].is_none()) {
    args.stored_entries = VerifyPlan_ToView(kw["stored_entries"], scope, "stored_entries.");
  }
  return args;
}

WriteArgs Write_Import(const Keywords& kw, ImportScope& scope) {
  static const TensorField<WriteArgs> kTensors[] = {
      {"input_ids", &WriteArgs::input_ids},
      {"positions", &WriteArgs::positions},
      {"out_cache_loc", &WriteArgs::out_cache_loc},
      {"expected_input_tokens", &WriteArgs::expected_input_tokens},
      {"expected_input_positions", &WriteArgs::expected_input_positions}};
  WriteArgs args;
  args.context = VerifyOrWriteContext_ToStruct(kw["context"], scope, true, "context");
  args.plan = WritePlan_ToView(kw["plan"], scope, "plan.");
  ImportTensors(kw, scope, args, kTensors);
  args.enable_write_input_assert = kw.Flag("enable_write_input_assert");
  args.paired_context = PairedContext_ToStruct(kw["paired_context"], scope, true);
  return args;
}

AdvanceVerifyPhaseArgs AdvanceVerifyPhase_Import(const Keywords& kw, ImportScope& scope) {
  static const TensorField<AdvanceVerifyPhaseArgs> kTensors[] = {
      {"verify_phase", &AdvanceVerifyPhaseArgs::verify_phase},
      {"req_pool_indices", &AdvanceVerifyPhaseArgs::req_pool_indices}};
  AdvanceVerifyPhaseArgs args;
  ImportTensors(kw, scope, args, kTensors);
  return args;
}

// A fused stage's part: a dict of its launcher's keyword arguments (the Python launcher fills its
// defaults and refuses unknown names), imported by that launcher's import; a message names the
// part.
template <typename Args>
Args StagePart_Import(const Keywords& kw, const char* part, ImportScope& scope,
                      Args (*import)(const Keywords&, ImportScope&)) {
  const py::handle value = kw[part];
  if (!py::isinstance<py::dict>(value)) {
    ThrowTypeError("kv-canary: fused_stage ", part, " must be a dict of keyword arguments, got ",
                   TypeName(value));
  }
  Args args;
  CheckInContext(std::string("fused_stage ") + part,
                 [&] { args = import(Keywords(py::reinterpret_borrow<py::dict>(value)), scope); });
  return args;
}

}  // namespace

void Plan_Launch(const py::kwargs& kwargs) {
  const Keywords kw(kwargs);
  ImportScope scope;
  Run(&Plan, Plan_Import(kw, scope), kw);
}

void PlanOffsets_Launch(const py::kwargs& kwargs) {
  static const TensorField<PlanOffsetsArgs> kOutputs[] = {
      {"out_verify_offsets_scratch", &PlanOffsetsArgs::out_verify_offsets_scratch},
      {"out_write_offsets", &PlanOffsetsArgs::out_write_offsets},
      {"out_write_seed_slot_indices", &PlanOffsetsArgs::out_write_seed_slot_indices},
      {"out_verify_num_valid", &PlanOffsetsArgs::out_verify_num_valid},
      {"out_verify_enable", &PlanOffsetsArgs::out_verify_enable},
      {"out_write_num_valid_reqs", &PlanOffsetsArgs::out_write_num_valid_reqs}};
  const Keywords kw(kwargs);
  ImportScope scope;
  PlanOffsetsArgs args;
  PlanInputs_Import(kw, scope, args.inputs);
  ImportTensors(kw, scope, args, kOutputs);
  args.verify_capacity = kw.Int("verify_capacity");
  args.lut_len = OptionalInt64Arg(kw["lut_len"], "lut_len");
  Run(&PlanOffsets, args, kw);
}

void PlanEntries_Launch(const py::kwargs& kwargs) {
  static const TensorField<PlanEntriesArgs> kTensors[] = {
      {"verify_offsets_scratch", &PlanEntriesArgs::verify_offsets_scratch},
      {"verify_enable", &PlanEntriesArgs::verify_enable},
      {"out_verify_slot_indices", &PlanEntriesArgs::out_verify_slot_indices},
      {"out_verify_expected_tokens", &PlanEntriesArgs::out_verify_expected_tokens},
      {"out_verify_expected_positions", &PlanEntriesArgs::out_verify_expected_positions},
      {"out_verify_prev_slot_indices", &PlanEntriesArgs::out_verify_prev_slot_indices}};
  const Keywords kw(kwargs);
  ImportScope scope;
  PlanEntriesArgs args;
  PlanInputs_Import(kw, scope, args.inputs);
  ImportTensors(kw, scope, args, kTensors);
  Run(&PlanEntries, args, kw);
}

void AdvanceVerifyPhase_Launch(const py::kwargs& kwargs) {
  const Keywords kw(kwargs);
  ImportScope scope;
  Run(&AdvanceVerifyPhase, AdvanceVerifyPhase_Import(kw, scope), kw);
}

void SwaTranslate_Launch(const py::kwargs& kwargs) {
  static const TensorField<SwaTranslateArgs> kTensors[] = {
      {"slot_indices", &SwaTranslateArgs::slot_indices},
      {"full_to_swa_index_mapping", &SwaTranslateArgs::full_to_swa_index_mapping},
      {"out_slot_indices", &SwaTranslateArgs::out_slot_indices}};
  const Keywords kw(kwargs);
  ImportScope scope;
  SwaTranslateArgs args;
  ImportTensors(kw, scope, args, kTensors);
  Run(&SwaTranslate, args, kw);
}

void Verify_Launch(const py::kwargs& kwargs) {
  const Keywords kw(kwargs);
  ImportScope scope;
  VerifyArgs args;
  args.context = VerifyOrWriteContext_ToStruct(kw["context"], scope, false, "context");
  args.plan = VerifyPlan_ToView(kw["plan"], scope, "plan.");
  args.check_verify_expected_token = kw.Flag("check_verify_expected_token");
  args.paired_context = PairedContext_ToStruct(kw["paired_context"], scope, false);
  Run(&Verify, args, kw);
}

void FusedVerify_Launch(const py::kwargs& kwargs) {
  const Keywords kw(kwargs);
  ImportScope scope;
  Run(&FusedVerify, FusedVerify_Import(kw, scope), kw);
}

void Write_Launch(const py::kwargs& kwargs) {
  const Keywords kw(kwargs);
  ImportScope scope;
  Run(&Write, Write_Import(kw, scope), kw);
}

void FusedStage_Launch(const py::kwargs& kwargs) {
  const Keywords kw(kwargs);
  ImportScope scope;
  FusedStageArgs args;
  if (!kw["plan"].is_none()) args.plan = StagePart_Import(kw, "plan", scope, Plan_Import);
  args.verify = StagePart_Import(kw, "verify", scope, FusedVerify_Import);
  args.write = StagePart_Import(kw, "write", scope, Write_Import);
  if (!kw["advance_phase"].is_none()) {
    args.advance_phase = StagePart_Import(kw, "advance_phase", scope, AdvanceVerifyPhase_Import);
  }
  Run(&FusedStage, args, kw);
}

void Scatter_Launch(const py::kwargs& kwargs) {
  static const TensorField<ScatterArgs> kTensors[] = {
      {"flat_in", &ScatterArgs::flat_in},
      {"offsets", &ScatterArgs::offsets},
      {"req_pool_indices", &ScatterArgs::req_pool_indices},
      {"pool_out", &ScatterArgs::pool_out}};
  const Keywords kw(kwargs);
  ImportScope scope;
  ScatterArgs args;
  ImportTensors(kw, scope, args, kTensors);
  Run(&Scatter, args, kw);
}

void SpinWait_Launch(const py::kwargs& kwargs) {
  static const TensorField<SpinWaitArgs> kTensors[] = {{"cycles", &SpinWaitArgs::cycles}};
  const Keywords kw(kwargs);
  ImportScope scope;
  SpinWaitArgs args;
  ImportTensors(kw, scope, args, kTensors);
  Run(&SpinWait, args, kw);
}

}  // namespace kvcanary::python
