// The launchers of the binding (plan, plan_offsets, plan_entries, advance_verify_phase,
// swa_translate, verify, fused_verify, write, fused_stage, scatter_req_token_ids, spin_wait). Each
// takes the keyword arguments the Python launcher of the same name forwards (python/kvcanary/),
// imports them into the op's argument struct by name, releases the GIL for the op and returns when
// it returns (CPU: the work is done; CUDA: it is enqueued on `stream`). A keyword not passed reads
// as None.
#pragma once

#include <pybind11/pybind11.h>

namespace kvcanary::python {

void Plan_Launch(const pybind11::kwargs& kwargs);
void PlanOffsets_Launch(const pybind11::kwargs& kwargs);
void PlanEntries_Launch(const pybind11::kwargs& kwargs);
void AdvanceVerifyPhase_Launch(const pybind11::kwargs& kwargs);
void SwaTranslate_Launch(const pybind11::kwargs& kwargs);
void Verify_Launch(const pybind11::kwargs& kwargs);
void FusedVerify_Launch(const pybind11::kwargs& kwargs);
void Write_Launch(const pybind11::kwargs& kwargs);
// A fused stage: `plan`, `verify`, `write` and `advance_phase` are dicts of the keyword arguments
// of the plan, fused_verify, write and advance_verify_phase launchers (plan and advance_phase may
// be None), and `stream` the stage's stream.
void FusedStage_Launch(const pybind11::kwargs& kwargs);
void Scatter_Launch(const pybind11::kwargs& kwargs);
void SpinWait_Launch(const pybind11::kwargs& kwargs);

}  // namespace kvcanary::python
