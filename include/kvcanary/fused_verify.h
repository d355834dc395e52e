// The fused verify (a kvcanary addition, not an SGLang op): the plan-entries stage and verify in
// one pass. Each entry is derived in the kernel from the plan inputs and the stage-1 offsets, so
// no per-entry plan array (32 bytes per prefix token) is written or read, and an engine's per-step
// workspace does not grow with its pool or its batch.
//
// Semantics: exactly PlanEntries (into arrays of capacity C = verify_capacity) followed by Verify
// over them, given the stage-1 outputs of a Plan (offsets-only or full) or PlanOffsets of the
// same inputs:
//   kernel_run_counter += 1                      (always, before the enable check)
//   if verify_enable[0] == 0: return
//   n = clamp(verify_num_valid[0], 0, C), 0 when bs == 0; slot_run_counter += n
//   for e in [0, n):
//     r = the largest batch row with verify_offsets_scratch[r] <= e
//     position = window start of row r + e - verify_offsets_scratch[r]
//       (with inputs.verify_sample K > 1: the (e - verify_offsets_scratch[r])-th sampled position
//       of row r, PlanInputs; the phase is read from inputs.verify_phase as stage 1 read it)
//     the entry (slot, predecessor, position, expected token) the plan would store for
//     (r, position), checked as Verify checks a plan entry
// With stored_entries (entry arrays of capacity S, as PlanEntries writes them; their counts are not
// read): when n <= S, entry e is read from them as Verify reads a plan's, not derived. They
// must then hold stage 2's entries for these inputs (FusedStage's HEAD, given them, stores
// them): a step whose entries are costly to derive (sampled, or through a block table) derives
// them once for its HEAD and TAIL verifies, and a step with more entries than S still derives
// them, so no step overflows.
// verify_num_valid and the scratch must be what stage 1 wrote for these inputs (a count above
// the total would check positions past the rows' prefixes: memory-safe, but no plan holds such
// entries). Rows are recorded in entry order on the CPU; several threads record on CUDA (compare as
// a multiset). The canary buffer is only read. Throws kvcanary::Error on invalid arguments before
// anything is written. CUDA: enqueued on `stream`, no synchronisation, graph-capturable.
#pragma once

#include <cstdint>
#include <optional>

#include "kvcanary/context.h"
#include "kvcanary/plan.h"
#include "kvcanary/tensor.h"

namespace kvcanary {

struct FusedVerifyArgs {
  LaunchContext context;
  // The other half of the same group, checked against the same entries (as VerifyArgs).
  std::optional<LaunchContext> paired_context;
  bool check_verify_expected_token = false;
  PlanInputs inputs;  // the inputs stage 1 was given (extend_seq_lens is not read)
  // Stage 1's outputs for these inputs.
  TensorView verify_offsets_scratch;  // [>= bs+1] int64
  TensorView verify_num_valid;        // [1] int32
  TensorView verify_enable;           // [1] int32
  int64_t verify_capacity = 0;        // the capacity stage 1 was given
  // The four entry arrays ([S] int64 each) read instead of deriving when the entries fit them.
  std::optional<VerifyPlanView> stored_entries;
};

// Whether a step on `device` is faster storing its verify entries for its fused verifies
// (stored_entries) than deriving them in each, as measured (bench/RESULTS.md, the stored step
// column): on the CPU with sampled verify (verify_sample > 1) or a block table, where an entry
// costs more to derive than to load. On CUDA the two measured within a few percent either way on
// an H100 (storing 1.3% slower on average), so there each verify derives.
inline bool StoredEntriesPay(DeviceType device, int64_t verify_sample, bool block_table) {
  return device == DeviceType::kCPU && (verify_sample > 1 || block_table);
}

void FusedVerify(const FusedVerifyArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
