#include "kvcanary/runtime/capacities.h"

#include <algorithm>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "kvcanary/plan.h"

namespace kvcanary::runtime {
namespace {

void CheckPositive(const char* name, int64_t value) {
  if (value <= 0) ThrowError("kv-canary: ", name, " must be positive, got ", value);
}

// A count an op's plan can hold: [1, kMaxDeviceCount].
void CheckCount(const char* name, int64_t value) {
  CheckInRange<int64_t>(name, value, 1, kMaxDeviceCount);
}

void CheckNonNegative(const char* name, int64_t value) {
  if (value < 0) ThrowError("kv-canary: ", name, " must be non-negative, got ", value);
}

}  // namespace

Capacities Capacities::FromArgs(int64_t req_to_token_pool_size, int64_t max_seq_len_per_req,
                                int64_t pool_slot_count, int64_t cuda_graph_max_bs,
                                int64_t speculative_num_draft_tokens, int64_t max_prefill_tokens,
                                std::optional<int64_t> chunked_prefill_size) {
  CheckPositive("req_to_token_pool_size", req_to_token_pool_size);
  CheckPositive("max_seq_len_per_req", max_seq_len_per_req);
  CheckPositive("pool_slot_count", pool_slot_count);
  CheckNonNegative("cuda_graph_max_bs", cuda_graph_max_bs);
  CheckNonNegative("speculative_num_draft_tokens", speculative_num_draft_tokens);
  CheckPositive("max_prefill_tokens", max_prefill_tokens);

  Capacities capacities;
  capacities.verify_capacity =
      std::max(CheckedMul("per_forward_verify_capacity", 3, pool_slot_count),
               max_seq_len_per_req);
  capacities.write_req_capacity = std::max(cuda_graph_max_bs, req_to_token_pool_size);
  const int64_t decode_tokens =
      CheckedMul("per_forward_write_entry_capacity", capacities.write_req_capacity,
                 std::max<int64_t>(1, speculative_num_draft_tokens));
  const bool chunk_limited = chunked_prefill_size.has_value() && *chunked_prefill_size >= 0;
  const int64_t prefill_tokens =
      chunk_limited ? std::min(max_prefill_tokens, *chunked_prefill_size) : max_prefill_tokens;
  capacities.write_entry_capacity = std::max(decode_tokens, prefill_tokens);

  // Unreachable after the checks above, kept because SGLang checks its results the same way and
  // a future formula change must not slip a zero capacity through to the plan allocations.
  CheckPositive("per_forward_verify_capacity", capacities.verify_capacity);
  CheckPositive("per_forward_write_req_capacity", capacities.write_req_capacity);
  CheckPositive("per_forward_write_entry_capacity", capacities.write_entry_capacity);
  // The rows and tokens of a forward are the engine's; past an op's count they cannot be planned.
  CheckCount("per_forward_write_req_capacity", capacities.write_req_capacity);
  CheckCount("per_forward_write_entry_capacity", capacities.write_entry_capacity);
  return capacities;
}

void Capacities::Validate() const {
  CheckCount("capacities.verify_capacity", verify_capacity);
  CheckCount("capacities.write_req_capacity", write_req_capacity);
  CheckCount("capacities.write_entry_capacity", write_entry_capacity);
}

int64_t ForwardSnapshotBytes(int num_groups) {
  const int64_t enable_bytes = 4 * int64_t{num_groups};
  const int64_t counter_bytes = 2 * kNumLaunchTags * 8;
  const int64_t write_index_bytes = 4;
  const int64_t swa_totals_bytes = 2 * 4;
  return enable_bytes + counter_bytes + write_index_bytes + swa_totals_bytes;
}

int64_t ForwardWorkspaceBytes(const Capacities& capacities, int num_groups) {
  if (num_groups < 1 || num_groups > 2) {
    ThrowError("kv-canary: num_groups must be 1 or 2, got ", num_groups);
  }
  const int64_t groups = num_groups;
  const int64_t req = capacities.write_req_capacity;
  const int64_t entry = capacities.write_entry_capacity;
  // Capacities may come from the engine as given; every product is checked.
  const int64_t plans =
      CheckedMul("workspace plan bytes", groups,
                 CheckedAdd("plan bytes", VerifyPlanAllocationBytes(capacities.verify_capacity),
                            WritePlanAllocationBytes(req)));
  const int64_t expected_inputs = CheckedMul("expected input bytes", 16, entry);
  const int64_t plan_input = CheckedMul("plan input bytes", 32, req);
  const int64_t scratch = CheckedMul("plan scratch bytes", 8, CheckedAdd("req rows", req, 1));
  const int64_t swa_slots = CheckedMul("SWA slot bytes", groups, 8, entry);
  return CheckedAdd("forward workspace bytes", plans, expected_inputs, plan_input, scratch,
                    swa_slots, ForwardSnapshotBytes(num_groups));
}

}  // namespace kvcanary::runtime
