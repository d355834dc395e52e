// The check of one verify entry (spec/kernels.md §8), shared by both backends.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/real_kv.h"
#include "core/record.h"
#include "kvcanary/hash.h"

namespace kvcanary {

// Checks entry e. Returns its fail bits (0 when it passes or is skipped) and, when non-zero, fills
// `row` with the violation to record.
KVC_HOST_DEVICE int64_t CheckVerifyEntry(const VerifyParams& p, int64_t e, ViolationRow* row) {
  const LaunchParams& launch = p.launch;
  const int64_t slot = p.slot_indices[e];
  if (slot <= kTokenToKvSlotPadding || slot >= launch.num_slots) return 0;  // D1, D7
  const Record stored = LoadRecord(launch.canary + slot * launch.slot_stride_bytes);
  const int64_t expected_token = p.check_token ? p.expected_tokens[e] : -1;
  const int64_t prev = p.prev_slot_indices[e];
  const bool reachable = prev != 0 && prev < launch.num_slots;
  int64_t expected_hash = stored.prev_hash;
  if (reachable) {
    expected_hash = ToSigned(
        prev < 0 ? ChainHeadHash()
                 : RecordHash(LoadRecord(launch.canary + prev * launch.slot_stride_bytes)));
  }
  const int64_t expected_real_kv = ToSigned(RealKvFingerprint(launch.real_kv, slot));

  int64_t bits = 0;
  if (reachable && stored.prev_hash != expected_hash) bits |= FailReason::kVerifyChainHashMismatch;
  if (p.check_token && expected_token != -1 && stored.token != expected_token) {
    bits |= FailReason::kVerifyTokenMismatch;
  }
  if (stored.position != p.expected_positions[e]) bits |= FailReason::kVerifyPositionMismatch;
  if (stored.real_kv_hash != expected_real_kv) bits |= FailReason::kVerifyRealKvHashMismatch;
  if (bits != 0) {
    *row = ViolationRow{launch.kernel_kind, slot,          stored.position, stored.token,
                        expected_token,     stored.prev_hash, expected_hash, bits};
  }
  return bits;
}

}  // namespace kvcanary
