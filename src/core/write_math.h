// The per-row chain of the write operation, shared by both backends. Only the
// running hash is serial; a backend may compute the real-KV fingerprints of a row's tokens in
// parallel and feed them to AdvanceChain in order.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/record.h"
#include "core/wrap.h"
#include "kvcanary/hash.h"

namespace kvcanary {

// The flat token range [begin, end) of row r, clamped to the forward's tokens (D7).
struct TokenRange {
  int64_t begin = 0;
  int64_t end = 0;
};

KVC_HOST_DEVICE TokenRange RowTokenRange(const WriteParams& p, int64_t r) {
  return TokenRange{ClampCount(p.offsets[r], p.num_tokens), ClampCount(p.offsets[r + 1], p.num_tokens)};
}

// The state a row's chain carries from token to token.
struct ChainState {
  uint64_t running = 0;       // R: what the next written record stores as prev_hash
  bool chain_assert = false;  // seeded row with the chain-position assert on
  int64_t last_position = 0;  // position of the last record in the chain
};

// Reads row r's seed: call for every row before any record is written.
KVC_HOST_DEVICE ChainState LoadChainSeed(const WriteParams& p, int64_t r) {
  ChainState state;
  const int64_t seed = p.seeds[r];
  const bool has_seed = seed >= 0 && seed < p.launch.num_slots;  // seed >= N acts as -1 (D7)
  if (!has_seed) {
    state.running = ChainHeadHash();
    return state;
  }
  const Record seed_record = LoadRecord(p.launch.canary + seed * p.launch.slot_stride_bytes);
  state.running = RecordHash(seed_record);
  state.chain_assert = p.enable_chain_position_assert[0] != 0;
  state.last_position = state.chain_assert ? seed_record.position : 0;
  return state;
}

// True when token i is written (its slot lies in [0, N)).
KVC_HOST_DEVICE bool IsWrittenToken(const WriteParams& p, int64_t i) {
  const int64_t slot = p.out_cache_loc[i];
  return slot >= 0 && slot < p.launch.num_slots;
}

// The write-input assert of one token: true, with `row` filled, when the token or the
// position differs from what the engine expected.
KVC_HOST_DEVICE bool InputAssertFails(const LaunchParams& launch, int64_t slot, int64_t token,
                                      int64_t position, int64_t expected_token,
                                      int64_t expected_position, int64_t stored_chain,
                                      ViolationRow* row) {
  const int64_t bits = (token != expected_token ? FailReason::kWriteTokenMismatch : 0) |
                       (position != expected_position ? FailReason::kWritePositionMismatch : 0);
  if (bits == 0) return false;
  *row = ViolationRow{launch.kernel_kind, slot,         position,          token,
                      expected_token,     stored_chain, expected_position, bits};
  return true;
}

// The chain-position assert of one token: true, with `row` filled, when its position does not
// follow `last_position`, the position of the chain's previous record.
KVC_HOST_DEVICE bool ChainAssertFails(const LaunchParams& launch, int64_t slot, int64_t token,
                                      int64_t position, int64_t last_position,
                                      int64_t stored_chain, ViolationRow* row) {
  const int64_t expected_position = WrapAdd(last_position, 1);
  if (position == expected_position) return false;
  *row = ViolationRow{launch.kernel_kind, slot,         position,          token,
                      token,              stored_chain, expected_position,
                      FailReason::kWritePositionMismatch};
  return true;
}

// Runs row state's chain over token i, which goes to `slot` (REQUIRES IsWrittenToken): reports
// the assert violations through record_violation(const ViolationRow&) in spec order, advances the
// chain on the actual token and position, and returns the prev_hash the token's record stores.
// Token, position and slot are passed in so a backend may stage them (the CUDA kernel reads them
// from shared memory).
template <typename RecordViolation>
KVC_HOST_DEVICE int64_t AdvanceChain(const WriteParams& p, int64_t i, int64_t slot, int64_t token,
                                     int64_t position, ChainState* state,
                                     RecordViolation&& record_violation) {
  const int64_t stored_chain = ToSigned(state->running);
  ViolationRow row;
  if (p.input_assert && InputAssertFails(p.launch, slot, token, position, p.expected_tokens[i],
                                         p.expected_positions[i], stored_chain, &row)) {
    record_violation(row);
  }
  if (state->chain_assert) {
    if (ChainAssertFails(p.launch, slot, token, position, state->last_position, stored_chain,
                         &row)) {
      record_violation(row);
    }
    state->last_position = position;
  }
  state->running = ChainStep(state->running, token, position);
  return stored_chain;
}

// The record address of `slot`.
KVC_HOST_DEVICE uint8_t* RecordAddress(const LaunchParams& launch, int64_t slot) {
  return launch.canary + slot * launch.slot_stride_bytes;
}

}  // namespace kvcanary
