// The conversions behind binding.cpp and launchers.cpp: free functions named <Type>_<Method> that
// turn SGLang's dataclasses (plans, contexts, RealKvSource) into the C++ argument structs of
// include/kvcanary/*.h, plus the host-side helpers. They hold no kvcanary logic: validation,
// messages and semantics are the ops' own.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlpack_import.h"
#include "kvcanary/kvcanary.h"

namespace kvcanary::python {

// kvcanary::Error -> ValueError, or KvCanaryTypeError (a ValueError and a TypeError) for the kType
// category. Adds KvCanaryTypeError to `module`.
void Error_Register(pybind11::module_& module);

// A plan object's tensors, each imported under `prefix + field` ("plan.", "verify_plan_out.");
// any object with SGLang's field names works.
VerifyPlanView VerifyPlan_ToView(pybind11::handle plan, ImportScope& scope,
                                 const std::string& prefix);
WritePlanView WritePlan_ToView(pybind11::handle plan, ImportScope& scope,
                               const std::string& prefix);

// SGLang's VerifyOrWriteContext (read by attribute name), passed as `owner` ("context");
// `with_chain_assert` imports enable_chain_position_assert (the write op's).
LaunchContext VerifyOrWriteContext_ToStruct(pybind11::handle context, ImportScope& scope,
                                            bool with_chain_assert, std::string_view owner);
// paired_context: None, or a context as above.
std::optional<LaunchContext> PairedContext_ToStruct(pybind11::handle paired, ImportScope& scope,
                                                    bool with_chain_assert);

// RealKvSource construction checks the source's page size, widths, rank, row stride and
// alignment; throws the first failure.
void RealKvSource_Validate(pybind11::handle tensor, pybind11::handle page_size,
                           pybind11::handle num_bytes_per_token, pybind11::handle read_bytes);

// real_kv_hash(real_kv_sources, slot_idx, real_kv_hash_mode), read now (CPU only).
uint64_t RealKvSource_Hash(pybind11::handle real_kv_sources, pybind11::handle slot_idx,
                           pybind11::handle real_kv_hash_mode);

// compute_slot_hash(canary_buf, slot_idx) (CPU only); canary_buf is uint8 [N, stride]
// or its int64 view [N, stride / 8].
uint64_t CanaryBuf_SlotHash(pybind11::handle canary_buf, pybind11::handle slot_idx);

}  // namespace kvcanary::python
