// Bytes each op must touch, counted the same way for every op: every input read once and every output
// written once, per verify entry or written token, plus the real-KV bytes read in `partial`.
// Nothing is counted for cache-line granularity: these are the bytes the op needs, so GB/s below
// the ceiling also shows what random 32-byte records cost.
#pragma once

#include <cstdint>

#include "kvcanary/format.h"

namespace kvcanary::bench {

// Plan-array bytes one verify entry reads: slot, expected position and predecessor (int64 each),
// and the expected token only when the token check is on (verify never reads it
// otherwise).
inline constexpr int64_t VerifyPlanEntryBytes(bool check_token) {
  return (check_token ? 4 : 3) * int64_t{8};
}

// Per entry: its own record, its predecessor's record, its plan entry; per source 16 bytes.
inline constexpr int64_t VerifyBytes(int64_t entries, bool check_token, int num_sources) {
  return entries * (2 * kCanarySlotBytes + VerifyPlanEntryBytes(check_token) +
                    num_sources * kRealKvBlockBytes);
}

// The fused verify derives each entry from its req_to_token cell (int32) instead of reading a plan
// entry; the expected-token pool cell (int32) only with the token check on. The predecessor's cell
// is the previous entry's, so it is not counted twice.
inline constexpr int64_t FusedVerifyBytes(int64_t entries, bool check_token, int num_sources) {
  return entries * (2 * kCanarySlotBytes + (check_token ? 2 : 1) * int64_t{4} +
                    num_sources * kRealKvBlockBytes);
}

// Per token: input_ids, positions and out_cache_loc read (int64 each), one record written; per
// source 16 bytes. Per-row plan reads and seed records are not per token and are left out.
inline constexpr int64_t WriteBytes(int64_t tokens, int num_sources) {
  return tokens * (3 * int64_t{8} + kCanarySlotBytes + num_sources * kRealKvBlockBytes);
}

// Plan: per entry the four plan arrays written and the two req_to_token reads (slot, predecessor);
// per row its three inputs read and its write-plan entries (offset, seed) written.
inline constexpr int64_t PlanBytes(int64_t entries, int64_t rows) {
  return entries * (4 * int64_t{8} + 2 * int64_t{4}) + rows * (3 + 2) * int64_t{8};
}

// The offsets-only plan: per row its three inputs read and its write-plan entries written.
inline constexpr int64_t PlanOffsetsBytes(int64_t rows) { return rows * (3 + 2) * int64_t{8}; }

// One canary step as the runtime runs it: the offsets-only plan, then fused verify and write for
// HEAD K/V (no sources) and TAIL K/V (`tail_sources` each).
inline constexpr int64_t StepBytes(int64_t entries, int64_t rows, int64_t tokens, bool check_token,
                                   int tail_sources) {
  return PlanOffsetsBytes(rows) + 2 * FusedVerifyBytes(entries, check_token, 0) +
         2 * FusedVerifyBytes(entries, check_token, tail_sources) + 2 * WriteBytes(tokens, 0) +
         2 * WriteBytes(tokens, tail_sources);
}

static_assert(VerifyBytes(1, false, 0) == 88 && VerifyBytes(1, true, 1) == 112);
static_assert(WriteBytes(1, 0) == 56 && WriteBytes(1, 1) == 72);
static_assert(FusedVerifyBytes(1, false, 0) == 68 && FusedVerifyBytes(1, true, 1) == 88);

}  // namespace kvcanary::bench
