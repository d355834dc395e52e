// Launch capacities: the fixed sizes every per-forward plan and input buffer
// is allocated with at install, so no step ever allocates.
#pragma once

#include <cstdint>
#include <optional>

namespace kvcanary::runtime {

struct Capacities {
  // Verify entries per plan: max(3 × pool_slot_count, max_seq_len_per_req). 3× covers radix
  // sharing (Σ prefix lengths can exceed the pool); the max lets any single row fit, so an
  // overflowing batch can always be verified in row ranges (R1, R2 in docs/ARCHITECTURE.md).
  int64_t verify_capacity = 0;
  // Batch rows per forward: max(cuda_graph_max_bs, req_to_token_pool_size).
  int64_t write_req_capacity = 0;
  // Tokens per forward: max(rows × max(1, draft tokens), min(max_prefill_tokens, chunk size)).
  int64_t write_entry_capacity = 0;

  // Validates the arguments in signature order, then the results, with SGLang's texts
  // ("kv-canary: <name> must be positive, got <v>", "... must be non-negative, got <v>",
  // "kv-canary: per_forward_<capacity> must be positive, got <v>"). An absent or negative
  // `chunked_prefill_size` means unlimited. A result beyond int64 throws.
  static Capacities FromArgs(int64_t req_to_token_pool_size, int64_t max_seq_len_per_req,
                             int64_t pool_slot_count, int64_t cuda_graph_max_bs,
                             int64_t speculative_num_draft_tokens, int64_t max_prefill_tokens,
                             std::optional<int64_t> chunked_prefill_size);

  // Each capacity in [1, kMaxDeviceCount] (the largest count an op's plan holds), checked in field
  // order before install allocates anything: "kv-canary: capacities.<field> must be in [1,
  // 2147483647], got <v>". FromArgs's results pass it but for a verify_capacity past the limit,
  // which install lowers (a smaller plan is verified in row ranges or derives its entries).
  void Validate() const;
};

// Device bytes of one inner forward's workspace, as a plain sum with no alignment
// padding:
//   num_groups × (VerifyPlanAllocationBytes(verify) + WritePlanAllocationBytes(req))
//   + 16 × entry                     ExpectedInputs: tokens and positions, int64
//   + 32 × req                       PlanInput: four int64 arrays
//   + 8 × (req + 1)                  plan scratch, int64
//   + num_groups × 8 × entry         translated SWA slots, int64, one buffer per group
//   + ForwardSnapshotBytes(num_groups)
// REQUIRES: num_groups in {1, 2}; capacities as returned by FromArgs.
int64_t ForwardWorkspaceBytes(const Capacities& capacities, int num_groups);

// Bytes of one inner forward's snapshot: per group an int32 `enable`, both int64 [12]
// counter arrays, the int32 write index and the optional int32 [2] SWA totals (always counted).
int64_t ForwardSnapshotBytes(int num_groups);

}  // namespace kvcanary::runtime
