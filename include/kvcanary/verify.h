// The verify operation: re-checks the records a forward's attention reads.
//
// Semantics, as the CPU backend runs them:
//   kernel_run_counter += 1                      (always, before the enable check)
//   if plan.enable[0] == 0: return
//   n = clamp(verify_num_valid[0], 0, C); slot_run_counter += n
//   for e in [0, n):
//     slot = verify_slot_indices[e]; skip if slot <= 0 or slot >= num_slots
//     prev = verify_prev_slot_indices[e]; reachable = prev != 0 and prev < num_slots
//     chain:    reachable and stored prev_hash != slot_hash(prev)   (prev < 0: the head hash)
//     token:    check and expected != -1 and stored token != expected
//     position: stored position != verify_expected_positions[e]
//     real KV:  stored real_kv_hash != fingerprint of the sources' bytes now
//     any bit set: record one violation row with all bits OR-ed
// The canary buffer is only read. Throws kvcanary::Error on invalid arguments before anything is
// written. CUDA: enqueued on `stream`, no synchronisation, graph-capturable.
#pragma once

#include <optional>

#include "kvcanary/context.h"
#include "kvcanary/plan.h"

namespace kvcanary {

struct VerifyArgs {
  LaunchContext context;
  VerifyPlanView plan;
  bool check_verify_expected_token = false;
  // The other half of the same group (the V buffer of a K launch), verified against the same plan.
  // The result equals a second Verify with this context after the first; the CUDA backend checks
  // both halves in one launch (each entry read once per half, the second time from the cache).
  // Validated like `context`.
  std::optional<LaunchContext> paired_context;
};

void Verify(const VerifyArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
