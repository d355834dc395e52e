// The write operation: stores the record of every token a forward writes.
//
// Semantics, as the CPU backend runs them:
//   kernel_run_counter += 1
//   for r in [0, clamp(write_num_valid_reqs[0], 0, R)):
//     tokens [a, b) = write_offsets[r], write_offsets[r+1] clamped to [0, num_tokens]
//     R = seed in [0, N) ? slot_hash(seed) : head hash; last_pos = seed's stored position
//     for i in [a, b):
//       slot = out_cache_loc[i]; skip (R does not advance) if slot < 0 or slot >= N
//       input assert:   token/position differ from the expected tensors -> one row
//       chain assert:   (seeded rows, flag != 0) position != last_pos + 1 -> one row
//       record(slot) = (token, position, R, real_kv_hash(slot)); R = mix3(R, token, position)
//     slot_run_counter += tokens written
// All seeds are read before any record is written. Throws kvcanary::Error on invalid arguments
// before anything is written. CUDA: enqueued on `stream`, no synchronisation, graph-capturable.
#pragma once

#include <optional>

#include "kvcanary/context.h"
#include "kvcanary/plan.h"

namespace kvcanary {

struct WriteArgs {
  LaunchContext context;
  WritePlanView plan;
  TensorView input_ids;      // [num_tokens] int64 tokens of the forward
  TensorView positions;      // [num_tokens] int64
  TensorView out_cache_loc;  // [num_tokens] int64 canary slot per token; < 0 = skip
  bool enable_write_input_assert = false;
  TensorView expected_input_tokens;     // [num_tokens] int64, given iff the input assert is on
  TensorView expected_input_positions;  // [num_tokens] int64, given iff the input assert is on
  // The other half of the same group (the V buffer of a K launch): written by the same plan and
  // inputs with its own buffer, tag, counters and sources. The result equals a second Write with
  // this context after the first (on the CPU that is what runs; the CUDA backend runs both chains
  // concurrently in one launch, so a paired write costs one chain's latency, not two). Validated
  // like `context`, before anything is written.
  std::optional<LaunchContext> paired_context;
};

void Write(const WriteArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
