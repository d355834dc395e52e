// The _kvcanary extension module: every def of the Python binding, as one table. The Python
// package (python/kvcanary/) wraps these with SGLang's signatures, docstrings and stream choice;
// launchers.cpp and conversions.cpp turn arguments into the C++ structs. Nothing here decides
// anything.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "conversions.h"
#include "kvcanary/kvcanary.h"
#include "launchers.h"
#include "runtime_canary.h"
#include "scalars.h"

namespace py = pybind11;
using namespace kvcanary;
using namespace kvcanary::python;

PYBIND11_MODULE(_kvcanary, m) {
  m.doc() = "kvcanary's C++ ops over DLPack tensors; use the kvcanary package, not this module.";
  m.attr("__version__") = KVCANARY_VERSION_STRING;  // include/kvcanary/version.h
  Error_Register(m);

  // Constants and enumeration values, from include/kvcanary/format.h.
  m.attr("CANARY_CHAIN_ANCHOR") = py::int_(kCanaryChainAnchor);
  m.attr("REQ_POOL_IDX_PADDING") = kReqPoolIdxPadding;
  m.attr("TOKEN_TO_KV_SLOT_PADDING") = kTokenToKvSlotPadding;
  m.attr("CANARY_FIELDS_PER_SLOT") = kCanaryFieldsPerSlot;
  m.attr("CANARY_FIELD_TOKEN") = kCanaryFieldToken;
  m.attr("CANARY_FIELD_POSITION") = kCanaryFieldPosition;
  m.attr("CANARY_FIELD_PREV_HASH") = kCanaryFieldPrevHash;
  m.attr("CANARY_FIELD_REAL_KV_HASH") = kCanaryFieldRealKvHash;
  m.attr("CANARY_SLOT_BYTES") = kCanarySlotBytes;
  m.attr("VIOLATION_FIELDS") = kViolationFields;
  m.attr("VIOLATION_FIELD_KERNEL_KIND") = kViolationFieldKernelKind;
  m.attr("VIOLATION_FIELD_SLOT_IDX") = kViolationFieldSlotIdx;
  m.attr("VIOLATION_FIELD_POSITION") = kViolationFieldPosition;
  m.attr("VIOLATION_FIELD_STORED_TOKEN") = kViolationFieldStoredToken;
  m.attr("VIOLATION_FIELD_EXPECTED_TOKEN") = kViolationFieldExpectedToken;
  m.attr("VIOLATION_FIELD_STORED_CHAIN_HASH") = kViolationFieldStoredChainHash;
  m.attr("VIOLATION_FIELD_EXPECTED_AUX") = kViolationFieldExpectedAux;
  m.attr("VIOLATION_FIELD_FAIL_REASON_BITS") = kViolationFieldFailReasonBits;
  m.attr("MAX_REAL_KV_SOURCES") = kMaxRealKvSources;
  m.attr("REAL_KV_SOURCE_FIELDS_PER_ENTRY") = kRealKvSourceFieldsPerEntry;
  m.attr("REAL_KV_SOURCE_FIELD_PAGE_SIZE") = kRealKvSourceFieldPageSize;
  m.attr("REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN") = kRealKvSourceFieldNumBytesPerToken;
  m.attr("REAL_KV_SOURCE_FIELD_READ_BYTES") = kRealKvSourceFieldReadBytes;
  m.attr("PLAN_BS_BLOCK_SIZE") = kPlanBsBlockSize;
  m.attr("SPLITMIX64_MULTIPLIER_1") = py::int_(kSplitmix64Multiplier1);
  m.attr("SPLITMIX64_MULTIPLIER_2") = py::int_(kSplitmix64Multiplier2);
  m.attr("VERIFY_CHAIN_HASH_MISMATCH") = FailReason::kVerifyChainHashMismatch;
  m.attr("VERIFY_POSITION_MISMATCH") = FailReason::kVerifyPositionMismatch;
  m.attr("VERIFY_REAL_KV_HASH_MISMATCH") = FailReason::kVerifyRealKvHashMismatch;
  m.attr("WRITE_TOKEN_MISMATCH") = FailReason::kWriteTokenMismatch;
  m.attr("WRITE_POSITION_MISMATCH") = FailReason::kWritePositionMismatch;
  m.attr("VERIFY_TOKEN_MISMATCH") = FailReason::kVerifyTokenMismatch;
  m.attr("REAL_KV_HASH_MODE_NONE") = static_cast<int32_t>(RealKvHashMode::kNone);
  m.attr("REAL_KV_HASH_MODE_PARTIAL") = static_cast<int32_t>(RealKvHashMode::kPartial);
  m.attr("REAL_KV_HASH_MODE_ALL") = static_cast<int32_t>(RealKvHashMode::kAll);
  m.attr("NUM_LAUNCH_TAGS") = kNumLaunchTags;
  m.attr("HAVE_CUDA") =
#if defined(KVC_HAVE_CUDA)
      true;
#else
      false;
#endif

  // Names (None outside the known set) and hashes, on unsigned 64-bit values.
  m.def("launch_tag_name", &LaunchTagName, py::arg("tag"));
  m.def("fail_reason_label", &FailReasonLabel, py::arg("bit"));
  // Hash inputs are ints in [-2**63, 2**64), negative ones read as two's complement.
  m.def(
      "splitmix64", [](py::handle x) { return Splitmix64(U64Arg(x, "x")); }, py::arg("x"));
  m.def(
      "splitmix64_mix3",
      [](py::handle a, py::handle b, py::handle c) {
        return Splitmix64Mix3(U64Arg(a, "a"), U64Arg(b, "b"), U64Arg(c, "c"));
      },
      py::arg("a"), py::arg("b"), py::arg("c"));
  m.def(
      "to_signed_int64", [](py::handle x) { return ToSigned(U64Arg(x, "x")); }, py::arg("x"));
  m.def("compute_slot_hash", &CanaryBuf_SlotHash, py::arg("canary_buf"), py::arg("slot_idx"));
  m.def("real_kv_hash", &RealKvSource_Hash, py::arg("real_kv_sources"), py::arg("slot_idx"),
        py::arg("real_kv_hash_mode"));
  m.def("validate_real_kv_source", &RealKvSource_Validate, py::arg("tensor"), py::arg("page_size"),
        py::arg("num_bytes_per_token"), py::arg("read_bytes"));

  // Plan sizes (V11, V12, W13, W14).
  m.def(
      "verify_plan_allocation_bytes",
      [](py::handle n) { return VerifyPlanAllocationBytes(Int64Arg(n, "verify_capacity")); },
      py::arg("verify_capacity"));
  m.def(
      "write_plan_allocation_bytes",
      [](py::handle n) { return WritePlanAllocationBytes(Int64Arg(n, "write_req_capacity")); },
      py::arg("write_req_capacity"));

  // The ops, keyword-only: each takes exactly what its Python launcher forwards (launchers.h).
  m.def("plan", &Plan_Launch);
  m.def("plan_offsets", &PlanOffsets_Launch);
  m.def("plan_entries", &PlanEntries_Launch);
  m.def("advance_verify_phase", &AdvanceVerifyPhase_Launch);
  m.def("swa_translate", &SwaTranslate_Launch);
  m.def("verify", &Verify_Launch);
  m.def("fused_verify", &FusedVerify_Launch);
  m.def("write", &Write_Launch);
  m.def("fused_stage", &FusedStage_Launch);
  m.def("scatter_req_token_ids", &Scatter_Launch);
  m.def("spin_wait", &SpinWait_Launch);

  // The host runtime (kvcanary.runtime): runtime_binding.cpp.
  Runtime_Register(m);
}
